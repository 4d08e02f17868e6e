"""The soak's figures from the workers' evidence: completes per second, and
how long the load took to recover after each fault.

Recovery after a fault is the time from the fault's end (the moment its
injection returned: the partition healed, the server resumed, the killed
consumer replaced) until completes run again at RECOVERED_SHARE of the
rate before it. The rate before is the completes accepted in the PRE_S
seconds before the fault began, per second; "running again" is the first
WINDOW_S window, sliding from the fault's end in STEP_S steps, that holds
at least RECOVERED_SHARE of that many completes per second. A window must
close before the next fault begins (or the producers stop): a fault the load
did not recover from in its gap has no recovery time and is counted as
not recovered. A fault with no completes before it (one that struck a load
not yet recovered) has none either.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Sequence

from echomq_bench.measurement.stats import nearest_rank
from echomq_bench.records.kinds.faults import KindEntry

__all__ = ["RECOVERED_SHARE", "RECOVERY_MEANS", "PRE_S", "WINDOW_S", "STEP_S", "recovery_s",
           "per_second", "by_kind"]

RECOVERED_SHARE = 0.8
PRE_S = 2.0
WINDOW_S = 1.0
STEP_S = 0.1
RECOVERY_MEANS = (f"the fault's end to the first {WINDOW_S:g} s window with completes at >= {RECOVERED_SHARE:.0%} "
                  f"of their rate in the {PRE_S:g} s before it")


def _count(times: Sequence[float], lo: float, hi: float) -> int:
    """How many of the sorted `times` lie in [lo, hi)."""
    return bisect_left(times, hi) - bisect_left(times, lo)


def recovery_s(times: Sequence[float], start: float, end: float, limit: float) -> float | None:
    """The recovery time of a fault that ran from `start` to `end`; `times`
    are the completes' answer times, sorted; `limit` is when the next fault
    began or the producers stopped. None when the load did not recover."""
    before = _count(times, start - PRE_S, start) / PRE_S
    if before <= 0:
        return None
    need = RECOVERED_SHARE * before * WINDOW_S
    steps = 0
    while end + steps * STEP_S + WINDOW_S <= limit:
        lo = end + steps * STEP_S
        if _count(times, lo, lo + WINDOW_S) >= need:
            return round(steps * STEP_S, 3)
        steps += 1
    return None


def per_second(times: Sequence[float], t0: float, end: float) -> list[int]:
    """Completes accepted in each second from t0 to end (the last one may be partial)."""
    bins = [0] * max(1, math.ceil(end - t0))
    for t in times:
        if t0 <= t < end:
            bins[int(t - t0)] += 1
    return bins


def by_kind(rows: Sequence[tuple[str, str, float | None]]) -> list[KindEntry]:
    """Per kind, from (kind, family, recovery) per fault, in first-seen order."""
    out = []
    for kind in dict.fromkeys(k for k, _, _ in rows):
        mine = [r for r in rows if r[0] == kind]
        done = [r[2] for r in mine if r[2] is not None]
        out.append(KindEntry(kind, mine[0][1], len(mine), len(done), nearest_rank(done, 0.5), nearest_rank(done, 0.99)))
    return out
