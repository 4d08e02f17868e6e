"""A failover run as it is written: `failover_record` the run's record,
its runs (`echomq_bench.records.kinds.failover.FailoverRun`, which the run
builds) in summary.json and one tidy row per cluster and figure; and the
audit's and the call-log check's figures, which a reshard run's rows share."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from echomq_bench.records.kinds.failover import FailoverRecord, FailoverRun
from echomq_bench.records.kinds.faults import AuditEntry
from echomq_bench.records.record import Record

__all__ = ["failover_record", "audit_figures", "CALL_LOG_FIGURES"]

CALL_LOG_FIGURES = ("lost", "recovered", "unexpected", "duplicated", "token_fell", "stale_accepted", "lease_overlap")

Figure = tuple[str, Any, str]   # metric, value, unit


def audit_figures(audit: Mapping[str, Any], call_log_check: Mapping[str, Any]) -> Iterable[Figure]:
    """A cluster run's audit (load.audit.AuditReport.to_dict()) and call-log check as tidy figures; the
    latter's keep their `history_` names, which the tidy rows of older runs carry."""
    a = AuditEntry.from_record(audit)
    yield from (("enqueued", a.enqueued, "jobs"), ("lost", a.lost, "jobs"),
                ("in_two_places", a.in_two_places, "jobs"), ("audit_passed", int(bool(a.passed)), "bool"))
    counts = call_log_check.get("counts") or {}
    yield from ((f"history_{k}", counts.get(k), "jobs") for k in CALL_LOG_FIGURES)
    yield "history_passed", int(bool(call_log_check.get("passed"))) if call_log_check else None, "bool"


def failover_record(runs: list[FailoverRun], info: dict[str, Any]) -> Record:
    """The run as it is written: the runs in summary.json, one tidy row per figure."""
    rows = []
    for r in runs:
        for metric, value, unit in (
            ("kill_to_promoted", r.kill_to_promoted_s, "s"), ("kill_to_ready", r.kill_to_ready_s, "s"),
            ("kill_to_resumed", r.kill_to_resumed_s, "s"),
            ("kill_to_claim_only", r.kill_to_claim_only_s, "s"),
            ("claim_only_failed_claims", r.claim_only_failed, "calls"),
            ("failed_calls", r.failed_calls, "calls"), ("calls", r.ops, "calls"),
            ("load", r.load_s, "s"),
            *audit_figures(r.audit, r.history),
        ):
            rows.append({"server": r.name, "version": r.version, "metric": metric, "value": value, "unit": unit})
    return Record(kind="failover", summary=FailoverRecord(tuple(runs)).to_record(), meta=info,
                  tables={"failover": rows})
