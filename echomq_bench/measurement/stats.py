"""The instrument's point statistics: medians, spreads, quantiles, the bootstrap.

Every median, range and quantile a record or a report shows is taken here,
so two figures called "median" are always the same statistic; the
intervals (order statistics, Wilson, Student's t) are in
`echomq_bench.measurement.intervals`.

    median(xs)                  the middle value (the mean of the two middle ones); nan when empty
    span(xs), spread(xs)        (min, max), and {median, min, max} as records hold it
    quantile(xs, q)             linear interpolation (numpy's default); nan when empty
    quantiles(xs, qs)           the same at many points at once
    quartiles(xs)               (q1, q3), by the method the caller names
    nearest_rank(xs, q)         a quantile that is a measured value
    bootstrap_ci(*columns)      a statistic and its percentile-bootstrap interval
    bootstrap_sd(stat, groups)  the bootstrap standard deviation of a statistic of resampled groups
    round_ratio(a, b)           the median over rounds of b/a

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

import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["Floats", "FloatArray", "median", "span", "spread", "quantile", "quantiles", "quartiles", "nearest_rank",
           "bootstrap_ci", "bootstrap_sd", "round_ratio", "N_BOOT", "LEVEL"]

N_BOOT = 10_000
LEVEL = 0.95

FloatArray = npt.NDArray[np.float64]
# A column of numbers, as a list or as a numpy array.
Floats = Sequence[float] | npt.NDArray[np.floating[Any]]


def _array(values: Floats | Iterable[float]) -> FloatArray:
    if isinstance(values, np.ndarray):
        return values.astype(float, copy=False).ravel()
    return np.asarray(list(values), dtype=float)


def median(values: Floats | Iterable[float]) -> float:
    """The median; for an even count the mean of the two middle values; nan when empty."""
    arr = _array(values)
    return float(np.median(arr)) if arr.size else math.nan


def span(values: Floats | Iterable[float]) -> tuple[float, float]:
    """The smallest and the largest value."""
    arr = _array(values)
    if arr.size == 0:
        raise ValueError("no values to take the range of")
    return float(arr.min()), float(arr.max())


def spread(values: Floats | Iterable[float]) -> dict[str, float]:
    """Median and range over trials, as a record holds them: {"median", "min", "max"}."""
    arr = _array(values)
    lo, hi = span(arr)
    return {"median": median(arr), "min": lo, "max": hi}


def quantile(values: Floats | Iterable[float], q: float) -> float:
    """The q-quantile (linear interpolation, numpy's default); nan when empty."""
    arr = _array(values)
    if arr.size == 0:
        return math.nan
    return float(np.quantile(arr, q))


def quantiles(values: Floats | Iterable[float], qs: Floats, method: str = "linear") -> FloatArray:
    """The quantiles at each of `qs` by one of numpy's methods; nan when empty.
    "linear" is numpy's default; "weibull" is the stdlib's `statistics.quantiles`
    default (positions at p(n + 1), clamped to the ends)."""
    arr, at = _array(values), np.asarray(qs, dtype=float)
    if arr.size == 0:
        return np.full(at.shape, math.nan)
    out: FloatArray = np.quantile(arr, at, method=method)  # type: ignore[call-overload]
    return out


def quartiles(values: Floats | Iterable[float], method: str = "linear") -> tuple[float, float]:
    """(q1, q3) by one of numpy's quantile methods (see `quantiles`); nan when empty."""
    q1, q3 = quantiles(values, [0.25, 0.75], method)
    return float(q1), float(q3)


def nearest_rank(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0 < q <= 1) by nearest rank: a value that was measured. None when empty."""
    if not len(values):
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


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
        value, boots = median(cols[0]), np.median(cols[0][picks], axis=1)
    else:
        value = float(stat(*cols))
        boots = np.array([stat(*(c[idx] for c in cols)) for idx in picks], dtype=float)
    tail = (1 - level) / 2
    lo, hi = np.quantile(boots, [tail, 1 - tail])
    return value, float(lo), float(hi)


def bootstrap_sd(stat: Callable[[npt.NDArray[np.int64]], float], groups: int, n_boot: int,
                 seed: int = 0) -> float:
    """The standard deviation of `stat` over `n_boot` resamples of `groups`
    groups (indices drawn with replacement, `groups` at a time); a resample
    whose statistic is nan (undefined) is left out."""
    rng = np.random.default_rng(seed)
    reps = [stat(rng.integers(0, groups, groups)) for _ in range(n_boot)]
    return float(np.nanstd(reps))


def round_ratio(baseline: dict[int, float], other: dict[int, float]) -> float | None:
    """Median over the rounds both builds have of other/baseline; None when none."""
    ratios = [other[r] / baseline[r] for r in sorted(set(baseline) & set(other)) if baseline[r] > 0 and other[r] > 0]
    return median(ratios) if ratios else None
