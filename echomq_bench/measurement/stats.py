"""Ratios between builds, with a bootstrap confidence interval and a verdict.

Trials are paired: trial i of every build ran back to back on fresh
servers, so a slow minute of a shared machine slows both sides of pair i.
The figure is the median over trials of the per-trial ratio other/baseline;
its 95% interval is the percentile bootstrap of that median (trials
resampled with replacement). With few trials the bootstrap of a median
cannot reach past the smallest and largest ratio, so the interval is
honest about how little five trials can say.

A trial's own ratio can come from finer pairs: when builds take turns in
short slots, `round_ratio` is the median over rounds of the ratio of the
two builds' rates in that round, so a slot that a stall of the machine hit
moves one round's ratio, not the trial's.

The verdict is plain: `faster` when the whole interval lies on the better
side of 1 (above for throughput, below for a cost or a latency), `slower`
when it lies on the worse side, otherwise `no significant difference`.
A difference smaller than `min_effect` (a fraction; 0 by default) is
reported as no significant difference even when the interval excludes 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["Floats", "FloatArray", "Comparison", "bootstrap_ci", "paired_ratios", "compare_metric", "compare_ratios",
           "verdict", "round_ratio", "FASTER", "SLOWER", "SAME", "N_BOOT", "LEVEL"]

FASTER, SLOWER, SAME = "faster", "slower", "no significant difference"
N_BOOT = 10_000
LEVEL = 0.95

FloatArray = npt.NDArray[np.float64]
# A column of numbers, as a list or as a numpy array.
Floats = Sequence[float] | npt.NDArray[np.floating[Any]]


@dataclass(frozen=True)
class Comparison:
    ratio: float            # median over trials of other / baseline
    ci95: tuple[float, float]
    verdict: str
    trials: int
    higher_is_better: bool

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ci95"] = list(self.ci95)
        return out


def paired_ratios(baseline: Floats, other: Floats) -> FloatArray:
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(other, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError(f"paired trials need two equal, non-empty lists; got {len(a)} and {len(b)}")
    if np.any(a <= 0) or np.any(b <= 0) or not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        raise ValueError("ratios need positive, finite values")
    return b / a


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


def verdict(lo: float, hi: float, *, higher_is_better: bool, ratio: float | None = None,
            min_effect: float = 0.0) -> str:
    """faster / slower / no significant difference, from the interval of a ratio to the baseline."""
    if ratio is not None and abs(ratio - 1.0) < min_effect:
        return SAME
    if lo > 1.0:
        return FASTER if higher_is_better else SLOWER
    if hi < 1.0:
        return SLOWER if higher_is_better else FASTER
    return SAME


def compare_metric(baseline: Floats, other: Floats, *, higher_is_better: bool,
                   level: float = LEVEL, n_boot: int = N_BOOT, seed: int = 0,
                   min_effect: float = 0.0) -> Comparison:
    """Trial i of `other` against trial i of `baseline`."""
    return compare_ratios(paired_ratios(baseline, other), higher_is_better=higher_is_better, level=level,
                          n_boot=n_boot, seed=seed, min_effect=min_effect)


def compare_ratios(ratios: Floats, *, higher_is_better: bool, level: float = LEVEL,
                   n_boot: int = N_BOOT, seed: int = 0, min_effect: float = 0.0) -> Comparison:
    """One ratio other/baseline per trial, however each trial got it."""
    arr = np.asarray(ratios, dtype=float)
    if len(arr) == 0 or np.any(arr <= 0) or not np.all(np.isfinite(arr)):
        raise ValueError("ratios must be positive and finite, one per trial")
    ratio, lo, hi = bootstrap_ci(arr, level=level, n_boot=n_boot, seed=seed)
    return Comparison(ratio, (lo, hi),
                      verdict(lo, hi, higher_is_better=higher_is_better, ratio=ratio, min_effect=min_effect),
                      len(arr), higher_is_better)


def round_ratio(baseline: dict[int, float], other: dict[int, float]) -> float | None:
    """Median over the rounds both builds have of other/baseline; None when none."""
    ratios = [other[r] / baseline[r] for r in sorted(set(baseline) & set(other)) if baseline[r] > 0 and other[r] > 0]
    return float(np.median(ratios)) if ratios else None
