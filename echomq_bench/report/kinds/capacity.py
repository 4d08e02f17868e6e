"""The report's section for a `capacity` run: each build's headline figures,
what bound it, and its rate over the window when the run kept a timeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table

__all__ = ["section"]


def _num(value: Any, fmt: str) -> str:
    return "" if value is None or value != value else format(value, fmt)


def _builds(run: Run) -> dict[str, dict[str, Any]]:
    builds = run.summary.get("builds") or {}
    return {name: e for name, e in builds.items() if isinstance(e, dict)}


def section(run: Run, out: Path) -> list[Block]:
    rows = []
    for name, e in _builds(run).items():
        claim = (e.get("latency_ms") or {}).get("claim") or {}
        rows.append({
            "build": name, "version": e.get("version", "?"), "mode": e.get("mode", ""),
            "cycles/s": _num(e.get("cycles_per_s"), ",.0f"),
            "server µs/cycle": _num(e.get("server_us_per_cycle"), ".2f"),
            "server busy": _num(e.get("server_utilization"), ".0%"),
            "client CPU": _num(e.get("client_utilization"), ".0%"),
            "bound": e.get("bound", "?"),
            "of ceiling": _num(e.get("of_ceiling"), ".2f"),
            "claim p99 ms": _num(claim.get("p99"), ".2f"),
        })
    bound_text = "; ".join(f"{r['build']}: {r['bound']}, server busy {r['server busy']}" for r in rows)
    notes = context_lines(run, trials="one window per build", bottleneck=bound_text)
    blocks: list[Block] = [
        Heading("Capacity of each build", anchor="capacity"),
        Para("Claim+complete cycles per second each server sustained at its limit (echomq-bench capacity), "
             "with its main thread's CPU per cycle and the side that ran out first."),
        Table(pd.DataFrame(rows), "Capacity per build", id="capacity-table"),
        Notes(notes),
    ]
    timeline = run.tables.get("timeline")
    if timeline is not None and len(timeline) and {"t_s", "value", "build"} <= set(timeline.columns):
        footer = " ".join(notes)
        png = charts.rate_timeline(timeline, out / "capacity_timeline.png", footer)
        blocks += [Image(png, "Cycles/s over the window, one line per build"), Notes([footer])]
    for name, e in _builds(run).items():
        for text in e.get("warnings") or []:
            blocks.append(Para(f"Warning ({name}): {text}"))
    return blocks
