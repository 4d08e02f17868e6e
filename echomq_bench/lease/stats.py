"""Confidence intervals for the lease sweep, with no dependency beyond numpy.

    wilson(k, n)                 a proportion (false expiry, duplicates)
    quantile_ci(xs, q)           a median or p99, distribution-free, from order statistics
    rate_ci(counts, seconds)     a throughput, from batch means (t interval)

A ratio with no simpler interval (the wasted work share) takes the
bootstrap of `echomq_bench.measurement.stats.bootstrap_ci`.

Every interval is two-sided at `conf` (0.95 by default). An interval that
the sample cannot bound on one side says so with -inf/inf rather than
inventing a limit.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Sequence

import numpy as np

from echomq_bench.measurement.stats import Floats

__all__ = ["wilson", "binom_cdf", "quantile", "quantile_ci", "rate_ci", "t_quantile"]


def _z(conf: float) -> float:
    return NormalDist().inv_cdf(0.5 + conf / 2)


def wilson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
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
    """P(B <= k) for B ~ Binomial(n, p), summed exactly in log space."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
            for i in range(k + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


def quantile(xs: Floats, q: float) -> float:
    """The q-quantile (linear interpolation, numpy's default); nan when empty."""
    if len(xs) == 0:
        return math.nan
    return float(np.quantile(np.asarray(xs, dtype=float), q))


def _order_ranks(n: int, q: float, conf: float) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) with P(X_(l) <= xi_q <= X_(u)) >= conf; None where
    the sample is too small to bound that side."""
    alpha = (1 - conf) / 2
    if n > 20_000:  # the normal approximation is exact enough here and O(1)
        z = _z(conf)
        sd = math.sqrt(n * q * (1 - q))
        lo, hi = math.floor(n * q - z * sd), math.ceil(n * q + z * sd) + 1
        return (lo if lo >= 1 else None), (hi if hi <= n else None)
    cdf = []
    lp, lq = (math.log(q), math.log1p(-q)) if 0 < q < 1 else (0.0, 0.0)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
            for i in range(n + 1)]
    top = max(logs)
    run = 0.0
    weights = [math.exp(v - top) for v in logs]
    total = math.fsum(weights)
    for w in weights:
        run += w
        cdf.append(run / total)  # cdf[i] = P(B <= i)
    # Lower rank l: the largest l with P(B <= l - 1) <= alpha, i.e. X_(l) is
    # below the quantile with probability >= 1 - alpha.
    lower = None
    for rank in range(1, n + 1):
        if cdf[rank - 1] <= alpha:
            lower = rank
        else:
            break
    upper = None
    for u in range(1, n + 1):
        if cdf[u - 1] >= 1 - alpha:
            upper = u
            break
    return lower, upper


def quantile_ci(xs: Floats, q: float, conf: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval for the q-quantile from order statistics
    (the binomial method); -inf/inf on a side the sample cannot bound."""
    n = len(xs)
    if n == 0:
        return -math.inf, math.inf
    s = np.sort(np.asarray(xs, dtype=float))
    lower, upper = _order_ranks(n, q, conf)
    return (float(s[lower - 1]) if lower else -math.inf), (float(s[upper - 1]) if upper else math.inf)


_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t_quantile(df: int) -> float:
    """Student t 97.5% point (two-sided 95%) for df degrees of freedom."""
    if df <= 0:
        return math.inf
    for d in sorted(_T975):
        if df <= d:
            return _T975[d]
    return _z(0.95)


def rate_ci(counts: Sequence[int], batch_seconds: float) -> tuple[float, float, float]:
    """Events per second as (mean, lo, hi) from per-batch counts (batch means,
    95% t interval): it allows for the burstiness a Poisson interval ignores."""
    arr = np.asarray(counts, dtype=float) / batch_seconds
    if arr.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(arr.mean())
    if arr.size < 2:
        return mean, -math.inf, math.inf
    half = t_quantile(arr.size - 1) * float(arr.std(ddof=1)) / math.sqrt(arr.size)
    return mean, mean - half, mean + half
