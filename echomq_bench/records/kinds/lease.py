"""A `lease` record: the leases swept side by side on each server, how often
a job ran twice and how long a crashed job waited under each, the model
beside the measurement, and the lease recommended.

summary.json is a `LeaseRecord`: the pick across servers (the most cautious)
and the sweep's settings, then `servers`, a `LeaseServer` per server with a
`LeaseEntry` per lease swept. A record written before the summary kept the
sweep's settings holds them in meta.json alone (the report reads them there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from echomq_bench.records.entries import Entry, many, one, optional
from echomq_bench.records.headlines import LOWER, NEITHER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["RECORD", "IntervalEntry", "interval_of", "LeaseEntry", "RecommendationEntry", "LeaseCheck", "LeaseServer",
           "LeaseRecord", "headlines"]

NAN = float("nan")


@dataclass(frozen=True)
class IntervalEntry(Entry):
    """A figure with its 95% interval; None where it is not finite."""

    value: float | None = None
    lo: float | None = None
    hi: float | None = None

    def part(self, name: str) -> float:
        """value, lo or hi as a float (NaN when absent)."""
        got = {"value": self.value, "lo": self.lo, "hi": self.hi}[name]
        return NAN if got is None else float(got)


def interval_of(value: Any) -> IntervalEntry:
    """An interval nested in a free-form group (recovery, held_out)."""
    return IntervalEntry.from_record(value) if isinstance(value, Mapping) else IntervalEntry()


@dataclass(frozen=True)
class LeaseEntry(Entry):
    """One lease swept: its executions, how often they ran twice, the recovery after a crash, what the
    reaping cost, the model fed the fit half's inputs, and whether it agrees with the predicted half."""

    lease_ms: float
    lease_real_ms: int | None = None
    executions: int | None = None
    live: int = 0
    crashes: int | None = None
    refused: int | None = None
    false_expiry: IntervalEntry = one(IntervalEntry, IntervalEntry())
    overran: int | None = optional()
    overran_rate: IntervalEntry | None = one(IntervalEntry, written_when_none=False)
    duplicates: int = 0
    duplicate_rate: IntervalEntry = one(IntervalEntry, IntervalEntry())
    wasted_work_s: float | None = None
    wasted_share: IntervalEntry = one(IntervalEntry, IntervalEntry())
    recovery: Mapping[str, Any] = field(default_factory=dict)           # n, censored, median, p99 (intervals), max
    # The same at scale 1, the physical delays counted once: what the tolerance is held against. Empty in a
    # record from before it, whose recommendation judged the measured p99.
    recovery_unscaled: Mapping[str, Any] = field(default_factory=dict)
    # Per rate (false_expiry, overran, duplicates): events, executions, blocks of time, design_effect (the one its
    # interval took), measured (its own), supported (clustering measured); and length_real_s. Empty in an older
    # record, whose intervals were Wilson's over executions.
    blocks: Mapping[str, Any] = field(default_factory=dict)
    deadline_to_claim: Mapping[str, Any] = field(default_factory=dict)  # median, p99 (intervals)
    throughput: IntervalEntry = one(IntervalEntry, IntervalEntry())
    reap: Mapping[str, Any] = field(default_factory=dict)               # calls, calls_per_s, server_usec_per_call
    overhead_ms: Mapping[str, float] = field(default_factory=dict)      # median, p99, ...
    model: Mapping[str, Any] = field(default_factory=dict)              # false_expiry, recovery_median, ...
    held_out: Mapping[str, Any] = field(default_factory=dict)           # the predicted half's figures
    agree: Mapping[str, bool | None] = field(default_factory=dict)      # false_expiry, recovery_median


@dataclass(frozen=True)
class RecommendationEntry(Entry):
    """The lease picked on a server, and why (lease.recommend)."""

    lease_ms: float | None = None
    confirmed: bool = False
    false_expiry_rate: float | None = None
    false_expiry_hi: float | None = None
    recovery_p99_ms: float | None = None
    overran_hi: float | None = optional()
    relax: str | None = None
    relax_to: float | None = None
    text: str | None = None
    budget: float | None = None
    tolerance_ms: float | None = None
    verdict: str | None = optional()          # confirmed, edge, none (absent in an older record)
    decide: str | None = optional()           # with an edge: what would decide it
    recovery_p99_hi: float | None = optional()
    crashes: int | None = optional()


@dataclass(frozen=True)
class LeaseCheck(Entry):
    """A --check run's verdict on the lease it ran."""

    holds: bool
    text: str = ""


@dataclass(frozen=True)
class LeaseServer(Entry):
    server: str
    version: str | None = None
    recommendation: RecommendationEntry = one(RecommendationEntry, RecommendationEntry())
    leases: tuple[LeaseEntry, ...] = many(LeaseEntry)
    model_split: Mapping[str, Any] = field(default_factory=dict)     # basis, fitted_on, predicted, label
    agreement: tuple[Mapping[str, Any], ...] = ()                    # per lease: the verdicts and their figures
    agreement_count: int | None = None
    lease_count: int | None = None
    mass_crash: Mapping[str, Any] | None = None    # k, cap, drain_ms, ticks, model_ticks, model_drain_ms, agree
    reap_cost: Mapping[str, float] | None = None   # empty_usec, per_job_usec, full_call_usec, calls
    bottleneck: str | None = None
    server_utilization: float | None = None
    client_cpu_s: float | None = None
    wall_s: float | None = None
    check: LeaseCheck | None = one(LeaseCheck, written_when_none=False)

    def lease(self, lease_ms: float | None) -> LeaseEntry | None:
        return next((x for x in self.leases if x.lease_ms == lease_ms), None)


@dataclass(frozen=True)
class LeaseRecord(Entry):
    recommended_lease_ms: float | None = None   # the most cautious of the servers' picks
    false_expiry_rate: float | None = None
    recovery_p99_ms: float | None = None
    confirmed: bool = False
    recommendation: str | None = None           # its text
    budget: float | None = None
    recovery_tolerance_ms: float | None = None
    time_scale: float = 1.0
    work: str | None = None
    reap_every_ms: float | None = optional()
    reap_cap: int | None = optional()
    crash_rate: float | None = optional()
    consumers: int | None = optional()
    window_s: float | None = optional()
    servers: tuple[LeaseServer, ...] = many(LeaseServer)


RECORD = LeaseRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    for s in LeaseRecord.from_record(r.summary).servers:
        rec = s.recommendation
        yield from each(s.server, s.version, [
            ("lease.recommended_lease_ms", rec.lease_ms, "ms", NEITHER),
            ("lease.false_expiry_rate", rec.false_expiry_rate, "fraction", LOWER),
            ("lease.recovery_p99_ms", rec.recovery_p99_ms, "ms", LOWER)])
