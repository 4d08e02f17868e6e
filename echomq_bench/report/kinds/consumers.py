"""A `consumers` record: how does throughput grow with consumers, and which
side is the bound? Each consumer is one connection with one claim or
complete in flight, the closed loop a worker pool makes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines, machine
from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table

__all__ = ["section", "answer"]

QUESTION = "How does throughput grow with consumers?"
FIGURES = ("cycles_per_s", "server_utilization", "server_wait", "client_utilization")
PREFERRED_BUILD = "redis7.0"   # the sentence's example is the main job's baseline when it is here


def _points(run: Run) -> pd.DataFrame:
    """build, consumers, bound and the figures, one row per point (trials by their median)."""
    t = run.table("consumers")
    wide = t[t["metric"].isin(FIGURES)].pivot_table(index=["build", "consumers"], columns="metric", values="value",
                                                    aggfunc="median").reset_index()
    bounds = t.groupby(["build", "consumers"])["bound"].first().reset_index()
    order = {b: i for i, b in enumerate(dict.fromkeys(t["build"]))}
    out = wide.merge(bounds, on=["build", "consumers"])
    return out.sort_values(["build", "consumers"], key=lambda c: c.map(order) if c.name == "build" else c)


def _bound_text(rows: pd.DataFrame) -> str:
    """Which side bound the most consumers: 'server on 4 of 4 builds'."""
    top = rows[rows["consumers"] == rows["consumers"].max()]
    counts = top["bound"].value_counts()
    side = {"server": "the server", "client": "the client", "neither": "neither side (the round trip)"}
    return ", ".join(f"{side.get(str(k), k)} on {v} of {len(top)} builds" for k, v in counts.items())


def answer(run: Run, out: Path) -> Answer | None:
    points = _points(run)
    if points.empty:
        return None
    lo, hi = int(points["consumers"].min()), int(points["consumers"].max())
    growth = {}
    for build, rows in points.groupby("build", sort=False):
        first = float(rows[rows["consumers"] == lo]["cycles_per_s"].iloc[0])
        last = float(rows[rows["consumers"] == hi]["cycles_per_s"].iloc[0])
        growth[str(build)] = (first, last)
    named = PREFERRED_BUILD if PREFERRED_BUILD in growth else next(iter(growth))
    first, last = growth[named]
    factors = [b / a for a, b in growth.values()]
    spread = f"{min(factors):.1f}–{max(factors):.1f}×" if len(factors) > 1 else f"{factors[0]:.1f}×"
    line = (f"From {lo} to {hi} consumers throughput grows {spread} (on {named}, {first:,.0f} to {last:,.0f} "
            f"cycles/s); the bound at {hi}: {_bound_text(points)}.")
    png = charts.consumers_growth(points, out / "answer_consumers.png")
    window = (run.meta.get("settings") or {}).get("window_s")
    foot = (f"Each consumer one connection with one call in flight; one trial per point"
            f"{f' of {float(window):g} s' if window else ''}, builds one after another, server and consumers "
            f"unpinned on {machine(run)}. A side is the bound when busy, or waiting for a core, 97% of the window; "
            "'neither' means the round trip set the pace.")
    return Answer(QUESTION, [line], png, foot, "answer-consumers")


def section(run: Run, out: Path) -> list[Block]:
    points = _points(run)
    table = points.rename(columns={"cycles_per_s": "cycles/s", "server_utilization": "server busy",
                                   "server_wait": "server wait", "client_utilization": "client CPU"})
    return [Heading("Throughput against consumers", anchor="consumers"),
            Para("Each consumer is one connection with one claim or complete in flight: the closed loop a worker "
                 "pool makes. Throughput climbs until the server's main thread or the client runs out."),
            Table(table, "Throughput against consumers"),
            Image(charts.throughput_vs_consumers(points, out / "consumers.png"),
                  "Throughput against consumers, one line per build"),
            Notes(context_lines(run, trials="one trial per point", bottleneck=_bound_text(points)))]
