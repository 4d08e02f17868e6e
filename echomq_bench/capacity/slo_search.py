"""The two pure rules under `--slo`: the bisection of a rate, and the interval of a median.

`search_rate(passes, upper)` finds the highest rate at which `passes`
holds, within a relative resolution. It probes `upper` first (the
closed-loop capacity, which an open loop rarely holds); if that passes it
doubles until a rate fails, otherwise it halves until one passes. It then
bisects the bracket at its geometric midpoint, since the resolution is a
share of the rate, until the failing rate is within `resolution` of the
passing one. Every pass raises the lower end and every fail lowers the
upper end, so the rate found is the highest that passed, and the lowest
that failed lies just above it, whether or not the probes are monotonic.

`median_interval(values)` is the distribution-free interval of a median
from order statistics: [x(k), x(n-k+1)] covers the true median with
probability 1 - 2 P(B <= k-1), B ~ Binomial(n, 1/2), whatever the
distribution of the values. It takes the narrowest such interval that
covers at least `level`; with six values that is [min, max] at 96.9%, and
with five no interval reaches 95% (93.8%), which is why fewer searches than
`MIN_TRIALS` give "inconclusive".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

from echomq_bench.measurement.verdicts import LEVEL, MIN_TRIALS

__all__ = ["Step", "Found", "search_rate", "MedianInterval", "median_interval", "order_coverage", "SEARCH_METHOD",
           "INTERVAL_METHOD", "FLOOR_SHARE", "MAX_DOUBLINGS"]

SEARCH_METHOD = ("bisection of the open-loop rate at the geometric midpoint, from the closed-loop capacity (doubled "
                 "while it passes, halved while it fails)")
INTERVAL_METHOD = "order statistics of the median (binomial, distribution-free)"
FLOOR_SHARE = 1 / 64   # halving stops below this share of the upper rate: nothing tried held
MAX_DOUBLINGS = 3      # doubling stops past 8x the upper rate: everything tried held

Passes = Callable[[float, str], bool]


@dataclass(frozen=True)
class Step:
    rate: float
    phase: str      # "bracket" while the bracket is sought, then "bisect"
    passed: bool


@dataclass(frozen=True)
class Found:
    """The search's answer: the highest rate that passed and the lowest above it that failed.

    `rate` None: no rate tried passed, down to FLOOR_SHARE of the upper
    rate. `failed_above` None: every rate tried passed, up to MAX_DOUBLINGS
    doublings, and `rate` is a floor of the answer, not the answer."""

    rate: float | None
    failed_above: float | None
    steps: tuple[Step, ...]
    resolution: float

    @property
    def resolved(self) -> bool:
        return (self.rate is not None and self.failed_above is not None
                and self.failed_above <= self.rate * (1 + self.resolution))


def search_rate(passes: Passes, upper: float, *, resolution: float = 0.02, floor_share: float = FLOOR_SHARE,
                max_doublings: int = MAX_DOUBLINGS) -> Found:
    """Bisect for the highest rate `passes(rate, phase)` holds at, starting from `upper` (see the module)."""
    if not (upper > 0 and math.isfinite(upper)):
        raise ValueError(f"the upper rate must be a positive number, got {upper}")
    if not 0 < resolution < 1:
        raise ValueError(f"resolution must be a fraction between 0 and 1, got {resolution}")
    steps: list[Step] = []

    def probe(rate: float, phase: str) -> bool:
        ok = bool(passes(rate, phase))
        steps.append(Step(rate, phase, ok))
        return ok

    lo: float | None = None
    hi: float | None = None
    if probe(upper, "bracket"):
        lo = upper
        for _ in range(max_doublings):
            if not probe(lo * 2, "bracket"):
                hi = lo * 2
                break
            lo *= 2
    else:
        hi, rate = upper, upper / 2
        while rate >= upper * floor_share:
            if probe(rate, "bracket"):
                lo = rate
                break
            hi, rate = rate, rate / 2
    if lo is not None and hi is not None:
        while hi > lo * (1 + resolution):
            mid = math.sqrt(lo * hi)
            if probe(mid, "bisect"):
                lo = mid
            else:
                hi = mid
    return Found(lo, hi, tuple(steps), resolution)


def order_coverage(n: int, k: int) -> float:
    """P(x(k) <= median <= x(n-k+1)) for n values from any continuous distribution."""
    if not 1 <= k <= (n + 1) // 2:
        raise ValueError(f"rank k must be from 1 to {(n + 1) // 2} for n = {n}, got {k}")
    below = sum(math.comb(n, i) for i in range(k)) / float(2 ** n)
    return 1.0 - 2.0 * below


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
    best = max((k for k in range(1, (n + 1) // 2 + 1) if order_coverage(n, k) >= level), default=None)
    if best is None or n < min_n:
        return MedianInterval(n, statistics.median(s), None, None, None, level, min_n)
    return MedianInterval(n, statistics.median(s), (s[best - 1], s[n - best]), order_coverage(n, best),
                          (best, n - best + 1), level, min_n)
