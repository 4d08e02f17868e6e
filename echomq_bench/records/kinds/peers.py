"""A `peers` record: per queue library and server, jobs/s, server time and commands per job.

summary.json is a `PeersRecord`: the run's settings, a `QueueEntry` per
server, queue and mode over the interleaved rounds (medians over the trials,
each per-job figure's geometric mean with its interval, the ratio to the
baseline queue judged as compare judges at its family's Bonferroni level,
the rounds it had and those that failed), the headline's verdicts on rounds
of their own, the queues skipped and the trials that failed. The trials row
by row are the tidy tables `peers`, `peers_commands` and `peers_ratios`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from echomq_bench.records.entries import Entry, by_name, many, one
from echomq_bench.records.headlines import HIGHER, LOWER, Headline, each
from echomq_bench.records.record import Record
from echomq_bench.records.verdicts import RatioVerdictEntry

__all__ = ["RECORD", "IntervalEntry", "PhaseEntry", "MemoryEntry", "QueueEntry", "HeadlineEntry", "FailureEntry",
           "HeadlineVerdictEntry", "PeersRecord", "headlines"]


@dataclass(frozen=True)
class IntervalEntry(Entry):
    """A figure's geometric mean over the trials with its t-interval on the logs (none below two trials)."""

    mean: float | None = None
    ci: tuple[float, float] | None = None
    n: int = 0


@dataclass(frozen=True)
class PhaseEntry(Entry):
    """One phase (enqueue or drain): the medians over the trials, and what bound it most often."""

    jobs_per_s: float | None = None
    server_us_per_job: float | None = None
    server_all_threads_us_per_job: float | None = None
    commands_per_job: float | None = None
    scripts_per_job: float | None = None
    script_us_per_job: float | None = None
    round_trips_per_job: float | None = None
    transactions_per_job: float | None = None
    client_us_per_job: float | None = None
    server_utilization: float | None = None
    client_utilization: float | None = None
    bottleneck: str = "?"


@dataclass(frozen=True)
class MemoryEntry(Entry):
    bytes_per_pending_job: float | None = None
    residual_bytes_after_drain: float | None = None
    keys_after_drain: float | None = None
    key_sample_after_drain: tuple[str, ...] = ()


@dataclass(frozen=True)
class QueueEntry(Entry):
    """One queue in one mode on one server."""

    server: str
    queue: str
    mode: str = "default"
    server_version: str | None = None
    library: str = "?"
    enqueue_mode: str = "?"
    drain_mode: str = "?"
    settings: Mapping[str, Any] = field(default_factory=dict)
    jobs: int | None = None
    consumers: int | None = None
    trials: int = 0
    scripts_per_job: float | None = None
    transactions_per_job: float | None = None
    enqueue: PhaseEntry = one(PhaseEntry, PhaseEntry())
    drain: PhaseEntry = one(PhaseEntry, PhaseEntry())
    memory: MemoryEntry = one(MemoryEntry, MemoryEntry())
    ci: Mapping[str, IntervalEntry] = by_name(IntervalEntry)
    vs_baseline: Mapping[str, RatioVerdictEntry] = by_name(RatioVerdictEntry)   # none for the baseline queue
    spread: Mapping[str, list[float]] = field(default_factory=dict)   # [min, max] over the trials
    drained_clean: bool = False
    attempted: int = 0    # rounds the queue had: runs measured and runs that errored (0: a record before counts)
    failed: int = 0       # of them, those that errored or did not drain clean
    ran: tuple[int, ...] = ()
    leftovers: Mapping[str, Any] = field(default_factory=dict)
    # The medians over the trials of the figures that carry an interval.
    server_us_per_job: float | None = None
    script_us_per_job: float | None = None
    commands_per_job: float | None = None
    round_trips_per_job: float | None = None
    bytes_per_pending_job: float | None = None
    jobs_per_s: float | None = None
    client_us_per_job: float | None = None

    def mean(self, figure: str) -> Any:
        """The geometric mean over the trials (the median where no interval was taken)."""
        c = self.ci.get(figure)
        return c.mean if c is not None and c.mean is not None else getattr(self, figure, None)


@dataclass(frozen=True)
class HeadlineVerdictEntry(Entry):
    """The headline ratio on one server in one mode, judged on rounds of one kind only."""

    server: str = "?"
    mode: str = "default"
    rounds: str = "headline"   # the kind pooled: headline (the pair alone) or interleaved (none ran alone)
    attempted: int = 0         # the headline queue's rounds of that kind
    failed: int = 0            # of them, those that errored or did not drain clean
    verdict: RatioVerdictEntry = one(RatioVerdictEntry, RatioVerdictEntry())


@dataclass(frozen=True)
class HeadlineEntry(Entry):
    """The headline pair's rule: it ran on alone until each interval was within `precision`; and its
    verdicts, a family of their own."""

    queue: str = "echomq"
    precision: float | None = None
    max_trials: int | None = None   # the most headline rounds
    budget_s: float | None = None
    verdicts: tuple[HeadlineVerdictEntry, ...] = many(HeadlineVerdictEntry)


@dataclass(frozen=True)
class FailureEntry(Entry):
    """A trial that failed: where, and the error."""

    server: str = "?"
    queue: str = "?"
    mode: str = "default"
    trial: int | None = None
    error: str = ""
    rounds: str = "interleaved"   # the kind of round it failed in


@dataclass(frozen=True)
class PeersRecord(Entry):
    jobs: int | None = None
    consumers: int | None = None
    trials: int | None = None
    headline: HeadlineEntry = one(HeadlineEntry, HeadlineEntry())
    modes: tuple[str, ...] = ()
    baseline: str = "bullmq-node"
    payload_bytes: int = 64
    figures: Mapping[str, str] = field(default_factory=dict)    # what each figure is
    queues: tuple[QueueEntry, ...] = many(QueueEntry)
    skipped: Mapping[str, str] = field(default_factory=dict)    # queue -> why
    failures: tuple[FailureEntry, ...] = many(FailureEntry)
    correction: str = ""    # how the verdicts' levels allow for their number
    family_sizes: Mapping[str, int] = field(default_factory=dict)   # server -> ratio verdicts in its table


RECORD = PeersRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    for q in PeersRecord.from_record(r.summary).queues:
        yield from each(q.server, q.server_version, [
            (f"peers.{q.queue}.jobs_per_s", q.jobs_per_s, "1/s", HIGHER),
            (f"peers.{q.queue}.server_us_per_job", q.server_us_per_job, "us", LOWER),
            (f"peers.{q.queue}.commands_per_job", q.commands_per_job, "commands", LOWER)])
