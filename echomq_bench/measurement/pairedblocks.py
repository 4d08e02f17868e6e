"""Two sides run in alternating blocks (A B A B ...) on one server, and judged pair by pair.

Each block does the same work on its side, and its figure is the server time
INFO commandstats charged to one command over the block, per unit of work
(a job cycle, say): the server's own clock, with no network or client time
in it. A slow minute of a shared machine slows both blocks of a pair alike,
so the ratio A_i / B_i of adjacent blocks is steadier than either side's
figures, and the pairs, not the blocks, are the sample.

The ratio is the geometric mean of the pair ratios and its interval
Student's t on their logarithms, n - 1 degrees of freedom for n pairs: the
rule of `echomq_bench.measurement.verdicts` (`log_half_width`), which holds
for few pairs and keeps A/B and B/A reciprocal. It judges nothing: a
benchmark prints it.

    block_figure(before, after, units)   µs per unit between two commandstats readings
    paired_ratio(a, b)                   each side's mean, the ratio A/B over pairs and its interval
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from echomq_bench.errors import MeasurementError
from echomq_bench.measurement.stats import LEVEL
from echomq_bench.measurement.verdicts import log_half_width

__all__ = ["PairedRatio", "block_figure", "paired_ratio", "METHOD"]

METHOD = "geometric mean of the pair ratios, Student t-interval on their logs (n - 1 df)"


def block_figure(before: tuple[int, int], after: tuple[int, int], units: int, calls_per_unit: int = 2) -> float:
    """Server µs per unit between two (calls, usec) readings of one command. The calls must be exactly
    units x calls_per_unit: any other count means another client ran that command meanwhile, and its
    time is in the figure."""
    if units <= 0:
        raise ValueError(f"a block needs at least one unit of work, got {units}")
    calls, usec = after[0] - before[0], after[1] - before[1]
    expected = units * calls_per_unit
    if calls != expected:
        raise MeasurementError(f"the server counted {calls} calls over a block of {expected}: another client "
                               "ran the same command meanwhile, so the block's time is not its own")
    return usec / units


@dataclass(frozen=True)
class PairedRatio:
    a_mean: float                    # side A's mean figure over its blocks
    b_mean: float
    ratio: float                     # geometric mean of a_i / b_i
    ci: tuple[float, float] | None   # at `level`; None for one pair
    n: int                           # pairs
    level: float
    method: str = METHOD

    def label(self, digits: int = 3) -> str:
        """`1.182 [1.150, 1.215] (12 pairs)`."""
        ci = "no interval" if self.ci is None else f"{self.ci[0]:.{digits}f}, {self.ci[1]:.{digits}f}"
        return f"{self.ratio:.{digits}f} [{ci}] ({self.n} pair{'' if self.n == 1 else 's'})"


def paired_ratio(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> PairedRatio:
    """A over B from blocks that ran in pairs: a[i] beside b[i]."""
    if len(a) != len(b) or not a:
        raise ValueError(f"pairs need as many A blocks as B blocks, at least one: got {len(a)} and {len(b)}")
    if min(*a, *b) <= 0:
        raise ValueError("a block's figure must be positive to take its ratio")
    ratios = [x / y for x, y in zip(a, b)]
    centre = float(np.mean(np.log(ratios)))
    half = log_half_width(ratios, level)
    ci = None if math.isinf(half) else (math.exp(centre - half), math.exp(centre + half))
    return PairedRatio(float(np.mean(a)), float(np.mean(b)), math.exp(centre), ci, len(ratios), level)
