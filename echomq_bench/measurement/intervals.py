"""The instrument's confidence intervals, on scipy's distributions.

    wilson(k, n)                 a proportion (false expiry, duplicates)
    quantile_ci(xs, q)           a median or p99, distribution-free, from order statistics
    median_interval(xs)          the median with the narrowest order-statistic interval that covers `level`
    t_half_width(xs)             half the Student t-interval of a mean (the verdicts' log ratios)
    rate_ci(counts, seconds)     a throughput, from batch means (t interval)
    prediction_bound(sd, n, p)   how far one new draw may land above a sample's mean (one-sided t)

A ratio with no simpler interval (the wasted work share of the lease sweep)
takes the bootstrap of `echomq_bench.measurement.stats.bootstrap_ci`.

Every interval is two-sided at `conf` (0.95 by default) unless it says
otherwise. An interval that the sample cannot bound on one side says so with
-inf/inf rather than inventing a limit.

The order-statistic intervals rest on one fact: for n values from any
continuous distribution, the number below its q-quantile is Binomial(n, q),
so [x(l), x(u)] covers the quantile with probability
P(l <= B <= u - 1). For the median that is 1 - 2 P(B <= k - 1) for
[x(k), x(n-k+1)]: with six values [min, max] covers it at 96.9%, and with
five no interval reaches 95% (93.8%), which is why fewer than MIN_TRIALS
values give no interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as st

from echomq_bench.measurement.stats import LEVEL, Floats, median

__all__ = ["wilson", "binom_cdf", "order_ranks", "quantile_ci", "order_coverage", "MedianInterval", "median_interval",
           "t_half_width", "rate_ci", "prediction_bound", "INTERVAL_METHOD", "MIN_TRIALS"]

# The fewest values an interval verdict is made from: the fewest whose median
# interval reaches 95%, and below which a t-interval is mostly its own width.
MIN_TRIALS = 6
INTERVAL_METHOD = "order statistics of the median (binomial, distribution-free)"


def _z(conf: float) -> float:
    return float(st.norm.ppf(0.5 + conf / 2))


def wilson(k: int, n: int, conf: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials; (0, 1) when n is 0.

    Unlike the normal interval it stays inside [0, 1] and has a real upper
    limit at k = 0, which is the case that matters for a rare false expiry.
    """
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"wilson: want 0 <= k <= n, got k={k} n={n}")
    z = _z(conf)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At k = 0 (k = n) the bound is exactly 0 (1); say so rather than print rounding noise.
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(B <= k) for B ~ Binomial(n, p)."""
    return float(st.binom.cdf(k, n, p))


def order_ranks(n: int, q: float, conf: float = LEVEL) -> tuple[int | None, int | None]:
    """1-based ranks (l, u), each tail at most (1 - conf) / 2, so that
    P(x(l) <= xi_q <= x(u)) >= conf; None where the sample is too small to bound that side."""
    if n <= 0:
        return None, None
    alpha = (1 - conf) / 2
    cdf = st.binom.cdf(np.arange(n), n, q)   # cdf[i] = P(B <= i)
    # Lower rank l: the largest l with P(B <= l - 1) <= alpha, i.e. x(l) is
    # below the quantile with probability >= 1 - alpha.
    lower = int(np.searchsorted(cdf, alpha, side="right"))
    # Upper rank u: the smallest u with P(B <= u - 1) >= 1 - alpha.
    upper = int(np.searchsorted(cdf, 1 - alpha, side="left")) + 1
    return (lower if lower >= 1 else None), (upper if upper <= n else None)


def quantile_ci(xs: Floats, q: float, conf: float = LEVEL) -> tuple[float, float]:
    """Distribution-free interval for the q-quantile from order statistics
    (the binomial method); -inf/inf on a side the sample cannot bound."""
    n = len(xs)
    if n == 0:
        return -math.inf, math.inf
    s = np.sort(np.asarray(xs, dtype=float))
    lower, upper = order_ranks(n, q, conf)
    return (float(s[lower - 1]) if lower else -math.inf), (float(s[upper - 1]) if upper else math.inf)


def order_coverage(n: int, k: int) -> float:
    """P(x(k) <= median <= x(n-k+1)) for n values from any continuous distribution."""
    if not 1 <= k <= (n + 1) // 2:
        raise ValueError(f"rank k must be from 1 to {(n + 1) // 2} for n = {n}, got {k}")
    return 1.0 - 2.0 * binom_cdf(k - 1, n, 0.5)


@dataclass(frozen=True)
class MedianInterval:
    n: int
    median: float
    ci: tuple[float, float] | None   # None: too few values for `level`, or fewer than min_n
    coverage: float | None           # the exact coverage of ci
    ranks: tuple[int, int] | None    # ci's order statistics, 1-based
    level: float
    min_n: int
    method: str = INTERVAL_METHOD

    @property
    def text(self) -> str:
        """`inconclusive (2 searches)` without an interval, else ''."""
        return f"inconclusive ({self.n} search{'' if self.n == 1 else 'es'})" if self.ci is None else ""

    def to_dict(self) -> dict[str, object]:
        return {"n": self.n, "median": self.median, "ci": list(self.ci) if self.ci else None,
                "coverage": self.coverage, "ranks": list(self.ranks) if self.ranks else None, "level": self.level,
                "min_n": self.min_n, "method": self.method, "text": self.text}


def median_interval(values: Sequence[float], level: float = LEVEL, min_n: int = MIN_TRIALS) -> MedianInterval:
    """The median and its narrowest order-statistic interval of at least `level` coverage (see the module)."""
    if not values:
        raise ValueError("no values to take the median of")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    s = sorted(float(v) for v in values)
    n = len(s)
    # The narrowest symmetric pair is the median's equal-tailed order-statistic interval.
    k, _ = order_ranks(n, 0.5, level)
    if k is None or n < min_n:
        return MedianInterval(n, median(s), None, None, None, level, min_n)
    return MedianInterval(n, median(s), (s[k - 1], s[n - k]), order_coverage(n, k), (k, n - k + 1), level, min_n)


def t_half_width(values: Floats, level: float = LEVEL) -> float:
    """Half the width of the Student t-interval of the mean of `values` (inf below two values)."""
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return math.inf
    se = float(np.std(arr, ddof=1)) / math.sqrt(arr.size)
    return float(st.t.ppf(1 - (1 - level) / 2, arr.size - 1)) * se


def rate_ci(counts: Sequence[int], batch_seconds: float, conf: float = LEVEL) -> tuple[float, float, float]:
    """Events per second as (mean, lo, hi) from per-batch counts (batch means,
    t interval): it allows for the burstiness a Poisson interval ignores."""
    arr = np.asarray(counts, dtype=float) / batch_seconds
    if arr.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(arr.mean())
    if arr.size < 2:
        return mean, -math.inf, math.inf
    half = t_half_width(arr, conf)
    return mean, mean - half, mean + half


def prediction_bound(sd: float, n: int, confidence: float) -> float:
    """How far above the mean of n draws with standard deviation sd one new
    draw lands with probability at most 1 - confidence (one-sided t prediction bound)."""
    if n < 2:
        raise ValueError(f"a prediction bound needs at least 2 draws, got {n}")
    return float(st.t.ppf(confidence, n - 1)) * sd * math.sqrt(1 + 1 / n)
