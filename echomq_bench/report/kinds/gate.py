"""A `gate` record: each verb's server time against its baseline."""

from __future__ import annotations

from pathlib import Path

from echomq_bench.records.files import Run
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Table

__all__ = ["section"]


def section(run: Run, out: Path) -> list[Block]:
    return [Heading("Microbenchmarks", anchor="gate"), Table(run.table("microbench").head(60), "Per verb"),
            Notes(context_lines(run))]
