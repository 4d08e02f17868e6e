"""The report's section for a `failover` run: how long a cluster took to
promote a replica and serve again after a master was killed, and what the
audit found of every job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table

__all__ = ["section"]


def _s(value: Any) -> str:
    return "never" if value is None else f"{float(value):.2f}"


def _runs(run: Run) -> list[dict[str, Any]]:
    return [r for r in run.summary.get("runs") or [] if isinstance(r, dict)]


def section(run: Run, out: Path) -> list[Block]:
    rows = []
    for r in _runs(run):
        audit = r.get("audit") or {}
        errors = r.get("errors") or {}
        rows.append({
            "cluster": r.get("name", "?"), "version": r.get("version", "?"),
            "promoted after s": _s(r.get("kill_to_promoted_s")), "all nodes ok after s": _s(r.get("kill_to_ready_s")),
            "enqueues resumed after s": _s(r.get("kill_to_resumed_s")),
            "failed calls": f"{sum(errors.values())} of {r.get('ops', '?')}",
            "enqueued": audit.get("enqueued", ""), "lost": audit.get("lost", ""),
            "audit": "PASS" if audit.get("passed") else "FAIL",
        })
    return [Heading("Failover of a cluster master", anchor="failover"),
            Para("A master is killed (SIGKILL) under a steady enqueue load; its replica takes the slots. The "
                 "times run from the kill; the audit accounts for every job enqueued (echomq-bench failover)."),
            Table(pd.DataFrame(rows), "Failover per cluster", id="failover-table"),
            Notes(context_lines(run, trials="one kill per cluster"))]
