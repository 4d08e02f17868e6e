"""A failover run's result as the run measured it (the audit's report whole),
and the record it is written as: `FailoverResult.to_run()` is its entry,
typed (`echomq_bench.records.kinds.failover`), `failover_record` the run's
record, one tidy row per cluster and figure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from echomq_bench.load.audit import AuditReport
from echomq_bench.records.kinds.failover import FailoverRecord, FailoverRun
from echomq_bench.records.record import Record

__all__ = ["FailoverResult", "failover_record", "HISTORY_FIGURES"]

HISTORY_FIGURES = ("lost", "recovered", "unexpected", "duplicated", "token_fell", "stale_accepted", "lease_overlap")


@dataclass(frozen=True)
class FailoverResult:
    name: str
    version: str
    queues: list[str]
    victim: str
    new_master: str
    kill_to_promoted_s: float
    kill_to_ready_s: float
    kill_to_resumed_s: float | None  # None: no enqueue on the victim's queue succeeded before the load stopped
    errors_window_s: float
    errors: dict[str, int]
    ops: int
    load_s: float  # how long the producer ran
    doubt_enqueue: int
    doubt_enqueue_found: int
    doubt_complete: int
    doubt_complete_gone: int
    report: AuditReport
    history: dict[str, Any] = field(default_factory=dict)   # the history check (measurement.historycheck)
    # The claim-only worker: None when none of its claims was answered after the kill.
    kill_to_claim_only_s: float | None = None
    claim_only_failed: int = 0  # its claims that failed after the kill before one was answered

    @property
    def passed(self) -> bool:
        return self.to_run().passed

    def to_run(self) -> FailoverRun:
        return FailoverRun(
            name=self.name, version=self.version, queues=tuple(self.queues), victim=self.victim,
            new_master=self.new_master, kill_to_promoted_s=self.kill_to_promoted_s,
            kill_to_ready_s=self.kill_to_ready_s, kill_to_resumed_s=self.kill_to_resumed_s,
            errors_window_s=self.errors_window_s, errors=dict(self.errors), ops=self.ops, load_s=self.load_s,
            doubt_enqueue=self.doubt_enqueue, doubt_enqueue_found=self.doubt_enqueue_found,
            doubt_complete=self.doubt_complete, doubt_complete_gone=self.doubt_complete_gone,
            audit=self.report.to_dict(), history=dict(self.history), kill_to_claim_only_s=self.kill_to_claim_only_s,
            claim_only_failed=self.claim_only_failed)


def failover_record(results: list[FailoverResult], info: dict[str, Any]) -> Record:
    """The run as it is written: the results in summary.json, one tidy row per figure."""
    rows = []
    for r in results:
        for metric, value, unit in (
            ("kill_to_promoted", r.kill_to_promoted_s, "s"), ("kill_to_ready", r.kill_to_ready_s, "s"),
            ("kill_to_resumed", r.kill_to_resumed_s, "s"),
            ("kill_to_claim_only", r.kill_to_claim_only_s, "s"),
            ("claim_only_failed_claims", r.claim_only_failed, "calls"),
            ("failed_calls", sum(r.errors.values()), "calls"), ("calls", r.ops, "calls"),
            ("load", r.load_s, "s"),
            ("enqueued", r.report.enqueued, "jobs"), ("lost", r.report.lost, "jobs"),
            ("in_two_places", r.report.in_two_places, "jobs"), ("audit_passed", int(r.report.passed), "bool"),
            *((f"history_{k}", (r.history.get("counts") or {}).get(k), "jobs") for k in HISTORY_FIGURES),
            ("history_passed", int(bool(r.history.get("passed"))) if r.history else None, "bool"),
        ):
            rows.append({"server": r.name, "version": r.version, "metric": metric, "value": value, "unit": unit})
    summary = FailoverRecord(tuple(r.to_run() for r in results)).to_record()
    return Record(kind="failover", summary=summary, meta=info, tables={"failover": rows})
