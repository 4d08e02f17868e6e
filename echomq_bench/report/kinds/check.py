"""A `check` record: did every conformance story pass on every server?"""

from __future__ import annotations

from pathlib import Path

from echomq_bench.records.files import Run
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table

__all__ = ["section"]


def section(run: Run, out: Path) -> list[Block]:
    t = run.table("check")
    per = t.groupby(["server", "version"], sort=False)["ok"].agg(["sum", "count"]).reset_index()
    per["result"] = [f"{'PASS' if s == c else 'FAIL'} {s}/{c}" for s, c in zip(per["sum"], per["count"])]
    failed = t[~t["ok"].astype(bool)]
    blocks: list[Block] = [
        Heading("Conformance", anchor="check"),
        Para("The queue's contract played as twelve stories on each server (echomq-bench check): J1-J6 the job "
             "row, L1-L6 the state machine (docs/contract.md)."),
        Table(per[["server", "version", "result"]], "Conformance check", id="check-table"),
    ]
    if len(failed):
        blocks.append(Table(failed[["server", "story", "text"]], "Failed stories"))
    blocks.append(Notes(context_lines(run)))
    return blocks
