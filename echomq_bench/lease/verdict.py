"""Where a swept lease stands against each limit, and how much more data would decide it.

A limit is judged on the interval, not on the point: a lease `fits` when its
95% interval lies within the limit, is `over` when the interval lies beyond it,
and sits at the `edge` when the interval holds the limit, whichever side the
point falls on (so two runs that differ by noise alone say the same). Two more
states say that the data cannot judge yet: `few` (too few crashes for a 95%
upper bound on the p99) and `unmeasured` (a window too short, in blocks of
time, to show how overruns cluster: docs/design/lease-model.md, "Blocks of
time").
"""

from __future__ import annotations

import math

from echomq_bench.measurement.intervals import order_ranks

__all__ = ["EDGE", "FEW", "FITS", "MIN_CRASHES", "OVER", "UNMEASURED", "budget_state", "min_crashes",
           "more_to_decide", "tolerance_state"]

FITS, EDGE, OVER, FEW, UNMEASURED = "fits", "edge", "over", "few", "unmeasured"


def min_crashes(q: float = 0.99) -> int:
    """The fewest values whose order statistics give a 95% upper bound on the q-quantile."""
    n = 1
    while order_ranks(n, q)[1] is None:
        n += 1
    return n


MIN_CRASHES = min_crashes()   # 367 for the p99


def budget_state(lo: float, hi: float, supported: bool, budget: float) -> str:
    """The overrun rate's 95% interval against the false-expiry budget."""
    if lo > budget:
        return OVER
    if not supported:
        return UNMEASURED
    return FITS if hi <= budget else EDGE


def tolerance_state(lo: float, hi: float, tolerance_ms: float) -> str:
    """The p99 recovery's 95% interval (at scale 1) against the recovery tolerance."""
    if math.isfinite(lo) and lo > tolerance_ms:
        return OVER
    if not math.isfinite(hi):
        return FEW
    return FITS if hi <= tolerance_ms else EDGE


def more_to_decide(value: float, lo: float, hi: float, limit: float) -> float:
    """About how many times the sample would move the interval off the limit: a half-width
    shrinks as 1/sqrt(n), so the square of the width there is over the room there is; with no
    event at all the upper end falls as 1/n instead (Wilson: about z^2 / n). 1 when decided;
    inf when the point sits on the limit."""
    if hi <= limit or lo > limit:
        return 1.0
    if value <= 0:
        return max(1.0, hi / limit)
    if value == limit:
        return math.inf
    width, room = (hi - value, limit - value) if value < limit else (value - lo, value - limit)
    return max(1.0, (width / room) ** 2)
