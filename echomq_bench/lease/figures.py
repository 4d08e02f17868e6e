"""The lease analysis's figures: a value with its 95% interval, and the quantiles of a sample."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from echomq_bench.measurement.intervals import quantile_ci
from echomq_bench.measurement.stats import quantile

__all__ = ["Interval", "interval", "finite", "quantile_figures"]


@dataclass(frozen=True)
class Interval:
    value: float
    lo: float
    hi: float

    def contains(self, x: float) -> bool:
        # bool(): a numpy bool is not JSON's, and is never `is True`.
        return bool(self.lo <= x <= self.hi)

    def to_dict(self) -> dict[str, float | None]:
        return {k: (None if v is None or not math.isfinite(v) else v)
                for k, v in (("value", self.value), ("lo", self.lo), ("hi", self.hi))}


def interval(value: float, lo_hi: tuple[float, float]) -> Interval:
    return Interval(float(value), float(lo_hi[0]), float(lo_hi[1]))


def finite(v: Any) -> Any:
    """A float as JSON can hold it: None for NaN and infinities."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def quantile_figures(xs: np.ndarray) -> dict[str, Any]:
    """n, the median and the p99 each with its distribution-free 95% interval (infinite on a
    side the sample cannot bound: a p99 needs 367 values for its upper end), the max and the mean."""
    n = int(xs.size)
    return {
        "n": n,
        "median": interval(quantile(xs, 0.5), quantile_ci(xs, 0.5)),
        "p99": interval(quantile(xs, 0.99), quantile_ci(xs, 0.99)),
        "max": float(xs.max()) if n else math.nan,
        "mean": float(xs.mean()) if n else math.nan,
    }
