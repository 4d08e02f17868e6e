"""A `faults` record: each fault under load and the audit of every job; a
soak's schedule, recovery per fault kind and timeline."""

from __future__ import annotations

from pathlib import Path

from echomq_bench.records.files import Run
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table

__all__ = ["section"]


def section(run: Run, out: Path) -> list[Block]:
    t = run.table("faults")
    piv = t.pivot_table(index=[c for c in ("server", "scenario") if c in t.columns], columns="metric",
                        values="value", aggfunc="first").reset_index()
    return [Heading("Faults", anchor="faults"), Table(piv, "Fault scenarios and their audits"),
            *_soak_blocks(run), Notes(context_lines(run))]


def _soak_blocks(run: Run) -> list[Block]:
    """A soak's schedule, recovery per fault kind and timeline, when the record holds a soak."""
    soaks = run.summary.get("soak") or []
    if not soaks:
        return []
    first = soaks[0]
    blocks: list[Block] = [Para(
        f"Soak: {first.get('duration_s', 0):g} s per build under the steady load, seed {first.get('seed')} "
        f"(replay with --seed), a random schedule of process and network faults with recovery gaps, audited "
        f"at the end. Recovery runs from {first.get('recovery_means', 'as docs/guide/faults.md defines it')}; a "
        "fault the load did not recover from before the next one counts as not recovered.")]
    if "soak_kinds" in run.tables:
        blocks.append(Table(run.table("soak_kinds"), "Soak: faults injected and recovery (s) per kind"))
    for soak in soaks:
        png = run.path / str(soak.get("chart"))
        if soak.get("chart") and png.is_file():
            blocks.append(Image(png, f"Soak on {soak.get('server')}: completes per second, faults shaded by "
                                     "family and labelled by kind"))
    return blocks
