"""A `peers` record: the same no-op jobs through echomq and the other queues."""

from __future__ import annotations

from pathlib import Path

from echomq_bench.records.files import Run
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Table

__all__ = ["section"]


def section(run: Run, out: Path) -> list[Block]:
    t = run.table("peers")
    keep = t[t["metric"].isin(["server_us_per_job", "commands_per_job", "drain_jobs_per_s", "enqueue_jobs_per_s"])]
    idx = [c for c in ("server", "build", "queue", "mode") if c in keep.columns]
    piv = keep.pivot_table(index=idx, columns="metric", values="value", aggfunc="median").reset_index()
    return [Heading("Beside BullMQ and the Python queues", anchor="peers"), Table(piv, "Peers: the same no-op jobs"),
            Notes(context_lines(run, bottleneck="client (Python consumers); compare server µs per job"))]
