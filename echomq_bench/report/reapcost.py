"""The report's section for a `reapcost` run: what one reap call blocks the
server for against its cap and the set size M, in each form of the live
entries beside the expired ones (bare, or with job rows) side by side, and
how long a mass crash takes to drain.

A record written before the forms (schema 1 and older) has no form column
and no forms in its summary: it is the bare form alone, and says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table

__all__ = ["reapcost_section", "reapcost_finding"]

PRODUCT_CAP = 100
_BARE_ONLY = {"bare": {"label": "bare", "meaning": "sorted-set members only, with no job rows; this record was "
                                                   "written before the with-job-rows form was measured"}}


def _forms(run: Run) -> dict[str, dict[str, Any]]:
    """Each form the run measured, by its key: its label and what it means."""
    forms = run.summary.get("forms")
    return forms if isinstance(forms, dict) and forms else _BARE_ONLY


def _with_form(frame: pd.DataFrame) -> pd.DataFrame:
    """A table written before the forms is the bare form alone."""
    return frame if "form" in frame.columns else frame.assign(form="bare")


def _labelled(frame: pd.DataFrame, forms: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The form column as its label."""
    return frame.assign(form=[str(forms.get(f, {}).get("label", f)) for f in frame["form"]])


def _lines(frame: pd.DataFrame, forms: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """For a chart: with more than one form, the build names its form too,
    so each line says which is which."""
    out = _labelled(frame, forms)
    return out.assign(build=out["build"].astype(str) + ", " + out["form"]) if len(forms) > 1 else out


def reapcost_section(run: Run, out: Path) -> list[Block]:
    forms = _forms(run)
    points = _with_form(run.table("reapcost"))
    points = points[(points["metric"] == "server_us") & (points["verb"] == "reap")]
    drains = _with_form(run.tables.get("drain", pd.DataFrame()))
    if len(drains):
        drains = drains[(drains.get("metric") == "drain_at_cadence_ms") & (drains.get("verb") == "reap")]
    wide = points.groupby(["build", "form", "M", "cap", "k"])["value"].median().reset_index()
    full = _labelled(wide[wide["k"] == wide["cap"]], forms).pivot_table(
        index=["build", "form", "cap"], columns="M", values="value").reset_index()
    full.columns = [c if isinstance(c, str) else f"M={int(c):,} µs" for c in full.columns]
    repeats = points.groupby(["build", "form", "M", "cap", "k"]).size().min()
    footer = " ".join(context_lines(
        run, trials=f"median of the repeats of each point ({repeats} or more)",
        bottleneck="server (one call at a time; the figure is the server's own time inside the script)"))
    blocks: list[Block] = [Heading("Reap cost against the cap", anchor="reapcost"),
                           Para("One reap call blocks the server for its whole run; that is the latency spike every "
                                "other client waits out. A smaller cap keeps the spike small but drains a mass crash "
                                "more slowly. Flat across M means the cost grows like log M + k, not like M."),
                           Para(("The live entries beside the expired ones, in two forms measured one after the "
                                 "other: " if len(forms) > 1 else "The live entries beside the expired ones: ")
                                + "; ".join(f"{f.get('label', key)} ({f.get('meaning', '?')})"
                                            for key, f in forms.items()) + ".")]
    if len(drains):
        png = charts.reap_curves(_lines(points, forms).rename(columns={"value": "server_us"}),
                                 _lines(drains, forms), PRODUCT_CAP, out / "reapcost_curves.png", footer)
        blocks.append(Image(png, "Reap: blocking time of one call and drain time of a mass crash, product cap marked"))
    blocks.append(Table(full, "Server µs of one reap call that moves cap jobs, by active-set size M and form"))
    pairs = [r for r in run.summary.get("side_by_side") or [] if isinstance(r, dict) and r.get("verb") == "reap"]
    if pairs:
        labels = {key: str(f.get("label", key)) for key, f in forms.items()}
        table = pd.DataFrame(pairs)[["build", "cap", "M", "bare_us", "rows_us", "rows_over_bare"]].rename(
            columns={"bare_us": f"{labels.get('bare', 'bare')} µs", "rows_us": f"{labels.get('rows', 'rows')} µs",
                     "rows_over_bare": f"{labels.get('rows', 'rows')} / {labels.get('bare', 'bare')}"})
        blocks.append(Table(table, "One reap call that moves cap jobs, bare against with job rows"))
    blocks.append(Notes([footer]))
    return blocks


def reapcost_finding(run: Run) -> str | None:
    """One reap call at the product cap, at the largest M: with job rows
    when the run has them, the bare figure beside it."""
    t = _with_form(run.table("reapcost"))
    t = t[(t["metric"] == "server_us") & (t["verb"] == "reap") & (t["cap"] == PRODUCT_CAP)
          & (t["k"] == PRODUCT_CAP)]
    parts = []
    for build, rows in t.groupby("build", sort=False):
        largest = int(rows["M"].max())
        us = rows[rows["M"] == largest].groupby("form")["value"].median()
        if "rows" in us:
            bare = f" (bare {us['bare']:,.0f} µs)" if "bare" in us else ""
            parts.append(f"{build}: {us['rows']:,.0f} µs at M={largest:,} with job rows{bare}")
        elif "bare" in us:
            parts.append(f"{build}: {us['bare']:,.0f} µs at M={largest:,}")
    if not parts:
        return None
    return f"One reap call at the default cap of {PRODUCT_CAP} blocks the server for " + "; ".join(parts) + "."
