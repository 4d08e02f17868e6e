"""A `compare` record: each build's figures over interleaved trials, and its
ratio to its baseline as a verdict (n, method, interval); with --slo, each
build's rate at a latency target and its ratio of rates, as a second headline.

summary.json is a `CompareRecord`: the run's method and pairing, then
`builds`, a `CompareEntry` per build, and `slo` (records.kinds.capacity.SloBlock)
when the run searched a rate at a target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping

from echomq_bench.records.entries import Entry, by_name, one, optional
from echomq_bench.records.headlines import HIGHER, LOWER, NEITHER, Headline, each
from echomq_bench.records.kinds.capacity import SloBlock, slo_headlines
from echomq_bench.records.record import Record
from echomq_bench.records.verdicts import RatioVerdictEntry

__all__ = ["RECORD", "Spread", "CompareEntry", "CompareRecord", "headlines", "series", "company_of"]


@dataclass(frozen=True)
class Spread(Entry):
    """A figure over the trials."""

    median: float | None = None
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class CompareEntry(Entry):
    """One build over the trials: its spreads, its bound per trial, and its verdicts against its baseline."""

    version: str | None = None
    spec: str | None = None
    scripts: str | None = None
    cycles_per_s: Spread = one(Spread, Spread())
    server_us_per_cycle: Spread = one(Spread, Spread())
    claim_p99_ms: Spread = one(Spread, Spread())
    server_utilization: Spread = one(Spread, Spread())
    server_wait: Spread = one(Spread, Spread())
    client_utilization: Spread = one(Spread, Spread())
    cpu_share_per_trial: tuple[float, ...] = ()
    bound: Mapping[str, int] = field(default_factory=dict)   # server/client/neither -> trials
    ceiling_claims_per_s: float | None = None
    pinning: str | None = None
    allocator: str | None = optional()
    binary: str | None = optional()
    warnings: tuple[str, ...] = ()
    baseline: str | None = optional()       # the build its ratios are against (records before pairing: none)
    trials_counted: int | None = optional()
    trials_excluded: int | None = optional()
    excluded_trials: tuple[int, ...] | None = optional()
    # Each metric's verdict against the baseline, by name (server_us, throughput, p99); a baseline's entry has none.
    verdicts: Mapping[str, RatioVerdictEntry] = by_name(RatioVerdictEntry, written_when_empty=False)
    verdict: str | None = None              # the headline's verdict, or "baseline"
    throughput_trial_ratios: tuple[float, ...] | None = optional()
    # The version's effect apart from the allocator's: against the first build of its own
    # allocator, when that is not the build it is ranked against.
    allocator_baseline: str | None = optional()
    within_allocator: RatioVerdictEntry | None = one(RatioVerdictEntry, written_when_none=False)


@dataclass(frozen=True)
class CompareRecord(Entry):
    baseline: str | None = None
    trials: int | None = None
    interleave: str = "together"            # records before the modes ran them together
    order: str | None = None
    headline: str = "server_us"
    method: str | None = None
    level: float = 0.95
    min_trials: int = 6
    margin: float = 0.02
    precision: float | None = None
    mode: str | None = None
    pair_by: str | None = optional()
    pairing: str | None = optional()
    baselines: Mapping[str, str] | None = optional()
    builds: Mapping[str, CompareEntry] = by_name(CompareEntry)
    rates_note: str | None = optional()
    slo: SloBlock | None = one(SloBlock, written_when_none=False)
    company: tuple[str, ...] = ()           # the builds that shared every trial, sorted
    order_seed: int | None = optional()     # each trial's start and fill order was drawn from it

    def base_of(self, name: str) -> str:
        """The build this one's ratios are against: its own when the run paired builds by allocator."""
        entry = self.builds.get(name)
        return str((entry.baseline if entry else None) or self.baseline or name)

    def pairs(self) -> bool:
        """Does the run set builds against more than one baseline?"""
        return len({self.base_of(n) for n in self.builds}) > 1

    def headline_of(self, entry: CompareEntry) -> RatioVerdictEntry:
        return entry.verdicts.get(self.headline) or RatioVerdictEntry()

    def has_interval(self, v: RatioVerdictEntry) -> bool:
        """A t-interval from fewer trials than the method needs is mostly its own width: not shown."""
        return bool(v.ci) and int(v.n or 0) >= self.min_trials


RECORD = CompareRecord   # what summary.json holds, typed


def company_of(names: Iterable[str]) -> tuple[str, ...]:
    """The builds that shared a run, as its series names them: sorted, so the order given does not matter."""
    return tuple(sorted(names))


def series(figure: str, base: str, company: Iterable[str], at: str = "") -> str:
    """A ratio's series in the results history: its own baseline and the builds that shared the run,
    since a ratio against another build, or among other company, is another quantity."""
    return f"compare.{figure}{at}_vs_{base}_among_{'+'.join(company_of(company))}"


def headlines(r: Record) -> Iterator[Headline]:
    record = CompareRecord.from_record(r.summary)
    # Rates mean another thing in each interleave mode (a share of one core
    # when the builds run together); the mode is part of their name unless it is the default.
    at = "" if record.interleave == "together" else f"[{record.interleave}]"
    company = record.company or tuple(record.builds)
    # A build's own figures hang on its company as its ratios do (together, its rate is its share of
    # the one core and its µs and p99 are taken beside the others on that core): keyed the same way.
    among = f"_among_{'+'.join(company_of(company))}"
    for build, b in record.builds.items():
        yield from each(build, b.version, [
            (f"compare.cycles_per_s{at}{among}", b.cycles_per_s.median, "1/s", HIGHER),
            (f"compare.server_us_per_cycle{at}{among}", b.server_us_per_cycle.median, "us", LOWER),
            (f"compare.claim_p99_ms{at}{among}", b.claim_p99_ms.median, "ms", LOWER)])
        rate = b.verdicts.get("throughput")
        judged = [(record.base_of(build), record.headline_of(b), rate.ratio if rate else None)]
        if b.within_allocator is not None and b.allocator_baseline:
            judged.append((b.allocator_baseline, b.within_allocator, None))
        for base, v, throughput in judged:
            if base == build:
                continue
            yield from each(build, b.version, [
                (series("server_us_ratio", base, company, at), v.ratio, "ratio", LOWER),
                # What the next run's between-run estimate weighs this run by.
                # A run with too few trials for a verdict leaves none: it would count as a run with no weight.
                (series("server_us_log_se", base, company, at),
                 v.within_se if int(v.n or 0) >= record.min_trials else None, "log", NEITHER),
                (series("throughput_ratio", base, company, at), throughput, "ratio", HIGHER)])
    yield from slo_headlines(r.kind, record.slo)
