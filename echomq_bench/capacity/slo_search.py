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

A rate holds when `in_a_row` of its probes hold, one after the other; the
first that misses settles it (`all_of`). With m probes in a row the search
closes on the rate where m in a row hold half the time, which is where one
probe holds with probability 0.5 ** (1 / m) (`held_share`): one probe gives
the rate a probe holds half the time, 14 the rate it holds 95.2% of the
time (`in_a_row(0.95)`). docs/design/slo.md says why and what it costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

__all__ = ["Step", "Found", "search_rate", "all_of", "in_a_row", "held_share", "SEARCH_METHOD", "FLOOR_SHARE",
           "MAX_DOUBLINGS"]

SEARCH_METHOD = ("bisection of the open-loop rate at the geometric midpoint, from the closed-loop capacity (doubled "
                 "while it passes, halved while it fails)")
FLOOR_SHARE = 1 / 64   # halving stops below this share of the upper rate: nothing tried held
MAX_DOUBLINGS = 3      # doubling stops past 8x the upper rate: everything tried held

Passes = Callable[[float, str], bool]
ProbeOnce = Callable[[float, str, int], bool]   # rate, phase, attempt at that rate (1-based)


def in_a_row(held: float) -> int:
    """How many probes in a row a rate must hold for the search to close on the rate one probe holds
    with probability `held` or more: the least m with 0.5 ** (1 / m) >= held."""
    if not 0 < held < 1:
        raise ValueError(f"the share held must be a fraction between 0 and 1, got {held}")
    # The rounding keeps 50% at one probe, not two, where 0.5 ** (1 / 1) is held exactly.
    return max(1, math.ceil(round(math.log(0.5) / math.log(held), 9)))


def held_share(probes_in_a_row: int) -> float:
    """The probability one probe holds at the rate where `probes_in_a_row` in a row hold half the time."""
    if probes_in_a_row < 1:
        raise ValueError(f"a rate needs at least one probe, got {probes_in_a_row}")
    return float(0.5 ** (1 / probes_in_a_row))


def all_of(probe_once: ProbeOnce, probes_in_a_row: int) -> Passes:
    """A rule that a rate holds when `probes_in_a_row` probes at it hold, run one after the other and
    stopped at the first that misses (a miss settles it, so a rate above the answer costs few probes).
    `probe_once(rate, phase, attempt)` runs one probe, `attempt` counting from 1 at each rate."""
    if probes_in_a_row < 1:
        raise ValueError(f"a rate needs at least one probe, got {probes_in_a_row}")

    def passes(rate: float, phase: str) -> bool:
        return all(probe_once(rate, phase, attempt) for attempt in range(1, probes_in_a_row + 1))

    return passes


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
