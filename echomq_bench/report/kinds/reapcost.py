"""A `reapcost` record: what does the reaper's cap cost? How long one reap
call blocks the server at the cap, against the size of the active set, and
how long a mass crash takes to drain at the reaper's interval; what another
cap would change. The live entries beside the expired ones come in two
forms, bare sorted-set members and members with their job rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from echomq_bench.lease.recommend import fmt_ms
from echomq_bench.records.files import Run
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table

__all__ = ["section", "answer", "PRODUCT_CAP"]

QUESTION = "What does the reaper's cap cost?"
PRODUCT_CAP = 100
PREFERRED_BUILD = "redis7.0"   # the sentence speaks of the main job's baseline when it is here


def _form_of(run: Run) -> tuple[str, str]:
    """The form the answer reads (with job rows, a real queue's keyspace, when measured) and its label."""
    forms = run.summary.get("forms") or {}
    key = "rows" if "rows" in forms else next(iter(forms), "bare")
    return key, str((forms.get(key) or {}).get("label", key))


def _full_calls(run: Run, form: str) -> tuple[pd.DataFrame, int]:
    """build, cap, ms: one call that moves `cap` expired jobs, at the largest M, median of its repeats."""
    t = run.table("reapcost")
    t = t[(t["metric"] == "server_us") & (t["verb"] == "reap") & (t["form"] == form) & (t["k"] == t["cap"])]
    largest = int(t["M"].max())
    full = t[t["M"] == largest].groupby(["build", "cap"], sort=False)["value"].median().reset_index()
    return full.assign(ms=full["value"] / 1000.0)[["build", "cap", "ms"]], largest


def _drains(run: Run, form: str) -> tuple[pd.DataFrame, int, float]:
    """build, cap, s: a mass crash of K drained at one call per tick of the reaper's interval."""
    d = run.table("drain")
    d = d[(d["metric"] == "drain_at_cadence_ms") & (d["verb"] == "reap") & (d["form"] == form)]
    cadence = float(d["cadence_ms"].min())
    d = d[d["cadence_ms"] == cadence]
    out = d.groupby(["build", "cap"], sort=False)["value"].median().reset_index()
    return out.assign(s=out["value"] / 1000.0)[["build", "cap", "s"]], int(d["K"].iloc[0]), cadence


def _at(frame: pd.DataFrame, build: str, cap: int, column: str) -> float | None:
    hit = frame[(frame["build"] == build) & (frame["cap"] == cap)][column]
    return float(hit.iloc[0]) if len(hit) else None


def _sentence(build: str, version: str, blocking: pd.DataFrame, drains: pd.DataFrame, m: int, k: int,
              cadence: float, label: str) -> str:
    def block_ms(cap: int) -> str:
        v = _at(blocking, build, cap, "ms")
        return "?" if v is None else f"{v:.2g} ms"

    def drain(cap: int) -> str:
        v = _at(drains, build, cap, "s")
        return "?" if v is None else fmt_ms(v * 1000)

    others = [c for c in sorted(set(blocking["cap"])) if c != PRODUCT_CAP]
    then = "; ".join(f"cap {c:,} would block {block_ms(c)} and drain in {drain(c)}" for c in others)
    return (f"At cap {PRODUCT_CAP}, one reap call blocks {version} for {block_ms(PRODUCT_CAP)} at M = {m:,} live "
            f"leases ({label}), and a crash of {k:,} jobs drains in {drain(PRODUCT_CAP)} at one reap every "
            f"{fmt_ms(cadence)}" + (f"; {then}." if then else "."))


def _version(run: Run, build: str) -> str:
    for s in run.summary.get("builds") or ():
        if isinstance(s, dict) and s.get("build") == build:
            return str(s.get("version") or build)
    return build


def answer(run: Run, out: Path) -> Answer | None:
    if "reapcost" not in run.tables or "drain" not in run.tables:
        return None
    form, label = _form_of(run)
    blocking, m = _full_calls(run, form)
    drains, k, cadence = _drains(run, form)
    builds = list(dict.fromkeys(blocking["build"]))
    if not builds:
        return None
    build = PREFERRED_BUILD if PREFERRED_BUILD in builds else builds[0]
    png = charts.reap_against_cap(blocking, drains, PRODUCT_CAP, out / "answer_reap.png")
    table = run.table("reapcost")
    repeats = table[table["metric"] == "server_us"].groupby(["build", "form", "M", "cap", "k"]).size().min()
    foot = (f"Server time of one call from commandstats, median of {repeats} calls per point, at M = {m:,} live "
            f"leases ({label}); drain: ceil(K/cap) calls, one per {fmt_ms(cadence)} tick (the lease sweep's "
            f"interval), plus each call's own time. Bound: the server, one call at a time. Builds: "
            f"{', '.join(builds)}.")
    return Answer(QUESTION, [_sentence(build, _version(run, build), blocking, drains, m, k, cadence, label)], png,
                  foot, "answer-reap")


def section(run: Run, out: Path) -> list[Block]:
    forms = run.summary.get("forms") or {"bare": {"label": "bare"}}
    footer = context_lines(run, trials="median of the repeats of each point",
                           bottleneck="server (one call at a time; the figure is the server's own time inside "
                                      "the script)")
    blocks: list[Block] = [
        Heading("Reap cost against the cap", anchor="reapcost"),
        Para("One reap call blocks the server for its whole run: the latency spike every other client waits out. "
             "A smaller cap keeps the spike small but drains a mass crash more slowly. Flat across M means the "
             "cost grows like log M + k, not like M. The live entries beside the expired ones: "
             + "; ".join(f"{f.get('label', key)} ({f.get('meaning', '?')})" for key, f in forms.items()) + ".")]
    rows = []
    for form in forms:
        blocking, m = _full_calls(run, form)
        drains, k, cadence = _drains(run, form)
        label = str(forms[form].get("label", form))
        png = charts.reap_against_cap(blocking, drains, PRODUCT_CAP, out / f"reapcost_{form}.png")
        blocks.append(Image(png, f"{label}: one full call's blocking time and a {k:,}-job drain at one call per "
                                 f"{fmt_ms(cadence)}, against the cap"))
        merged = blocking.merge(drains, on=["build", "cap"], how="outer")
        rows += [{"form": label, "build": r.build, "cap": int(r.cap), f"ms blocked at M={m:,}": round(r.ms, 3),
                  f"drain of {k:,}, s": round(r.s, 1)} for r in merged.itertuples(index=False)]
    blocks += [Table(pd.DataFrame(rows), "One full reap call and a mass crash's drain, per cap"),
               *_scaling(run), Notes(footer)]
    return blocks


def _scaling(run: Run) -> list[Block]:
    """Whether a call's cost grows with M: the largest M against the smallest, per build and form."""
    lines = []
    for b in run.summary.get("builds") or ():
        reap: dict[str, Any] = ((b.get("verbs") or {}).get("reap") or {}) if isinstance(b, dict) else {}
        if "ratio_largest_to_smallest_M" in reap:
            lines.append(f"{b.get('build')} ({b.get('form_label', b.get('form', 'bare'))}): "
                         f"{reap['ratio_largest_to_smallest_M']:.2f}x from the smallest M to the largest")
    return [Para("One call of 100 at the largest M against the same call at the smallest: " + "; ".join(lines)
                 + ".")] if lines else []
