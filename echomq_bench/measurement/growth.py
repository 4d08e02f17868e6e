"""How throughput grows with consumers: one ratio per round, judged with an interval.

The unit of replication is a trial: one window at one consumer count on one
server. Trials come in rounds, every build at every count once per round in
an order drawn for that round (`echomq_bench.capacity.consumers`), so a slow
minute of a shared machine falls on whichever windows it falls on, not
always on the same count or build (docs/design/consumers.md).

A build's growth from `low` to `high` consumers is one ratio per round,
high over low of the same build in the same round, and `judge` gives their
geometric mean and its t-interval on the log ratios. A slow stretch that
covers both windows of a round cancels in its ratio; one that covers one of
them widens the interval instead of moving a single figure unseen. Fewer
than `MIN_TRIALS` rounds give no verdict: the growth is inconclusive, and
`MIN_TRIALS` rounds are what would decide it.

The bound at `high` is counted over the same trials: how many the server
held, how many the client (the load generator's CPU), and how many neither
(the round trip set the pace).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from echomq_bench.measurement.stats import median
from echomq_bench.measurement.verdicts import MARGIN, MIN_TRIALS, RatioVerdict, judge

__all__ = ["WindowRate", "Growth", "growth", "MIN_TRIALS", "SIDES"]

# The sides a capacity window names as its bound (measurement.serverstats.bound).
SIDES = ("server", "client", "neither")


@dataclass(frozen=True)
class WindowRate:
    """One trial: a window at one consumer count on one build, in its round."""

    build: str
    trial: int            # the round, from 1
    consumers: int
    cycles_per_s: float
    bound: str            # one of SIDES
    version: str | None = None


@dataclass(frozen=True)
class Growth:
    """A build's throughput at `high` consumers over `low`, judged over its rounds."""

    build: str
    version: str | None
    low: int
    high: int
    verdict: RatioVerdict          # ratio high/low per round: geometric mean, t-interval, n rounds
    low_cycles_per_s: float        # median over the rounds
    high_cycles_per_s: float
    bound_at_high: tuple[tuple[str, int], ...]   # (side, trials it bound at `high`), most first

    @property
    def trials_at_high(self) -> int:
        return sum(n for _, n in self.bound_at_high)

    def bound_trials(self, side: str) -> int:
        return dict(self.bound_at_high).get(side, 0)


def _usable(rate: float) -> bool:
    return math.isfinite(rate) and rate > 0


def _one_build(build: str, windows: list[WindowRate], low: int, high: int) -> Growth:
    at = {(w.trial, w.consumers): w for w in windows}
    trials = sorted({w.trial for w in windows})
    ratios, excluded = [], 0
    for t in trials:
        lo, hi = at.get((t, low)), at.get((t, high))
        if lo is not None and hi is not None and _usable(lo.cycles_per_s) and _usable(hi.cycles_per_s):
            ratios.append(hi.cycles_per_s / lo.cycles_per_s)
        else:
            excluded += 1   # a round without both windows, or one that completed nothing, pairs nothing
    verdict = judge(ratios, higher_is_better=True, margin=MARGIN, min_trials=MIN_TRIALS, excluded=excluded)
    bounds = Counter(w.bound for w in windows if w.consumers == high)
    return Growth(build, next((w.version for w in windows if w.version), None), low, high, verdict,
                  median(w.cycles_per_s for w in windows if w.consumers == low),
                  median(w.cycles_per_s for w in windows if w.consumers == high),
                  tuple(bounds.most_common()))


def growth(windows: Iterable[WindowRate]) -> list[Growth]:
    """Each build's growth from the fewest consumers measured to the most, builds in the order first seen."""
    by_build: dict[str, list[WindowRate]] = {}
    for w in windows:
        by_build.setdefault(w.build, []).append(w)
    counts = sorted({w.consumers for ws in by_build.values() for w in ws})
    if len(counts) < 2:
        return []
    return [_one_build(build, ws, counts[0], counts[-1]) for build, ws in by_build.items()]
