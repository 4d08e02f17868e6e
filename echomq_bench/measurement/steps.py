"""Step changes in a series of runs: a piecewise-constant fit with a penalty
per step, and the steps large enough to flag.

The method is asv's step detection (airspeed velocity, `asv.step_detect`),
implemented here from its documented algorithm rather than taken as a
dependency: the series of a history are short (tens to hundreds of runs),
so the exact fit is cheap, and the method's behaviour on noise is then ours
to test (tests/unit/test_history.py). ruptures was the alternative; it
would be a new dependency whose penalty still has to be chosen by hand,
while asv's criterion chooses it from the data.

1. The fit. For a penalty gamma, the levels mu and breakpoints minimise

       gamma * (number of segments) + sum_i |y_i - mu(segment of i)|

   (a Potts problem in the L1 norm: each level is its segment's median,
   so one wild run moves no level). Dynamic programming solves it exactly
   (Friedrich et al. 2008).
2. The penalty. gamma is not fixed: along the family of fits gamma
   produces, the one kept minimises asv's information criterion

       beta * k + ln(sigma_0 + S_k),   beta = 4 ln(n) / n

   where k is the number of segments, S_k the fit's total absolute
   deviation, and sigma_0 a floor (a tenth of the smallest step between
   levels, or 0.1% of the level with fewer than three segments) so a
   perfect fit does not win by dividing by zero. A step is kept only when
   it explains enough of the noise to pay for itself: the criterion scales
   with the noise the data show, so no noise level is assumed.
   asv also fits an AR(1) term for noise correlated between runs; it is
   left out of the fit: on series this short it absorbs a real step (a
   correlation near 1 makes a step one large difference among small ones).
   Runs close in time are correlated all the same, so each flagged step is
   judged afterwards at a declared bound on that correlation
   (echomq_bench.measurement.stepverdict).
3. Flagging (after asv's detect_regressions): a candidate step between two fitted
   segments is flagged when its size is above the relative threshold and
   above the mean absolute deviation of the runs on either side of it. An
   interior segment of a single run is an outlier, not a step, and is
   folded back into its neighbours.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["Segment", "Step", "fit_segments", "flag_steps", "DEFAULT_THRESHOLD"]

# Steps smaller than this share of the level before them are not flagged
# (asv's default regression threshold is 5% too).
DEFAULT_THRESHOLD = 0.05
_GRID = 48  # penalties tried, on a log scale from 0.1/n to 1 of the whole series' deviation


@dataclass(frozen=True)
class Segment:
    start: int      # first index, inclusive
    end: int        # last index, exclusive
    level: float    # the median of its runs
    spread: float   # the mean absolute deviation of its runs from the level

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Step:
    index: int       # the first run of the new level
    before: float
    after: float

    @property
    def change(self) -> float:
        """after / before - 1."""
        return self.after / self.before - 1 if self.before else math.inf


def _costs(y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """median[l, r] and deviation[l, r]: the median of y[l..r] and the sum of
    absolute deviations from it, for every l <= r (two running heaps per l;
    deviation is +inf where l > r, so no segment ends before it starts)."""
    n = len(y)
    medians = np.zeros((n, n))
    devs = np.full((n, n), np.inf)
    for left in range(n):
        low: list[float] = []   # max-heap of the lower half, negated
        high: list[float] = []  # min-heap of the upper half
        low_sum = high_sum = 0.0
        for right in range(left, n):
            x = float(y[right])
            if low and x > -low[0]:
                heapq.heappush(high, x)
                high_sum += x
            else:
                heapq.heappush(low, -x)
                low_sum += x
            if len(low) > len(high) + 1:
                moved = -heapq.heappop(low)
                low_sum -= moved
                heapq.heappush(high, moved)
                high_sum += moved
            elif len(high) > len(low):
                moved = heapq.heappop(high)
                high_sum -= moved
                heapq.heappush(low, -moved)
                low_sum += moved
            med = -low[0] if len(low) > len(high) else (-low[0] + high[0]) / 2
            medians[left, right] = med
            # sum |x - med| = (upper sum - med * upper count) + (med * lower count - lower sum)
            devs[left, right] = max(0.0, high_sum - med * len(high) + med * len(low) - low_sum)
    return medians, devs


def _potts(devs: np.ndarray, gammas: np.ndarray) -> list[tuple[int, ...]]:
    """For each penalty gamma, the exclusive right ends of the segments that minimise
    gamma * k + total deviation (exact); every gamma in one pass over the runs."""
    n = len(devs)
    best = np.zeros((len(gammas), n + 1))
    start = np.zeros((len(gammas), n + 1), dtype=int)
    rows = np.arange(len(gammas))
    for r in range(1, n + 1):
        cost = best[:, :r] + gammas[:, None] + devs[None, :r, r - 1]
        start[:, r] = np.argmin(cost, axis=1)
        best[:, r] = cost[rows, start[:, r]]
    fits = []
    for g in rows:
        ends = []
        r = n
        while r > 0:
            ends.append(r)
            r = int(start[g, r])
        fits.append(tuple(ends[::-1]))
    return fits


def _segments(ends: Sequence[int], medians: np.ndarray, devs: np.ndarray) -> list[Segment]:
    out, left = [], 0
    for end in ends:
        out.append(Segment(left, end, float(medians[left, end - 1]), float(devs[left, end - 1]) / (end - left)))
        left = end
    return out


def _criterion(segments: Sequence[Segment], n: int) -> float:
    """asv's information criterion: beta * k + ln(sigma_0 + total deviation)."""
    total = sum(s.spread * s.size for s in segments)
    levels = [s.level for s in segments]
    if len(levels) > 2:
        floor = 0.1 * min(abs(b - a) for a, b in zip(levels, levels[1:]))
    else:
        floor = 0.001 * min(abs(v) for v in levels)
    return 4 * math.log(n) / n * len(segments) + math.log(max(floor, 1e-300) + total)


def fit_segments(y: Sequence[float]) -> list[Segment]:
    """The piecewise-constant fit whose penalty the information criterion chose."""
    n = len(y)
    if n == 0:
        return []
    medians, devs = _costs(y)
    whole = float(devs[0, n - 1]) or 1.0
    low, high = math.log(0.1 / n), 0.0
    fits = set(_potts(devs, np.array([whole * math.exp(low + (high - low) * i / _GRID) for i in range(_GRID + 1)])))
    # Ties go to the fewer segments: a step has to earn its place.
    best = min(fits, key=lambda ends: (_criterion(_segments(ends, medians, devs), n), len(ends)))
    return _fold_outliers(_segments(best, medians, devs), medians, devs)


def _fold_outliers(segments: list[Segment], medians: np.ndarray, devs: np.ndarray) -> list[Segment]:
    """A segment of one run before the last is an outlier, not a level: the
    first run joins the next segment, any other the one before, and the
    levels are taken again. The last run alone may be a new level: it stays."""
    drop = {s.end if i == 0 else s.start for i, s in enumerate(segments[:-1]) if s.size == 1}
    if not drop:
        return segments
    return _segments([s.end for s in segments if s.end not in drop], medians, devs)


def flag_steps(segments: Sequence[Segment], threshold: float = DEFAULT_THRESHOLD) -> list[Step]:
    """The steps between fitted segments that are larger than `threshold` of
    the level before them and than the runs' spread on either side."""
    out = []
    for a, b in zip(segments, segments[1:]):
        jump = abs(b.level - a.level)
        if jump > threshold * abs(a.level) and jump > a.spread and jump > b.spread:
            out.append(Step(b.start, a.level, b.level))
    return out
