"""The pure rule under `--slo`: the bisection of a rate.

`search_rate(passes, upper)` finds the highest rate at which `passes`
holds, within a relative resolution. It probes `upper` first (the
closed-loop capacity, which an open loop rarely holds); if that passes it
doubles until a rate fails, otherwise it halves until one passes. It then
bisects the bracket at its geometric midpoint, since the resolution is a
share of the rate, until the failing rate is within `resolution` of the
passing one. Every pass raises the lower end and every fail lowers the
upper end, so the rate found is the highest that passed, and the lowest
that failed lies just above it, whether or not the probes are monotonic.

Each build's rate is the median over its searches, with the order-statistic
interval of `echomq_bench.measurement.intervals.median_interval`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

__all__ = ["Step", "Found", "search_rate", "SEARCH_METHOD", "FLOOR_SHARE", "MAX_DOUBLINGS"]

SEARCH_METHOD = ("bisection of the open-loop rate at the geometric midpoint, from the closed-loop capacity (doubled "
                 "while it passes, halved while it fails)")
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
