"""A reshard run's result as the run measured it (the audit's report whole),
and the record it is written as: `ReshardResult.to_run()` is its entry,
typed (`echomq_bench.records.kinds.reshard`), `reshard_record` the run's
record, one tidy row per cluster and figure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from echomq_bench.faults.failover_result import HISTORY_FIGURES
from echomq_bench.load.audit import AuditReport
from echomq_bench.records.kinds.reshard import ReshardRecord, ReshardRun
from echomq_bench.records.record import Record

__all__ = ["ReshardResult", "reshard_record"]


@dataclass(frozen=True)
class ReshardResult:
    name: str
    version: str
    queues: list[str]
    slot: int
    moves: int          # whole moves of the slot, each to the other master
    keys_moved: int
    moving_s: float     # how long the slot was moving, all moves together
    move_refused: str | None  # a MIGRATE the target refused (a key written there twice), which failed the run
    load_s: float
    errors: dict[str, int]
    ops: int
    in_no_set: int      # job rows whose id no set of their queue holds: stranded
    without_row: int    # set members with no row: a job that can never run
    doubt_enqueue: int
    doubt_enqueue_found: int
    doubt_complete: int
    doubt_complete_gone: int
    report: AuditReport
    history: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return (self.report.passed and self.in_no_set == 0 and self.without_row == 0
                and self.move_refused is None and bool(self.history.get("passed", True)))

    def to_run(self) -> ReshardRun:
        """The run as summary.json holds it."""
        return ReshardRun(
            name=self.name, version=self.version, queues=tuple(self.queues), slot=self.slot, moves=self.moves,
            keys_moved=self.keys_moved, moving_s=self.moving_s, move_refused=self.move_refused, load_s=self.load_s,
            errors=dict(self.errors), ops=self.ops, in_no_set=self.in_no_set, without_row=self.without_row,
            doubt_enqueue=self.doubt_enqueue, doubt_enqueue_found=self.doubt_enqueue_found,
            doubt_complete=self.doubt_complete, doubt_complete_gone=self.doubt_complete_gone,
            history=dict(self.history), audit=self.report.to_dict(), passed=self.passed)


def reshard_record(results: list[ReshardResult], info: dict[str, Any]) -> Record:
    """The run as it is written: the results in summary.json, one tidy row per figure."""
    rows = []
    for r in results:
        for metric, value, unit in (
            ("moves", r.moves, "moves"), ("keys_moved", r.keys_moved, "keys"), ("moving", r.moving_s, "s"),
            ("move_refused", int(r.move_refused is not None), "bool"),
            ("failed_calls", sum(r.errors.values()), "calls"), ("calls", r.ops, "calls"), ("load", r.load_s, "s"),
            ("enqueued", r.report.enqueued, "jobs"), ("lost", r.report.lost, "jobs"),
            ("in_no_set", r.in_no_set, "jobs"), ("without_row", r.without_row, "jobs"),
            ("in_two_places", r.report.in_two_places, "jobs"), ("audit_passed", int(r.report.passed), "bool"),
            *((f"history_{k}", (r.history.get("counts") or {}).get(k), "jobs") for k in HISTORY_FIGURES),
            ("history_passed", int(bool(r.history.get("passed"))) if r.history else None, "bool"),
        ):
            rows.append({"server": r.name, "version": r.version, "metric": metric, "value": value, "unit": unit})
    return Record(kind="reshard", summary=ReshardRecord(tuple(r.to_run() for r in results)).to_record(), meta=info,
                  tables={"reshard": rows})
