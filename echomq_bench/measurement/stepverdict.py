"""Is a step that asv's detection flagged told apart from runs that drift
together? The verdict on one candidate step, at its unit of replication.

The unit of replication is one run. Runs close in time share the machine's
state (its neighbours, its clock, what the hypervisor does that hour), so
neighbouring runs are not independent: a stretch of slow runs followed by
a stretch of fast ones is what correlated noise looks like, and asv's fit
(echomq_bench.measurement.steps) cuts it into two levels as readily as a
real step. On flat series with lag-1 correlation 0.7 and 6% spread it
flags 6.5-10.9% of them (8 to 30 runs;
docs/measurements/scripts/history_correlated.py).

So every candidate is judged again, as if neighbouring runs were
correlated at lag 1 by `RUN_CORRELATION` (an AR(1) process): the design
bound, not an estimate. A series of a dozen runs cannot estimate it: the
lag-1 correlation of the runs about their fitted levels averages 0.32 on
twelve runs and 0.53 on thirty where the noise has 0.7 (the fit takes the
drift for levels; the estimate is biased low by about (1 + 3 rho) / n
besides), which would wave the same false steps through.

The test, for the step between fitted segments A (a runs) and B (b runs):

- a run further from its segment's level (the median) than `OUTLIER_SDS`
  robust standard deviations (the runs' median absolute deviation, pooled)
  is an outlier, not noise: a run thrown far off by a busy neighbour. It is
  left out of what follows, as asv's medians leave it out of the levels;
- the change is the mean of B's runs minus the mean of A's;
- the scatter is the runs' standard deviation about their own segment's
  mean (segments of one run carry none). Inside a segment of m correlated
  runs it understates the runs' spread: E[sum (y - mean)^2] = sigma^2 (m -
  g(m)), g(m) = 1 + 2 sum_k (1 - k/m) rho^k, so it is scaled back by
  sum (m - 1) / sum (m - g);
- the standard error of the change is that of the difference of two
  neighbouring means under AR(1) noise, their covariance included;
- the critical value is Student's t at 1 - alpha / (2 (n - 1)), n runs:
  Bonferroni over the n - 1 places a step could have been put, since the
  fit chose the place from the data; its degrees of freedom are the
  scatter's, Satterthwaite's (tr MR)^2 / tr (MR)^2 summed over segments (M
  removing a segment's mean, R the runs' correlation): n - k for k
  segments of independent runs, fewer for correlated ones (five, not
  eleven, in one segment of twelve at rho 0.7). Below `MIN_DF` the scatter
  is too poorly known and the step is inconclusive.

A step is called when its simultaneous interval (change +/- critical x
standard error) excludes no change; otherwise it is inconclusive, with the
runs at the new level that would decide it if the levels held. The rates
this gives (at most 2.7% of flat series called at rho up to 0.7, against a
declared 5%, and what a real step costs in runs) are measured in
history_correlated.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np
from scipy import stats

from echomq_bench.measurement.steps import DEFAULT_THRESHOLD, Segment, Step, fit_segments, flag_steps

__all__ = ["RUN_CORRELATION", "FAMILY_ALPHA", "StepVerdict", "step_verdict", "judge_steps", "within_correlation"]

# The lag-1 correlation between neighbouring runs the verdict allows for.
RUN_CORRELATION = 0.7
# The chance a flat series gets a step called, over every place one could be.
FAMILY_ALPHA = 0.05
# Fewer degrees of freedom than this (3, rounded) leave the scatter unknown: too few runs to judge.
MIN_DF = 2.5
OUTLIER_SDS = 4.0
MAD_TO_SD = 1.4826            # a normal's sd over its median absolute deviation
MOST_MORE_RUNS = 50


@dataclass(frozen=True)
class StepVerdict:
    index: int                  # the first run of the new level
    before: float               # asv's levels (medians) either side
    after: float
    runs_before: int            # n: runs in the segments either side
    runs_after: int
    low: float                  # the simultaneous interval of the change in mean, outliers left out
    high: float
    df: float                   # the scatter's degrees of freedom; below MIN_DF too few runs to judge
    called: bool                # the interval excludes no change
    more_runs: int | None       # inconclusive: runs at the new level that would decide it, if any would


def _g(m: int, rho: float) -> float:
    """m times the variance of the mean of m AR(1) runs, over one run's variance."""
    k = np.arange(1, m)
    return 1.0 + 2.0 * float(((1 - k / m) * rho ** k).sum())


def _contrast_variance(a: int, b: int, rho: float) -> float:
    """Var(mean of b runs - mean of the a runs just before them), over one run's variance, under AR(1)."""
    cross = rho * (1 - rho ** a) * (1 - rho ** b) / (1 - rho) ** 2 / (a * b)
    return _g(a, rho) / a + _g(b, rho) / b - 2 * cross


def _kept(y: np.ndarray, segments: Sequence[Segment]) -> list[np.ndarray] | None:
    """Each segment's runs but its outliers (a segment keeps all its runs rather than none); None
    without a segment of two or more runs, which leaves no scatter to judge by."""
    deviations = [np.abs(y[s.start:s.end] - s.level) for s in segments if s.size > 1]
    if not deviations:
        return None
    mad = MAD_TO_SD * float(np.median(np.concatenate(deviations)))
    out = []
    for s in segments:
        runs = y[s.start:s.end]
        keep = np.abs(runs - s.level) <= OUTLIER_SDS * mad
        out.append(runs[keep] if mad > 0 and keep.any() else runs)
    return out


def _scatter(kept: Sequence[np.ndarray]) -> float | None:
    """The runs' sd about their own segment's mean, pooled over segments of two or more runs; None without."""
    big = [k for k in kept if len(k) > 1]
    if not big:
        return None
    return math.sqrt(sum(float(((k - k.mean()) ** 2).sum()) for k in big) / sum(len(k) - 1 for k in big))


def _spread(scatter: float, sizes: Sequence[int], rho: float) -> float:
    """One run's sd: the scatter inside segments of correlated runs, scaled back to the runs' spread."""
    big = [m for m in sizes if m > 1]
    return scatter * math.sqrt(sum(m - 1 for m in big) / sum(m - _g(m, rho) for m in big))


@lru_cache(maxsize=256)
def _traces(m: int, rho: float) -> tuple[float, float]:
    """tr(MR) and tr(MRMR) for a segment of m runs: M removes the mean, R is AR(1)'s correlation."""
    i = np.arange(m)
    corr = rho ** np.abs(i[:, None] - i[None, :])
    centred = corr - corr.mean(axis=0, keepdims=True)
    return float(np.trace(centred)), float(np.trace(centred @ centred))


def _degrees_of_freedom(sizes: Sequence[int], rho: float) -> float:
    """Satterthwaite's degrees of freedom of the pooled scatter when runs are AR(1) at rho: n - k at rho 0,
    fewer as neighbouring runs repeat each other."""
    traces = [_traces(m, rho) for m in sizes if m > 1]
    return sum(t for t, _ in traces) ** 2 / sum(t2 for _, t2 in traces) if traces else 0.0


def _half_width(scatter: float, sizes: Sequence[int], j: int, rho: float, alpha: float) -> tuple[float, float]:
    """(critical x standard error of the change at segment j, degrees of freedom); inf with too few."""
    n, df = sum(sizes), _degrees_of_freedom(sizes, rho)
    if df < MIN_DF:
        return math.inf, df
    se = _spread(scatter, sizes, rho) * math.sqrt(_contrast_variance(sizes[j - 1], sizes[j], rho))
    return float(stats.t.ppf(1 - alpha / (2 * (n - 1)), df)) * se, df


def _more_runs(scatter: float, sizes: list[int], change: float, rho: float, alpha: float) -> int | None:
    """Runs at the newest level that would call its step, if the levels and the scatter held."""
    for extra in range(1, MOST_MORE_RUNS + 1):
        if abs(change) > _half_width(scatter, [*sizes[:-1], sizes[-1] + extra], len(sizes) - 1, rho, alpha)[0]:
            return extra
    return None


def step_verdict(y: Sequence[float], segments: Sequence[Segment], step: Step, rho: float = RUN_CORRELATION,
                 alpha: float = FAMILY_ALPHA) -> StepVerdict:
    """The verdict on one flagged step of the fit `segments` of `y`."""
    j = next(i for i, s in enumerate(segments) if s.start == step.index)
    a, b = segments[j - 1], segments[j]
    kept = _kept(np.asarray(y, dtype=float), segments)
    scatter = None if kept is None else _scatter(kept)
    if kept is None or scatter is None:
        return StepVerdict(step.index, a.level, b.level, a.size, b.size, -math.inf, math.inf, 0.0, False, None)
    change = float(kept[j].mean() - kept[j - 1].mean())
    sizes = [len(k) for k in kept]
    half, df = _half_width(scatter, sizes, j, rho, alpha)
    called = abs(change) > half
    more = _more_runs(scatter, sizes, change, rho, alpha) if not called and j == len(segments) - 1 else None
    return StepVerdict(step.index, a.level, b.level, a.size, b.size, change - half, change + half, df, called, more)


def judge_steps(y: Sequence[float], threshold: float = DEFAULT_THRESHOLD,
                rho: float = RUN_CORRELATION) -> tuple[list[Segment], list[StepVerdict]]:
    """asv's fit of `y`, and the verdict on each step it flags (called or inconclusive)."""
    segments = fit_segments(y)
    return segments, [step_verdict(y, segments, s, rho) for s in flag_steps(segments, threshold)]


def within_correlation(y: Sequence[float], segments: Sequence[Segment]) -> float | None:
    """The lag-1 correlation of the runs about their fitted levels, pooled over segments (for the record of
    why the verdict does not estimate it: on short series it reads far below the noise's)."""
    runs = np.asarray(y, dtype=float)
    pairs = lagged = 0.0
    for s in segments:
        e = runs[s.start:s.end] - runs[s.start:s.end].mean()
        pairs += float((e[1:] * e[:-1]).sum())
        lagged += float((e * e).sum())
    return pairs / lagged if lagged > 0 else None
