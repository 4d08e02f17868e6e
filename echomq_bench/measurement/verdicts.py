"""A verdict on paired trials: faster, slower, equivalent within a margin, or inconclusive.

Trial i of every build ran side by side (or back to back) on fresh servers,
so each trial gives one ratio other/baseline in which a slow minute of a
shared machine slows both sides. The figure is the geometric mean of those
ratios; its interval is Student's t-interval on their logarithms, which
holds for few trials where a bootstrap of the median cannot reach past the
smallest and largest ratio. Every verdict carries its n, its method and its
interval, and says how many trials were excluded before it was made.

The verdict, in this order:
- fewer than `MIN_TRIALS` trials: `inconclusive (n trials)`, whatever the
  ratios say, because a t-interval from so few logs is mostly its own width;
- `equivalent within ±margin` when two one-sided t-tests (TOST) both
  reject a difference as large as the margin at the level's alpha; that is,
  the (1 - 2 alpha) interval lies inside [1 - margin, 1 + margin]. A
  difference smaller than the declared margin is no difference worth a
  verdict, even when enough trials make it significant;
- `faster` or `slower` when the interval lies wholly beyond half the margin
  on one side of 1 (a minimum-effect test: with a 2% margin, the interval
  must exclude every ratio within 1%);
- otherwise `inconclusive`: the interval reaches into ±margin/2 and also
  past ±margin, so more trials are needed.

Why half the margin and not 1: A/A compares on the shared 2-core machine
this was built on showed a bias of up to 1.5% that holds for a whole
compare and changes between compares (2 of 17 A/A compares put the whole
interval on one side of 1, at 0.980 [0.962, 0.998] and 1.015 [1.009,
1.022]). The within-compare interval cannot see a bias that is fixed for
all its trials; the floor keeps it from becoming a verdict.

A gate's verdict on one verb against its stored baseline answers another
question by another rule: measurement.regression.

With a `RunSpread` (measurement.runspread), the interval is two-level: the
trials' standard error and the between-run standard deviation of this
machine's earlier runs of the same series, added in quadrature, with
Welch-Satterthwaite degrees of freedom. An interval that stays inconclusive
because the runs differ more than the trials do is `unstable`: more trials
would not decide it, and the text says how far runs differ.

`precision_reached` gives the stopping rule of an adaptive run: the
interval's half-width on the log scale is at most the precision asked for.
It looks at the trials alone, since more trials cannot shrink the part
between runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Mapping, Self, Sequence

import numpy as np
from scipy import stats as st

from echomq_bench.measurement.intervals import MIN_TRIALS, t_half_width
from echomq_bench.measurement.runspread import ASSUMED, RunSpread, combined, t_quantile
from echomq_bench.measurement.stats import LEVEL

__all__ = ["RatioVerdict", "judge", "precision_reached", "log_half_width", "METHOD", "MIN_TRIALS", "MARGIN", "LEVEL",
           "FASTER", "SLOWER", "EQUIVALENT", "INCONCLUSIVE", "UNSTABLE", "TWO_LEVEL_METHOD"]

METHOD = "t-interval on log ratios, TOST for equivalence"
TWO_LEVEL_METHOD = "t-interval on log ratios, trials within the run plus runs on this machine, TOST for equivalence"
MARGIN = 0.02
FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE = "faster", "slower", "equivalent", "inconclusive"
UNSTABLE = "unstable"


@dataclass(frozen=True, kw_only=True)
class RatioVerdict:
    """What the trials' ratios other/baseline say, with the interval and the tests behind it. `judge` fills
    every figure; one left None was not judged (a record's entry reads back what it held: a metric not
    judged holds only `said`, why)."""

    verdict: str | None = None          # FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE or UNSTABLE
    ratio: float | None = None          # geometric mean of other/baseline over the trials used; NaN: no trial
    ci: tuple[float, float] | None = None   # at `level`; None below two trials
    n: int | None = None                # trials used
    excluded: int | None = None         # trials left out before judging (for example not server-saturated)
    margin: float | None = None         # the equivalence margin, a fraction
    level: float | None = None
    higher_is_better: bool | None = None
    p_difference: float | None = None   # two-sided t-test of log ratio = 0
    p_equivalence: float | None = None  # TOST: the larger of the two one-sided p-values
    method: str | None = None
    spread: RunSpread | None = None     # the between-run part of the interval; None: this run's trials alone
    df: float | None = None             # the interval's degrees of freedom
    within_se: float | None = None      # the standard error of the mean log ratio from the trials alone
    # The verdict in the run's own words where it knows what the rule cannot (searches that never held,
    # rounds that failed), or why nothing was judged; None: the rule's words.
    said: str | None = None

    def __post_init__(self) -> None:
        if self.said is not None and self.said == self._rule_text():
            object.__setattr__(self, "said", None)   # the rule's words need no second copy

    def _rule_text(self) -> str:
        if self.verdict == EQUIVALENT and self.margin is not None:
            return f"equivalent within ±{self.margin:.0%}"
        if self.verdict == INCONCLUSIVE and (self.n or 0) < MIN_TRIALS:
            return f"inconclusive ({self.n or 0} trials)"
        if self.verdict == UNSTABLE and self.spread is not None:
            return f"unstable: runs on this machine differ by about {self.spread.sd:.1%}"
        return self.verdict or ""

    @property
    def text(self) -> str:
        """The verdict as a reader sees it: the margin on equivalence, n on an inconclusive one; empty when
        nothing was judged and nothing said."""
        return self.said if self.said is not None else self._rule_text()

    @property
    def judged(self) -> bool:
        """A ratio was measured (not NaN): the verdict has one to show."""
        return self.ratio is not None and self.ratio == self.ratio

    def label(self, digits: int = 3, *, brief: bool = False, min_trials: int = MIN_TRIALS, count: bool = True) -> str:
        """In full, `1.093 [95% CI 1.081, 1.106; t on log ratios, n=10, 1 excluded] faster`; brief, as a table
        cell, `0.919 [0.914, 0.924] n=14 faster`: no interval from fewer than `min_trials` trials, and no n
        without `count`. A verdict with no ratio to show says its text."""
        if self.ratio is None or (brief and not self.judged):
            return self.text or "no verdict"
        if brief:
            ci = self.ci if self.ci and (self.n or 0) >= min_trials else None
            interval = f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else ""
            return f"{self.ratio:.{digits}f}{interval}{f' n={self.n}' if count else ''} {self.text}"
        level = "" if self.level is None else f"{self.level:.0%} "   # a record may lack what it never used
        ci_text = "no interval" if self.ci is None else f"{level}CI {self.ci[0]:.{digits}f}, {self.ci[1]:.{digits}f}"
        excluded = f", {self.excluded} excluded" if self.excluded else ""
        between = f", {self.spread.text}" if self.spread is not None else ""
        n = "?" if self.n is None else self.n
        return f"{self.ratio:.{digits}f} [{ci_text}; t on log ratios, n={n}{excluded}{between}] {self.text}"

    def to_dict(self) -> dict[str, Any]:
        """The verdict as a record holds it: every figure it has, in field order, and its text."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or f.name == "said":
                continue
            out[f.name] = (list(value) if f.name == "ci" else value.to_dict() if f.name == "spread" else value)
        if self.text:
            out["text"] = self.text
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """The verdict `to_dict` wrote (any key it lacks left unjudged); its text is kept where it says more
        than the rule."""
        names = {f.name for f in fields(cls)} - {"said", "ci", "spread"}
        ci, spread = d.get("ci"), d.get("spread")
        return cls(**{k: v for k, v in d.items() if k in names},
                   ci=(float(ci[0]), float(ci[1])) if ci else None,
                   spread=RunSpread.from_dict(spread) if isinstance(spread, Mapping) else None,
                   said=d.get("text") or None)


def _logs(ratios: Sequence[float]) -> np.ndarray:
    values = np.asarray(ratios, dtype=float)
    if values.ndim != 1 or np.any(~np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"ratios must be positive and finite, one per trial; got {list(ratios)}")
    logs: np.ndarray = np.log(values)
    return logs


def log_half_width(ratios: Sequence[float], level: float = LEVEL) -> float:
    """Half the width of the t-interval of the mean log ratio (inf below two trials)."""
    return t_half_width(_logs(ratios), level)


def precision_reached(ratios: Sequence[float], precision: float, level: float = LEVEL,
                      min_trials: int = MIN_TRIALS) -> bool:
    """An adaptive run may stop: enough trials, and the interval is within ±precision on the log scale."""
    return len(ratios) >= min_trials and log_half_width(ratios, level) <= math.log1p(precision)


def judge(ratios: Sequence[float], *, higher_is_better: bool, margin: float = MARGIN, level: float = LEVEL,
          min_trials: int = MIN_TRIALS, excluded: int = 0, spread: RunSpread | None = None) -> RatioVerdict:
    """The verdict on one ratio other/baseline per trial; see the module's rule. With `spread`, the
    interval adds the between-run part. No trial to judge is inconclusive, with no ratio."""
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    if not 0 < margin < 1:
        raise ValueError(f"margin must be a fraction between 0 and 1, got {margin}")
    logs = _logs(ratios)
    n = len(logs)
    method = METHOD if spread is None else TWO_LEVEL_METHOD
    if n < 2:
        return RatioVerdict(verdict=INCONCLUSIVE, ratio=math.exp(float(logs[0])) if n else math.nan, ci=None, n=n,
                            excluded=excluded, margin=margin, level=level, higher_is_better=higher_is_better,
                            p_difference=None, p_equivalence=None, method=method, spread=spread)
    mean = float(np.mean(logs))
    within = float(np.std(logs, ddof=1)) / math.sqrt(n)
    se, df = combined(within, n - 1, spread)
    half = t_quantile(level, df) * se
    ci = (math.exp(mean - half), math.exp(mean + half))
    p_diff, p_equiv = _p_values(mean, se, df, margin)
    kind = INCONCLUSIVE
    if n < min_trials:
        kind = INCONCLUSIVE
    elif p_equiv < 1 - level:
        kind = EQUIVALENT
    elif ci[0] > 1.0 + margin / 2 or ci[1] < 1.0 - margin / 2:
        kind = FASTER if (ci[0] > 1.0) == higher_is_better else SLOWER
    elif spread is not None and spread.source != ASSUMED and spread.sd > within:
        # More trials would not decide it: the runs, not the trials, make the interval wide.
        kind = UNSTABLE
    return RatioVerdict(verdict=kind, ratio=math.exp(mean), ci=ci, n=n, excluded=excluded, margin=margin, level=level,
                        higher_is_better=higher_is_better, p_difference=p_diff, p_equivalence=p_equiv,
                        method=method, spread=spread, df=df, within_se=within)


def _p_values(mean: float, se: float, df: float, margin: float) -> tuple[float, float]:
    """Two-sided p of no difference, and TOST's p against the bounds log(1 - margin), log(1 + margin)."""
    lower, upper = math.log1p(-margin), math.log1p(margin)
    if se == 0.0:  # identical trials: the mean is known exactly
        return (1.0 if mean == 0.0 else 0.0), (0.0 if lower < mean < upper else 1.0)
    dist = st.norm if math.isinf(df) else st.t(df)
    p_diff = float(2 * dist.sf(abs(mean) / se))
    p_equiv = max(float(dist.sf((mean - lower) / se)), float(dist.cdf((mean - upper) / se)))
    return p_diff, p_equiv
