"""A `failover` record: per cluster, the master killed, how long the cluster
took to promote its replica and serve again, the calls that failed or were
left in doubt, the audit of every job and the call-log check (under the key
`history`, as older records have it).

summary.json holds `{"runs": [<FailoverRun.to_record()>, ...]}`; the tidy
table `failover` a row per cluster and figure, which the headlines read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterator, Mapping

from echomq_bench.records.headlines import Headline
from echomq_bench.records.kinds.reshard import lower_figures
from echomq_bench.records.record import Record

__all__ = ["RECORD", "FailoverRun", "FailoverRecord", "headlines", "FIGURES"]

FIGURES = ("kill_to_promoted", "kill_to_ready", "kill_to_resumed", "kill_to_claim_only", "failed_calls",
           "lost", "in_two_places")


@dataclass(frozen=True)
class FailoverRun:
    """One cluster's failover, as summary.json holds it."""

    name: str
    version: str
    queues: tuple[str, ...]
    victim: str                      # the master killed
    new_master: str                  # the replica that took its slots
    kill_to_promoted_s: float
    kill_to_ready_s: float
    kill_to_resumed_s: float | None  # None: no enqueue on the victim's queue succeeded before the load stopped
    errors_window_s: float
    errors: Mapping[str, int]
    ops: int
    load_s: float                    # how long the producer ran
    doubt_enqueue: int
    doubt_enqueue_found: int
    doubt_complete: int
    doubt_complete_gone: int
    audit: Mapping[str, Any]         # load.audit.AuditReport.to_dict()
    history: Mapping[str, Any] = field(default_factory=dict)   # the call-log check (measurement.calllog_check)
    # The claim-only worker: None when none of its claims was answered after the kill; a record
    # written before the worker ran has no entry (`claim_only_recorded` is then False).
    kill_to_claim_only_s: float | None = None
    claim_only_failed: int = 0
    claim_only_recorded: bool = True

    @property
    def failed_calls(self) -> int:
        return sum(self.errors.values())

    @property
    def passed(self) -> bool:
        return (bool(self.audit.get("passed")) and bool(self.history.get("passed", True))
                and self.kill_to_claim_only_s is not None)

    def to_record(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "claim_only_recorded"}
        out["queues"] = list(self.queues)
        out["errors"] = dict(self.errors)
        return out

    @classmethod
    def from_record(cls, entry: Mapping[str, Any]) -> FailoverRun:
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in entry.items() if k in names}
        return cls(**{**known, "queues": tuple(entry.get("queues") or ()), "errors": dict(entry.get("errors") or {}),
                      "audit": dict(entry.get("audit") or {}), "history": dict(entry.get("history") or {}),
                      "claim_only_recorded": "kill_to_claim_only_s" in entry})


@dataclass(frozen=True)
class FailoverRecord:
    runs: tuple[FailoverRun, ...]

    def to_record(self) -> dict[str, Any]:
        return {"runs": [r.to_record() for r in self.runs]}

    @classmethod
    def from_record(cls, summary: Mapping[str, Any]) -> FailoverRecord:
        return cls(tuple(FailoverRun.from_record(r) for r in summary.get("runs") or () if isinstance(r, Mapping)))


RECORD = FailoverRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    return lower_figures(r, FIGURES)
