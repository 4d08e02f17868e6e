"""What an `--slo` run found: every probe, each search's rate, each build's median rate
with its interval and, for compare, each build's ratio of rates to its baseline.

A probe's row keeps its requested and achieved rate, its claim p50 and the
target's quantile (both timed from each claim's intended start), whether it
held the target and why not, and which side was the bottleneck; `step` is
the rate's turn in the search and `attempt` the probe's place among those
at that rate. A search's rate is the highest at which `holds_in_a_row`
probes in a row held (0 when none did); the build's rate is the median over
searches, a figure of the rate a probe of the window holds with the share
`held_share(holds_in_a_row)` (the record's `figure` says it in words), with
the searches' order-statistic interval (`slo_stats.search_interval`).
Between builds, search i of each ran in repetition i, so rate(build) /
rate(baseline) per repetition is one paired ratio, judged as compare judges
its trials (`measurement.verdicts.judge`: t-interval on log ratios), a
search that never held counted, not dropped (`slo_stats.paired`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.capacity.slo_search import SEARCH_METHOD, held_share
from echomq_bench.capacity.slo_spec import SloSpec
from echomq_bench.capacity.slo_stats import (NEVER_HELD_RULE, SLO_INTERVAL_METHOD, PairedRates, SearchInterval, paired,
                                             search_interval, slo_verdict, verdict_text)
from echomq_bench.measurement.verdicts import LEVEL, MARGIN, METHOD, MIN_TRIALS, RatioVerdict
from echomq_bench.records.kinds.capacity import SloBlock, SloEntry, SloTarget, slo_figure
from echomq_bench.records.verdicts import RatioVerdictEntry

__all__ = ["Probe", "Search", "SloResult", "PASS_RULE"]

PASS_RULE = ("a probe holds the target when the quantile of its claims' latency, timed from each claim's intended "
             "start (a claim with no reply counted at the reply timeout), is within the limit, the driver kept at "
             "least 98% of the schedule, every claim due was sent, and no call failed or found the backlog empty")


@dataclass(frozen=True)
class Probe:
    build: str
    search: int                 # the repetition, 1-based
    index: int                  # 0: the closed-loop run that sets the bracket; then 1, 2, ... as run
    step: int                   # the rate's turn in the search: 0 for the closed loop, then 1, 2, ...
    attempt: int                # the probe's place among those at its rate, 1-based
    phase: str                  # closed loop, bracket or bisect
    rate: float | None          # requested claims/s; None in closed loop
    achieved: float             # claims sent in the window per s (closed loop: cycles/s)
    cycles_per_s: float
    p50_ms: float
    quantile_ms: float          # the target's quantile
    timeouts: int
    passed: bool | None         # None for the closed-loop run
    why: tuple[str, ...] = ()   # why it failed
    bound: str = "?"
    server_utilization: float = math.nan
    client_utilization: float = math.nan
    audit_passed: bool | None = None
    server: str = ""            # the fresh server's address, redacted
    warnings: tuple[str, ...] = ()

    def row(self, version: str) -> dict[str, Any]:
        return {"build": self.build, "version": version, "search": self.search, "probe": self.index,
                "step": self.step, "attempt": self.attempt, "phase": self.phase, "rate_per_s": self.rate,
                "achieved_per_s": self.achieved,
                "cycles_per_s": self.cycles_per_s, "claim_p50_ms": self.p50_ms,
                "claim_quantile_ms": self.quantile_ms, "timeouts": self.timeouts, "passed": self.passed,
                "why": ", ".join(self.why), "bound": self.bound, "server_utilization": self.server_utilization,
                "client_utilization": self.client_utilization, "audit_passed": self.audit_passed,
                "server": self.server}


@dataclass(frozen=True)
class Search:
    build: str
    version: str
    search: int                 # the repetition, 1-based
    order: int                  # the build's place in its repetition, 1-based
    rate: float | None          # the highest rate that held (None: none tried did)
    failed_above: float | None  # the lowest rate above it that failed (None: every rate tried held)
    resolved: bool              # the two are within the resolution
    capacity: float             # the closed-loop cycles/s that set the bracket
    probes: tuple[Probe, ...]
    described: Mapping[str, Any] = field(default_factory=dict)   # the first probe's server (describe_server)

    @property
    def value(self) -> float:
        """The rate as a figure: 0 when no rate tried held."""
        return self.rate or 0.0

    @property
    def bracket(self) -> tuple[float | None, float | None]:
        return self.rate, self.failed_above

    def notes(self) -> list[str]:
        at = f"search {self.search}"
        if self.rate is None:
            lowest = min((p.rate for p in self.probes if p.rate), default=0.0)
            return [f"{at}: no rate down to {lowest:,.0f}/s held the target; its rate is 0"]
        if self.failed_above is None:
            return [f"{at}: every rate tried held the target, up to {self.rate:,.0f}/s, which is a floor of the "
                    "answer, not the answer"]
        return []


def _written(interval: tuple[float, float] | None) -> tuple[float, float | None] | None:
    """The interval as JSON holds it: no upper bound (a search held every rate it tried) is null."""
    return None if interval is None else (interval[0], None if math.isinf(interval[1]) else interval[1])


def _failing_bounds(searches: list[Search]) -> dict[str, int]:
    counted = Counter(p.bound for s in searches for p in s.probes if p.passed is False)
    return {k: counted.get(k, 0) for k in ("server", "client", "neither")}


@dataclass(frozen=True)
class SloResult:
    slo: SloSpec
    settings: CapacitySettings
    builds: tuple[str, ...]
    searches: tuple[Search, ...]
    resolution: float
    order: str                                          # how the builds took turns in a repetition
    described: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)   # build -> describe_server
    holds_in_a_row: int = 1                             # probes in a row a rate had to hold

    @property
    def held(self) -> float:
        """The share of probes that hold at the rate reported (see the module)."""
        return held_share(self.holds_in_a_row)

    @property
    def figure(self) -> str:
        return slo_figure(self.settings.duration_s, self.held)

    def of(self, build: str) -> list[Search]:
        return sorted((s for s in self.searches if s.build == build), key=lambda s: s.search)

    def interval(self, build: str) -> SearchInterval:
        return search_interval([s.bracket for s in self.of(build)])

    def version(self, build: str) -> str:
        runs = self.of(build)
        return runs[0].version if runs else "?"

    def ratios(self, build: str, baseline: str) -> PairedRates:
        """Rate over the baseline's, per repetition both searched, a search that never held counted."""
        return paired({s.search: s.bracket for s in self.of(build)}, {s.search: s.bracket for s in self.of(baseline)})

    def verdict(self, build: str, baseline: str, margin: float = MARGIN) -> RatioVerdict:
        return slo_verdict(self.ratios(build, baseline), margin)

    def entry(self, build: str) -> SloEntry:
        runs = self.of(build)
        interval = self.interval(build)
        probes = [p for s in runs for p in s.probes if p.passed is not None]
        return SloEntry(
            version=self.version(build), rate_per_s=interval.median, interval=_written(interval.interval),
            coverage=interval.coverage, ranks=interval.ranks, n=interval.n, text=interval.text,
            never_held=interval.never_held,
            search_rates=tuple(s.rate for s in runs), failed_above=tuple(s.failed_above for s in runs),
            resolved=tuple(s.resolved for s in runs), capacity_per_s=tuple(s.capacity for s in runs),
            probes=len(probes), probes_passed=sum(bool(p.passed) for p in probes),
            bound_when_failing=_failing_bounds(runs),
            audit_passed=all(p.audit_passed is not False for s in runs for p in s.probes),
            warnings=tuple([n for s in runs for n in s.notes()]
                           + [f"search {p.search} probe {p.index}: {w}" for s in runs for p in s.probes
                              for w in p.warnings]))

    def block(self) -> SloBlock:
        """The `slo` block of a capacity or compare record."""
        return SloBlock(
            target=SloTarget.from_record(self.slo.to_dict()),
            searches=max((s.search for s in self.searches), default=0), resolution=self.resolution,
            search_method=SEARCH_METHOD, pass_rule=PASS_RULE, interval_method=SLO_INTERVAL_METHOD, level=LEVEL,
            min_trials=MIN_TRIALS, order=self.order, window_s=self.settings.duration_s,
            warmup_s=self.settings.warmup_s, reply_timeout_s=self.settings.reply_timeout_s,
            holds_in_a_row=self.holds_in_a_row, held=self.held, figure=self.figure, never_held_rule=NEVER_HELD_RULE,
            builds={b: self.entry(b) for b in self.builds})

    def compared(self, baselines: Mapping[str, str], margin: float = MARGIN) -> SloBlock:
        """The record's block with each build's ratio of rates to its baseline and the verdict on it."""
        block, builds = self.block(), {}
        for build, entry in block.builds.items():
            base = baselines.get(build, self.builds[0])
            if base == build:
                builds[build] = replace(entry, baseline=base, verdict="baseline")
                continue
            rates = self.ratios(build, base)
            v = slo_verdict(rates, margin)
            # A verdict counts trials; here each is a repetition of the searches.
            text = verdict_text(v, rates, build, base)
            builds[build] = replace(entry, baseline=base, verdict=text,
                                    verdict_detail=RatioVerdictEntry.of(replace(v, said=text)),
                                    search_ratios=rates.ratios)
        return replace(block, ratio_method=METHOD, margin=margin, builds=builds)

    def rows(self) -> list[dict[str, Any]]:
        return [p.row(s.version) for s in sorted(self.searches, key=lambda s: (s.search, s.order))
                for p in s.probes]
