"""What a comparison found: the trials as run, the verdicts read from them, the record and the table.

The headline is the ratio of server µs per cycle, build over baseline: CPU
time of the server's main thread per claim+complete cycle. It does not
depend on how much of a shared core each build got, which throughput does
(throughput ratio = share ratio x cost ratio), so a together-mode trial in
which the kernel favoured one build still compares what the builds cost.
Each trial's CPU share is recorded beside it.

A trial pair counts only when both its builds were server-bound (the main
thread busy, or runnable and waiting for its core, for at least 97% of the
window; `serverstats.bound`): otherwise the ratio measures the driver.
Excluded pairs are counted and shown. Claim p99 is judged only in open loop,
at a fixed offered rate: in closed loop, with every connection's pipeline
full, the p99 is mostly the driver's own queue (Little's law).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from echomq_bench.capacity.result import CapacityResult
from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.measurement.latency import Latency
from echomq_bench.measurement.runspread import RunSpread
from echomq_bench.measurement.stats import round_ratio, spread
from echomq_bench.measurement.verdicts import (LEVEL, MARGIN, METHOD, MIN_TRIALS, TWO_LEVEL_METHOD, RatioVerdict,
                                               judge)
from echomq_bench.records.kinds.compare import CompareEntry, CompareRecord, Spread, company_of
from echomq_bench.records.verdicts import RatioVerdictEntry
from echomq_bench.servers import ServerSpec

__all__ = ["Build", "Judging", "Trial", "CompareResult", "METRICS", "INTERLEAVE_TEXT", "HEADLINE", "CLOSED_LOOP_P99",
           "PAIR_BY"]

HEADLINE = "server_us"
CLOSED_LOOP_P99 = "not judged: in closed loop the p99 is the driver's own queue; give --rate for a latency verdict"
INTERLEAVE_TEXT = {
    "together": "all builds at once, main threads sharing one core, fresh servers per trial",
    "slot": "builds take turns in slots, random order per round, fresh servers per trial",
    "trial": "one whole run per build, A B A B, a fresh server per run",
}
# Which build each build's ratio is against. `allocator`: the first build
# given of the same allocator, so that a ratio reads a version's effect apart
# from the allocator's (jemalloc builds against redis7.0, libc builds against
# redis6.2 in the main job); every build still shares each trial with all.
PAIR_BY = {
    "first": "every build against the first",
    "allocator": "each build against the first build given of its own allocator",
}

# summary name -> (how to read it from a result, higher is better, label)
METRICS: dict[str, tuple[Callable[[CapacityResult], float], bool, str]] = {
    "server_us": (lambda r: r.server_us_per_cycle, False, "server µs/cycle"),
    "throughput": (lambda r: r.cycles_per_s, True, "throughput"),
    "p99": (lambda r: r.latency_ms("claim").get("p99", float("nan")), False, "claim p99"),
}


@dataclass(frozen=True)
class Judging:
    """How a comparison judges: the equivalence margin, the precision that
    ends an adaptive run (None: every trial), and who each build is against."""

    margin: float = MARGIN
    precision: float | None = None
    pair_by: str = "first"
    between_runs: bool = True     # add this machine's between-run spread from the results history


@dataclass(frozen=True)
class Build:
    spec: ServerSpec
    lua_dir: Path | None = None

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class Trial:
    build: str
    trial: int        # 1-based
    order: int        # position in the whole run, 1-based
    result: CapacityResult
    rounds: dict[int, float] = field(default_factory=dict)   # slot interleaving: round -> this build's cycles/s


@dataclass(frozen=True)
class CompareResult:
    builds: tuple[Build, ...]
    settings: CapacitySettings
    trials: tuple[Trial, ...]
    margin: float = MARGIN
    interleave: str = "together"
    precision: float | None = None
    pair_by: str = "first"
    # (build, against) -> the between-run part of its headline interval, from this machine's
    # earlier runs (capacity.compare_history); a pair without one is judged on this run's trials alone.
    spreads: Mapping[tuple[str, str], RunSpread] = field(default_factory=dict)
    order_seed: int | None = None   # each trial's start and fill order was drawn from it

    @property
    def baseline(self) -> str:
        return self.builds[0].name

    def allocator(self, build: str) -> str:
        runs = self.of(build)
        return str(runs[0].server.get("allocator") or "?") if runs else "?"

    def baseline_of(self, build: str) -> str:
        """The build `build`'s ratios are against (itself when it is a baseline)."""
        if self.pair_by == "allocator":
            mine = self.allocator(build)
            return next(b.name for b in self.builds if self.allocator(b.name) == mine)
        return self.baseline

    def baselines(self) -> list[str]:
        return list(dict.fromkeys(self.baseline_of(b.name) for b in self.builds))

    def allocator_baseline(self, build: str) -> str | None:
        """The first build of `build`'s own allocator, when that is neither the build nor the one it is
        ranked against: the second line, a version's effect apart from its allocator's."""
        mine = self.allocator(build)
        first = next(b.name for b in self.builds if self.allocator(b.name) == mine)
        return None if first in (build, self.baseline_of(build)) or mine == "?" else first

    def pairs_judged(self) -> list[tuple[str, str]]:
        """Every (build, against) this run judges: each build against its baseline, then within its allocator."""
        out = [(b.name, self.baseline_of(b.name)) for b in self.builds if self.baseline_of(b.name) != b.name]
        out += [(b.name, a) for b in self.builds if (a := self.allocator_baseline(b.name)) is not None]
        return out

    @property
    def company(self) -> tuple[str, ...]:
        return company_of(b.name for b in self.builds)

    def of(self, build: str) -> list[CapacityResult]:
        return [t.result for t in self.trials if t.build == build]

    def values(self, build: str, metric: str) -> list[float]:
        read = METRICS[metric][0]
        return [read(r) for r in self.of(build)]

    def trial_ratios(self, build: str, metric: str, against: str | None = None) -> list[float]:
        """One ratio to the baseline (or `against`) per trial. Throughput under slot
        interleaving: the median over rounds (`stats.round_ratio`); else the
        ratio of the trial's totals."""
        mine = [t for t in self.trials if t.build == build]
        theirs = [t for t in self.trials if t.build == (against or self.baseline_of(build))]
        read = METRICS[metric][0]
        out = []
        for a, b in zip(theirs, mine):
            fine = round_ratio(a.rounds, b.rounds) if metric == "throughput" and a.rounds else None
            out.append(fine if fine is not None else read(b.result) / read(a.result))
        return out

    def saturated(self, build: str, against: str | None = None) -> list[bool]:
        """Per trial: were this build and its baseline (or `against`) both server-bound?"""
        return [a.bound == "server" and b.bound == "server"
                for a, b in zip(self.of(against or self.baseline_of(build)), self.of(build))]

    def verdict(self, build: str, metric: str, against: str | None = None) -> RatioVerdict | None:
        """The verdict on `metric` for `build` against the baseline (or `against`); None for a latency in
        closed loop. The headline's interval takes the pair's between-run spread when the run has one."""
        if metric == "p99" and self.settings.rate is None:
            return None
        against = against or self.baseline_of(build)
        kept = [(r, ok) for r, ok in zip(self.trial_ratios(build, metric, against), self.saturated(build, against))]
        ratios = [r for r, ok in kept if ok and r > 0 and math.isfinite(r)]
        excluded = len(kept) - len(ratios)
        between = self.spreads.get((build, against)) if metric == HEADLINE else None
        return judge(ratios, higher_is_better=METRICS[metric][1], margin=self.margin, excluded=excluded,
                     spread=between)

    def record(self) -> CompareRecord:
        """The run as summary.json holds it (without an --slo block)."""
        together = self.interleave == "together"
        return CompareRecord(
            baseline=self.baseline, trials=len(self.of(self.baseline)), interleave=self.interleave,
            order=INTERLEAVE_TEXT[self.interleave], headline=HEADLINE,
            method=TWO_LEVEL_METHOD if self.spreads else METHOD, level=LEVEL,
            min_trials=MIN_TRIALS, margin=self.margin, precision=self.precision,
            mode="open loop" if self.settings.rate else "closed loop", pair_by=self.pair_by,
            pairing=PAIR_BY[self.pair_by], baselines={b.name: self.baseline_of(b.name) for b in self.builds},
            builds={build.name: _entry(self, build) for build in self.builds},
            rates_note=(f"the {len(self.builds)} builds shared one core: cycles/s and server busy are each build's "
                        "share of it; server µs/cycle does not depend on the share") if together else None,
            company=self.company, order_seed=self.order_seed)

    def rows(self) -> list[dict[str, Any]]:
        rows = [row for t in self.trials for row in t.result.rows(trial=t.trial, order=t.order)]
        for b in self.builds:
            if self.baseline_of(b.name) == b.name:
                continue
            saturated = self.saturated(b.name)
            for metric in METRICS:
                for i, ratio in enumerate(self.trial_ratios(b.name, metric)):
                    rows.append({"build": b.name, "version": self.of(b.name)[i].version, "trial": i + 1,
                                 "baseline": self.baseline_of(b.name), "metric": f"{metric}_ratio", "value": ratio,
                                 "unit": "ratio", "counted": saturated[i]})
        return rows

    def merged_latency(self, build: str, verb: str) -> Latency:
        merged = Latency()
        for r in self.of(build):
            if verb in r.latency:
                merged.merge(r.latency[verb])
        return merged


def _spread(values: Sequence[float]) -> Spread:
    return Spread(**spread(values))


def _verdicts(result: CompareResult, build: str) -> dict[str, RatioVerdictEntry]:
    """Each metric's verdict against the baseline; one not judged says why."""
    verdicts = {metric: result.verdict(build, metric) for metric in METRICS}
    return {metric: RatioVerdictEntry.of(v) if v is not None else RatioVerdictEntry(said=CLOSED_LOOP_P99)
            for metric, v in verdicts.items()}


def _entry(result: CompareResult, build: Build) -> CompareEntry:
    """One build's summary: its spreads over trials, its bound per trial, and its verdicts."""
    runs = result.of(build.name)
    saturated = result.saturated(build.name)
    entry = CompareEntry(
        version=runs[0].version, spec=build.spec.describe(), scripts=runs[0].scripts,
        cycles_per_s=_spread(result.values(build.name, "throughput")),
        server_us_per_cycle=_spread(result.values(build.name, "server_us")),
        claim_p99_ms=_spread(result.values(build.name, "p99")),
        server_utilization=_spread([r.server_utilization for r in runs]),
        server_wait=_spread([r.server_wait or 0.0 for r in runs]),
        client_utilization=_spread([r.client_utilization for r in runs]),
        cpu_share_per_trial=tuple(round(r.server_utilization, 4) for r in runs),
        bound={b: sum(r.bound == b for r in runs) for b in ("server", "client", "neither")},
        ceiling_claims_per_s=next((r.ceiling_claims_per_s for r in runs if r.ceiling), None),
        pinning=runs[0].pinning, allocator=runs[0].server.get("allocator"), binary=runs[0].server.get("binary"),
        warnings=tuple(f"trial {i + 1}: {w}" for i, r in enumerate(runs) for w in r.warnings),
        baseline=result.baseline_of(build.name))
    if entry.baseline == build.name:
        return replace(entry, verdict="baseline")
    second = result.allocator_baseline(build.name)
    if second is not None:
        within = result.verdict(build.name, HEADLINE, against=second)
        assert within is not None   # the headline is judged in either loop
        entry = replace(entry, allocator_baseline=second, within_allocator=RatioVerdictEntry.of(within))
    verdicts = _verdicts(result, build.name)
    return replace(entry, trials_counted=sum(saturated), trials_excluded=len(saturated) - sum(saturated),
                   excluded_trials=tuple(i + 1 for i, ok in enumerate(saturated) if not ok),
                   throughput_trial_ratios=tuple(result.trial_ratios(build.name, "throughput")),
                   verdicts=verdicts, verdict=verdicts[HEADLINE].text)
