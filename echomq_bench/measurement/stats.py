"""Resampling and pairing helpers under the verdicts and the lease intervals.

`bootstrap_ci` is the percentile bootstrap of a statistic of one or more
columns resampled by row; the lease sweep uses it for ratios of sums, where
no closed form serves. Verdicts between builds do not: with few trials the
bootstrap of a median cannot reach past the smallest and largest ratio, so
`echomq_bench.measurement.verdicts` uses a t-interval on log ratios.

A trial's own ratio can come from finer pairs: when builds take turns in
short slots, `round_ratio` is the median over rounds of the ratio of the
two builds' rates in that round, so a slot that a stall of the machine hit
moves one round's ratio, not the trial's.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["Floats", "FloatArray", "bootstrap_ci", "round_ratio", "N_BOOT", "LEVEL"]

N_BOOT = 10_000
LEVEL = 0.95

FloatArray = npt.NDArray[np.float64]
# A column of numbers, as a list or as a numpy array.
Floats = Sequence[float] | npt.NDArray[np.floating[Any]]


def bootstrap_ci(*columns: Floats, stat: Callable[..., float] | None = None, level: float = LEVEL,
                 n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, float]:
    """`stat` of the columns and its percentile-bootstrap interval, rows
    resampled together: (value, lo, hi). Without `stat`, the median of one
    column (a list of ratios)."""
    cols = [np.asarray(c, dtype=float) for c in columns]
    if not cols or any(c.ndim != 1 or len(c) != len(cols[0]) for c in cols) or len(cols[0]) == 0:
        raise ValueError("bootstrap needs non-empty lists of values, all of one length")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    if stat is None and len(cols) != 1:
        raise ValueError("the median takes one list of values; give stat for several columns")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(cols[0]), size=(n_boot, len(cols[0])))
    if stat is None:
        value, boots = float(np.median(cols[0])), np.median(cols[0][picks], axis=1)
    else:
        value = float(stat(*cols))
        boots = np.array([stat(*(c[idx] for c in cols)) for idx in picks], dtype=float)
    tail = (1 - level) / 2
    lo, hi = np.quantile(boots, [tail, 1 - tail])
    return value, float(lo), float(hi)


def round_ratio(baseline: dict[int, float], other: dict[int, float]) -> float | None:
    """Median over the rounds both builds have of other/baseline; None when none."""
    ratios = [other[r] / baseline[r] for r in sorted(set(baseline) & set(other)) if baseline[r] > 0 and other[r] > 0]
    return float(np.median(ratios)) if ratios else None
