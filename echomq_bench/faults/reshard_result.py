"""A reshard run's verdict and the record it is written as: the run builds
its `echomq_bench.records.kinds.reshard.ReshardRun`, `judged` adds whether it
passed, `reshard_record` writes the runs in summary.json and one tidy row
per cluster and figure."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from echomq_bench.faults.failover_result import audit_figures
from echomq_bench.records.kinds.faults import AuditEntry
from echomq_bench.records.kinds.reshard import ReshardRecord, ReshardRun
from echomq_bench.records.record import Record

__all__ = ["judged", "reshard_record"]


def judged(run: ReshardRun) -> ReshardRun:
    """The run with its verdict: the audit passed, no job row stranded or set member without a row,
    no move refused, and the call-log check passed."""
    return replace(run, passed=(bool(AuditEntry.from_record(run.audit).passed) and run.in_no_set == 0
                                and run.without_row == 0 and run.move_refused is None
                                and bool(run.history.get("passed", True))))


def reshard_record(runs: list[ReshardRun], info: dict[str, Any]) -> Record:
    """The run as it is written: the runs in summary.json, one tidy row per figure."""
    rows = []
    for r in runs:
        for metric, value, unit in (
            ("moves", r.moves, "moves"), ("keys_moved", r.keys_moved, "keys"), ("moving", r.moving_s, "s"),
            ("move_refused", int(r.move_refused is not None), "bool"),
            ("failed_calls", sum(r.errors.values()), "calls"), ("calls", r.ops, "calls"), ("load", r.load_s, "s"),
            ("in_no_set", r.in_no_set, "jobs"), ("without_row", r.without_row, "jobs"),
            *audit_figures(r.audit, r.history),
        ):
            rows.append({"server": r.name, "version": r.version, "metric": metric, "value": value, "unit": unit})
    return Record(kind="reshard", summary=ReshardRecord(tuple(runs)).to_record(), meta=info, tables={"reshard": rows})
