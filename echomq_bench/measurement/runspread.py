"""How far whole runs differ on this machine: the between-run component of a ratio.

A ratio measured in one run is the true ratio, plus what that run never
repeats (the machine's state during its minutes, the parent process, the
builds that shared the core), plus its trials' noise. Trials inside a run
estimate only the last part. Following Kalibera and Jones ("Rigorous
benchmarking in reasonable time", 2013), the interval must come from the
highest level that varies, and a run cannot repeat itself: the runs before
it on the same machine, of the same builds in the same company, do.

Each run leaves its mean log ratio and that mean's standard error in the
results history. The between-run variance tau^2 is the DerSimonian-Laird
estimate over those runs and this one (Cochran's Q against the weighted
mean, the excess over its k - 1 degrees of freedom), and the run's interval
is the mean +- t * sqrt(se^2 + tau^2), with the degrees of freedom of that
sum by Welch-Satterthwaite: few runs behind tau^2 make t large.

Below `MIN_RUNS` runs tau^2 cannot be estimated. The verdict then uses
`PRIOR_SD`, the largest between-run standard deviation this project measured
on its reference machine (docs/design/compare.md), and says it assumed it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from scipy import stats as st

__all__ = ["RunSpread", "estimate", "assumed", "combined", "t_quantile", "MIN_RUNS", "PRIOR_SD", "MEASURED", "ASSUMED"]

# Runs of a series (this one included) before tau^2 is estimated from them:
# Q on fewer than two degrees of freedom is mostly noise.
MIN_RUNS = 3
# Between-run SD of a log ratio assumed until then. On a 2-core AMD EPYC VM,
# ratios against Redis 7.0 moved by up to 2.2% from one run to the next
# (libc builds), a run effect of about 2.2% / sqrt(2) = 1.5%.
PRIOR_SD = 0.015
MEASURED, ASSUMED = "measured", "assumed"


@dataclass(frozen=True)
class RunSpread:
    """The between-run standard deviation of a log ratio, and where it came from."""

    sd: float                 # sqrt(tau^2), log scale (about a fraction of the ratio)
    runs: int                 # runs of the series it was estimated from, this one included
    df: float                 # its degrees of freedom: runs - 1, or inf when assumed
    source: str               # MEASURED or ASSUMED
    q: float | None = None    # Cochran's Q over the runs (MEASURED only)

    @property
    def text(self) -> str:
        """`between runs ±1.5% (assumed: 1 of 3 runs here)` or `between runs ±0.8% (5 runs here)`."""
        if self.source == ASSUMED:
            return f"between runs ±{self.sd:.1%} (assumed: {self.runs} of {MIN_RUNS} runs here)"
        if self.sd == 0.0:   # Q within its degrees of freedom: the runs agree as closely as their trials
            return f"between runs: none beyond the trials ({self.runs} runs here)"
        return f"between runs ±{self.sd:.1%} ({self.runs} runs here)"

    def to_dict(self) -> dict[str, object]:
        return {"sd": self.sd, "runs": self.runs, "df": None if math.isinf(self.df) else self.df,
                "source": self.source, "q": self.q, "text": self.text}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpread:
        """The spread `to_dict` wrote; its text is worded again from the figures."""
        df = d.get("df")
        return cls(float(d["sd"]), int(d["runs"]), math.inf if df is None else float(df), str(d["source"]),
                   None if d.get("q") is None else float(d["q"]))


def assumed(runs: int) -> RunSpread:
    """The prior, for a series with fewer than MIN_RUNS runs (`runs`, this one included)."""
    return RunSpread(PRIOR_SD, runs, math.inf, ASSUMED)


def estimate(runs: Sequence[tuple[float, float]]) -> RunSpread:
    """tau from (mean log ratio, its standard error) per run, this one included; the prior below MIN_RUNS."""
    usable = [(m, se) for m, se in runs if math.isfinite(m) and math.isfinite(se) and se > 0]
    k = len(usable)
    if k < MIN_RUNS:
        return assumed(k)
    weights = [1.0 / se ** 2 for _, se in usable]
    total = sum(weights)
    centre = sum(w * m for w, (m, _) in zip(weights, usable)) / total
    q = sum(w * (m - centre) ** 2 for w, (m, _) in zip(weights, usable))
    scale = total - sum(w * w for w in weights) / total
    tau2 = max(0.0, (q - (k - 1)) / scale)
    return RunSpread(math.sqrt(tau2), k, float(k - 1), MEASURED, q)


def combined(se: float, df: float, spread: RunSpread | None) -> tuple[float, float]:
    """The standard error of a run's mean log ratio with the between-run part added, and its
    Welch-Satterthwaite degrees of freedom; (se, df) unchanged without a spread."""
    if spread is None or spread.sd == 0.0:
        return se, df
    within, between = se ** 2, spread.sd ** 2
    total = within + between
    if math.isinf(spread.df):
        return math.sqrt(total), df * (total / within) ** 2 if within > 0 else math.inf
    denominator = (within ** 2 / df if df > 0 else 0.0) + between ** 2 / spread.df
    return math.sqrt(total), total ** 2 / denominator


def t_quantile(level: float, df: float) -> float:
    """The two-sided Student t quantile; the normal's at infinite df."""
    if math.isinf(df):
        return float(st.norm.ppf(1 - (1 - level) / 2))
    return float(st.t.ppf(1 - (1 - level) / 2, df))
