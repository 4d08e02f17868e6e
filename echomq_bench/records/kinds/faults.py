"""A `faults` record: each fault scenario under load, the audit of every job
and the call-log check per fault kind (under the key `history`, as older
records have it); or a soak's schedule of faults, its
totals, recovery per fault kind and checks.

summary.json is a `FaultsRecord`: `passed`, `quick`, `scenarios` (a
`ScenarioEntry` per scenario and server) and, for a soak, `soak` (a
`SoakEntry` per build).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from echomq_bench.records.entries import Entry, many, one, optional
from echomq_bench.records.headlines import LOWER, NEITHER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["RECORD", "CheckEntry", "AuditEntry", "ScenarioEntry", "StruckEntry", "KindEntry", "SoakEntry",
           "FaultsRecord", "headlines"]


@dataclass(frozen=True)
class CheckEntry(Entry):
    ok: bool
    text: str = ""


@dataclass(frozen=True)
class AuditEntry(Entry):
    """Where every job minted went (load.audit.AuditReport.to_dict()), and the calls whose reply was lost
    (faults.ambiguous.Ambiguity.to_dict())."""

    enqueued: int | None = None
    completed: int | None = None
    pending: int | None = None
    active: int | None = None
    scheduled: int | None = None
    dead: int | None = None
    lost: int | None = None
    in_two_places: int | None = None
    unknown: int | None = None
    double_accepted: int | None = None
    zombie_sent: int | None = None
    zombie_accepted: int | None = None
    refused: int | None = None
    refused_not_superseded: int | None = None
    examples: Mapping[str, Any] = field(default_factory=dict)
    passed: bool | None = None
    ambiguous: Mapping[str, Any] | None = optional()


@dataclass(frozen=True)
class ScenarioEntry(Entry):
    """One scenario on one server: its figures, audit and checks, or why it was skipped."""

    server: str
    build: str = ""
    scenario: str = "?"
    fault: str = "?"
    recovery_means: str = ""
    jobs: int = 0
    completed: int = 0
    faults: int = 0
    lost: int = 0
    double_accepted: int = 0
    refused_expected: int = 0
    refused_unexpected: int = 0
    unanswered: int = 0
    ambiguous: int = 0
    ambiguous_resolved: int = 0
    recovery_s: float | None = None
    passed: bool | None = None
    audit: AuditEntry | None = one(AuditEntry, written_when_none=False)   # none for a scenario skipped
    server_cpu: float | None = None
    client_cpu: float | None = None
    wall_s: float = 0.0
    skipped: str | None = None
    server_settings: Mapping[str, str] = field(default_factory=dict)
    history: Mapping[str, Any] = field(default_factory=dict)     # the call-log check (measurement.calllog_check)
    checks: tuple[CheckEntry, ...] = many(CheckEntry)

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if self.passed:
            return "PASS (loss detected)" if self.lost else "PASS"
        return "FAIL"


@dataclass(frozen=True)
class StruckEntry(Entry):
    """A soak's fault as it ran (seconds after the load began) and the load's recovery from it."""

    kind: str
    family: str = ""
    planned_s: float | None = None
    start_s: float | None = None
    end_s: float | None = None
    text: str = ""
    injected: bool = False
    recovery_s: float | None = None


@dataclass(frozen=True)
class KindEntry(Entry):
    """A soak's faults of one kind: injected, recovered, recovery p50 and p99."""

    kind: str
    family: str = ""
    injected: int = 0
    recovered: int = 0
    recovery_p50_s: float | None = None
    recovery_p99_s: float | None = None


@dataclass(frozen=True)
class SoakEntry(Entry):
    """One build's soak: the schedule, the totals, the audit, the checks, the call-log check."""

    server: str
    build: str = ""
    seed: int | None = None
    duration_s: float = 0.0
    planned: Mapping[str, int] = field(default_factory=dict)
    timeline: tuple[int, ...] = ()            # completes accepted in each second since the load began
    jobs: int = 0
    completed: int = 0
    lost: int = 0
    double_accepted: int = 0
    ambiguous: int = 0
    ambiguous_resolved: int = 0
    unanswered: int = 0
    refused_expected: int = 0
    refused_unexpected: int = 0
    passed: bool = False
    wall_s: float = 0.0
    audit: AuditEntry = one(AuditEntry, AuditEntry())
    server_settings: Mapping[str, str] = field(default_factory=dict)
    history: Mapping[str, Any] = field(default_factory=dict)     # the call-log check (measurement.calllog_check)
    faults: tuple[StruckEntry, ...] = many(StruckEntry)
    checks: tuple[CheckEntry, ...] = many(CheckEntry)
    injected: Mapping[str, int] = field(default_factory=dict)   # faults injected by kind
    kinds: tuple[KindEntry, ...] = many(KindEntry)
    ambiguous_unresolved: int = 0
    recovery_means: str = ""
    chart: str | None = optional()            # the timeline's PNG in the run folder


@dataclass(frozen=True)
class FaultsRecord(Entry):
    passed: bool = False
    quick: bool = False
    scenarios: tuple[ScenarioEntry, ...] = many(ScenarioEntry)
    soak: tuple[SoakEntry, ...] = many(SoakEntry, written_when_empty=False)   # a soak's record alone


RECORD = FaultsRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    record = FaultsRecord.from_record(r.summary)
    for o in record.scenarios:
        if o.skipped:
            continue
        yield from each(o.server, o.build or None, [
            (f"faults.{o.scenario}.lost", o.lost, "jobs", LOWER),
            (f"faults.{o.scenario}.double_accepted", o.double_accepted, "jobs", LOWER)])
    for soak in record.soak:  # a soak's record: its totals, and recovery per fault kind
        yield from each(soak.server, soak.build or None, [
            ("faults.soak.lost", soak.lost, "jobs", LOWER),
            ("faults.soak.double_accepted", soak.double_accepted, "jobs", LOWER),
            ("faults.soak.ambiguous_resolved", soak.ambiguous_resolved, "calls", NEITHER),
            ("faults.soak.ambiguous_unresolved", soak.ambiguous_unresolved, "calls", LOWER),
            *[(f"faults.soak.{k.kind}.recovery_{q}_s", value, "s", LOWER)
              for k in soak.kinds for q, value in (("p50", k.recovery_p50_s), ("p99", k.recovery_p99_s))]])
