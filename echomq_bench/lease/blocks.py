"""Rates over blocks of time, the unit a stall replicates in.

A stall (the client held up, the server busy, a lease process descheduled)
stretches every execution in flight at once, so overruns and refused
completes come in clusters, not as independent trials. The executions are
grouped by the block of time their claim was sent in, each block twice the
real lease long and at least BLOCK_S, so that one stall's cluster mostly
falls in one block; the rate's interval is widened by the design effect, how
much more the blocks' counts vary than independent executions would:

    ratio estimator   p = K / N, K and N summed over the G blocks' k_g and n_g
    its variance      V = G / (G - 1) * sum_g (k_g - p n_g)^2 / N^2   (cluster-robust, linearised)
    design effect     deff = V / (p (1 - p) / N), at least 1
    interval          Wilson's for K / deff events in N / deff executions (the effective sample)

With deff = 1 this is Wilson's interval. A rate with at least DEFF_EVENTS
events in two or more blocks measures its own design effect. With fewer it
cannot show how its events cluster (with none, not at all), so it also
takes the design effect of the lease's LONGEST longest executions (claim
sent to complete answered): a stall that pushes executions past the lease
stretches every execution in flight, so it clusters the longest ones too,
and clusters them more than it clusters overruns (more of them cross the
lower threshold at once). A rate with neither is `supported` False: its
bound assumes independent executions, and the recommendation does not
confirm a lease on it (docs/design/lease-model.md, "Blocks of time").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from echomq_bench.measurement.stats import LEVEL

__all__ = ["BLOCK_S", "DEFF_EVENTS", "LONGEST", "BlockCounts", "BlockRate", "block_counts", "block_length_s",
           "block_rate", "lent_design_effect", "longest", "wilson_bounds"]

BLOCK_S = 0.25       # the shortest block, real seconds
DEFF_EVENTS = 20     # the fewest events that measure a design effect
LONGEST = 40         # the longest executions whose clustering a rate with fewer events takes


@dataclass(frozen=True)
class BlockCounts:
    """Executions and events per block of time."""

    executions: np.ndarray
    events: np.ndarray

    @property
    def total(self) -> tuple[int, int]:
        return int(self.events.sum()), int(self.executions.sum())

    def design_effect(self) -> float | None:
        """V over the binomial variance (module docstring); None with fewer than 2 events or 2 blocks."""
        k, n = self.total
        g = int(self.executions.size)
        if k < 2 or g < 2 or k >= n:
            return None
        p = k / n
        v = g / (g - 1) * float(((self.events - p * self.executions) ** 2).sum()) / n ** 2
        return v / (p * (1 - p) / n)

    def measures_clustering(self) -> bool:
        """Enough events, in enough blocks, for the design effect to be read off this rate alone."""
        k, _ = self.total
        return k >= DEFF_EVENTS and self.executions.size >= 2


@dataclass(frozen=True)
class BlockRate:
    """A rate with its interval over blocks of time."""

    events: int
    executions: int
    blocks: int
    value: float
    lo: float
    hi: float
    design_effect: float       # the one the interval used, at least 1
    measured: float | None     # this rate's own design effect, where it has one
    supported: bool            # the clustering was measured (here or on the run's other leases)

    def to_dict(self) -> dict[str, float | int | bool | None]:
        return {"events": self.events, "executions": self.executions, "blocks": self.blocks,
                "design_effect": self.design_effect, "measured": self.measured, "supported": self.supported}


def block_length_s(lease_real_ms: float) -> float:
    """Twice the real lease, at least BLOCK_S: an overrun's claim precedes the stall by up to a lease."""
    return max(BLOCK_S, 2 * lease_real_ms / 1000)


def block_counts(times: np.ndarray, hits: np.ndarray, window: tuple[float, float], length_s: float) -> BlockCounts:
    """Executions (by claim sent, `times`) and events (`hits`) per block: the window cut into
    equal blocks, as many as fit at `length_s` (at least one)."""
    start, end = window
    g = max(1, int((end - start) // length_s))
    edges = np.linspace(start, end, g + 1)
    n, _ = np.histogram(times, bins=edges)
    k, _ = np.histogram(times[hits.astype(bool)], bins=edges) if times.size else (np.zeros(g, dtype=int), None)
    return BlockCounts(n, k)


def wilson_bounds(k: float, n: float, level: float = LEVEL) -> tuple[float, float]:
    """Wilson's interval for k events in n trials, both possibly fractional (an effective sample)."""
    if n <= 0:
        return 0.0, 1.0
    z = float(st.norm.ppf(0.5 + level / 2))
    p = min(1.0, max(0.0, k / n))
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (0.0 if k <= 0 else max(0.0, centre - half)), (1.0 if k >= n else min(1.0, centre + half))


def longest(times: np.ndarray, spans: np.ndarray, window: tuple[float, float], length_s: float,
            count: int = LONGEST) -> BlockCounts:
    """The `count` longest spans as the events over the blocks (ties at the threshold all count)."""
    if spans.size <= count:
        return block_counts(times, np.ones(spans.size, dtype=bool), window, length_s)
    threshold = np.partition(spans, spans.size - count)[spans.size - count]
    return block_counts(times, spans >= threshold, window, length_s)


def lent_design_effect(longest_counts: BlockCounts) -> float | None:
    """The design effect a rate with few events takes: its lease's longest executions'."""
    return longest_counts.design_effect() if longest_counts.measures_clustering() else None


def block_rate(counts: BlockCounts, lent_deff: float | None, level: float = LEVEL) -> BlockRate:
    """The rate and its interval over blocks: with its own design effect where it measures one,
    else with the larger of its own and the lent one."""
    k, n = counts.total
    own = counts.design_effect()
    measures = counts.measures_clustering()
    deff = max([1.0] + [d for d in ((own,) if measures else (own, lent_deff)) if d is not None])
    lo, hi = wilson_bounds(k / deff, n / deff, level)
    supported = measures or lent_deff is not None
    return BlockRate(k, n, int(counts.executions.size), k / n if n else math.nan, lo, hi, deff, own, supported)
