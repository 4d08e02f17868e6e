"""The figures an `--slo` run reports from its searches: each build's interval,
and each build's ratio of rates to its baseline with the verdict on it.

A search ends on a bracket: the highest rate that held and the lowest rate
above it that missed. The rate the search closes on lies in that bracket:
in [0, lowest rate tried] when no rate held, at or above the highest rate
tried when every rate held. Over n searches, the k-th smallest closing
rate lies between the k-th smallest highest-held rate and the k-th
smallest lowest-missed rate, so `[x(k) of the rates held, x(n-k+1) of the
rates missed]` covers the median closing rate at least as often as the
order-statistic interval of the closing rates would: 1 - 2 P(B <= k - 1),
B ~ Binomial(n, 1/2), 96.9% for [min, max] of 6 (`search_interval`).
Widening it by each search's bracket keeps the coverage when the searches
agree to within the resolution, where the highest rates held alone would
all sit just under the answer. A search that never held is a value (0), not
a gap.

Between builds, each repetition gives one ratio of rates (`paired`). A
repetition in which one build never held and the other did is a loss for
the one that failed, whatever the rates: its ratio counts as that build's
worst ratio among the repetitions both held, so it is never better for the
build than any repetition it held. Its true ratio is lower still (below
the lowest rate it tried over the other's rate), but a t-interval would
widen at so far an outlier and turn a build that is slower and also fails
from `slower` into `inconclusive`; with no repetition both held, the ratio
is that bound. A verdict in favour of a build in a repetition where it
never held (faster or equivalent for it) is not given: it is inconclusive,
with the count said (`slo_verdict`). A repetition in which neither held
has no ratio: it is left out and counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from echomq_bench.measurement.intervals import MIN_TRIALS, median_interval
from echomq_bench.measurement.stats import LEVEL
from echomq_bench.measurement.verdicts import EQUIVALENT, FASTER, INCONCLUSIVE, MARGIN, SLOWER, RatioVerdict, judge

__all__ = ["Bracket", "SearchInterval", "search_interval", "PairedRates", "paired", "slo_verdict", "verdict_text",
           "SLO_INTERVAL_METHOD", "NEVER_HELD_RULE"]

SLO_INTERVAL_METHOD = ("order statistics of the searches (binomial, distribution-free): from the k-th lowest rate "
                       "held to the k-th highest rate that missed above it, covering the median of the rates the "
                       "searches close on at least as often as the coverage shown")
NEVER_HELD_RULE = ("a search that never held is a rate of 0 in the median and its interval; a repetition where one "
                   "build never held and the other did counts as that build's worst ratio among the repetitions both "
                   "held, no verdict is given in its favour (inconclusive), and a repetition where neither held has "
                   "no ratio")

Bracket = tuple[float | None, float | None]   # (the highest rate that held, the lowest above it that missed)


@dataclass(frozen=True)
class SearchInterval:
    """One build's figure over its searches: the median rate held and its interval."""

    n: int
    median: float                          # of the searches' rates held, 0 for one that never held
    interval: tuple[float, float] | None   # None: fewer than min_n searches, or no order statistic reaches level
    coverage: float | None                 # at least this (see the module)
    ranks: tuple[int, int] | None          # the order statistics, 1-based
    never_held: int                        # searches in which no rate held

    @property
    def text(self) -> str:
        """`inconclusive (2 searches)` without an interval, else ''."""
        return f"inconclusive ({self.n} search{'' if self.n == 1 else 'es'})" if self.interval is None else ""


def search_interval(brackets: Sequence[Bracket], level: float = LEVEL, min_n: int = MIN_TRIALS) -> SearchInterval:
    """The median rate held over `brackets` (one per search) and its interval (see the module)."""
    if not brackets:
        raise ValueError("no searches to take the median of")
    held = [rate or 0.0 for rate, _ in brackets]
    never = sum(rate is None for rate, _ in brackets)
    base = median_interval(held, level, min_n)
    if base.ci is None or base.ranks is None:
        return SearchInterval(len(held), base.median, None, None, None, never)
    # A search in which every rate held has no rate above it that missed: nothing bounds it.
    missed = sorted(math.inf if above is None else above for _, above in brackets)
    lower_rank, upper_rank = base.ranks
    return SearchInterval(len(held), base.median, (base.ci[0], missed[upper_rank - 1]), base.coverage,
                          (lower_rank, upper_rank), never)


@dataclass(frozen=True)
class PairedRates:
    """A build's rates over its baseline's, one ratio per repetition both searched."""

    ratios: tuple[float, ...]
    repetitions: int           # repetitions both searched, with or without a ratio
    never_held: int            # repetitions where the build never held and the baseline did
    baseline_never_held: int   # repetitions where the baseline never held and the build did
    neither_held: int          # left out: no ratio


def _bound(bracket: Bracket) -> float:
    """The most a search's rate could be: the rate held, or, when none held, the lowest rate it tried."""
    rate, above = bracket
    if rate is not None:
        return rate
    if above is None or not above > 0:
        raise ValueError(f"a search that never held must name the lowest rate it tried, got {bracket}")
    return above


def paired(mine: Mapping[int, Bracket], theirs: Mapping[int, Bracket]) -> PairedRates:
    """The ratio per repetition both searched (keys: the repetition), a repetition one side never held
    counted as a loss for it (see the module)."""
    both = sorted(set(mine) & set(theirs))
    held = [a / b for a, b in ((mine[i][0], theirs[i][0]) for i in both) if a is not None and b is not None]
    ratios: list[float] = []
    never = base_never = neither = 0
    for i in both:
        a, b = mine[i][0], theirs[i][0]
        if a is None and b is None:
            neither += 1
        elif a is None:
            never += 1
            ratios.append(min(held) if held else _bound(mine[i]) / _bound(theirs[i]))
        elif b is None:
            base_never += 1
            ratios.append(max(held) if held else _bound(mine[i]) / _bound(theirs[i]))
        else:
            ratios.append(a / b)
    return PairedRates(tuple(ratios), len(both), never, base_never, neither)


def slo_verdict(rates: PairedRates, margin: float = MARGIN) -> RatioVerdict:
    """`judge` on the paired ratios (higher is better), with no verdict for a build in a repetition
    where it never held: such a verdict is inconclusive (see the module)."""
    v = judge(list(rates.ratios), higher_is_better=True, margin=margin, excluded=rates.neither_held)
    for_build = v.verdict in (FASTER, EQUIVALENT) and rates.never_held > 0
    for_baseline = v.verdict in (SLOWER, EQUIVALENT) and rates.baseline_never_held > 0
    return replace(v, verdict=INCONCLUSIVE) if for_build or for_baseline else v


def verdict_text(v: RatioVerdict, rates: PairedRates, build: str, baseline: str) -> str:
    """`slower`, `inconclusive (3 searches)`, `inconclusive (valkey never held in 1 of 7)`."""
    notes = [f"{v.n} searches"] if v.verdict == INCONCLUSIVE and (v.n or 0) < MIN_TRIALS else []
    for who, count in ((build, rates.never_held), (baseline, rates.baseline_never_held)):
        if count:
            notes.append(f"{who} never held in {count} of {rates.repetitions}")
    if rates.neither_held:
        notes.append(f"neither held in {rates.neither_held}, no ratio")
    word = v.verdict if notes and v.verdict == INCONCLUSIVE else v.text
    return f"{word} ({'; '.join(notes)})" if notes else word
