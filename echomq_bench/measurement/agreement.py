"""Do several estimates of one ratio agree? The same pair of builds compared
in different ways (compare's interleave modes) gives one ratio with its
interval per way; they agree when every pair of intervals overlaps.

For intervals on a line, every pair overlapping is the same as all of them
sharing a point, so "all intervals overlap" and "no two are apart" are one
test. Two intervals that touch at an end overlap.

Two intervals that are apart are a disagreement however few trials made
them. The converse does not hold: an interval from fewer trials than a
verdict needs (`MIN_TRIALS`) is so wide that overlapping it says little, and
a mode with no interval at all (fewer than two counted trials) says nothing,
so with such a mode and no pair apart the agreement is undecided.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Sequence

from echomq_bench.measurement.verdicts import LEVEL, MIN_TRIALS, RatioVerdict

__all__ = ["ModeEstimate", "Agreement", "agreement", "overlaps", "estimate_of", "rows", "text_table", "AGREE",
           "DISAGREE", "UNDECIDED"]

AGREE, DISAGREE, UNDECIDED = "agree", "disagree", "undecided"


@dataclass(frozen=True)
class ModeEstimate:
    """One way of comparing's estimate of the ratio: what a verdict carries, under the mode's name."""

    mode: str
    ratio: float
    ci: tuple[float, float] | None  # None below two counted trials
    n: int                          # counted trials
    excluded: int                   # trials left out before the estimate
    method: str
    verdict: str                    # the verdict as a reader sees it

    def __post_init__(self) -> None:
        if self.ci is not None and not self.ci[0] <= self.ci[1]:
            raise ValueError(f"{self.mode}: interval {self.ci} has its lower end above its upper end")


@dataclass(frozen=True)
class Agreement:
    status: str                            # AGREE, DISAGREE or UNDECIDED
    apart: tuple[tuple[str, str], ...]     # the pairs of modes whose intervals do not overlap
    short: tuple[str, ...]                 # the modes with too few counted trials to test agreement
    line: str                              # the finding as one sentence


def estimate_of(mode: str, verdict: RatioVerdict) -> ModeEstimate:
    """A mode's estimate from its verdict; a verdict with no ratio has none to give."""
    if verdict.ratio is None:
        raise ValueError(f"{mode}: a verdict without a ratio has no estimate")
    ci = verdict.ci
    return ModeEstimate(mode, float(verdict.ratio), (float(ci[0]), float(ci[1])) if ci else None,
                        int(verdict.n or 0), int(verdict.excluded or 0), str(verdict.method), verdict.text)


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _shortfall(e: ModeEstimate) -> str:
    if e.ci is None:
        return f"{e.mode} has no interval ({e.n} counted trial{'' if e.n == 1 else 's'})"
    return f"{e.mode} has {e.n} counted trials"


def agreement(estimates: Sequence[ModeEstimate], *, min_trials: int = MIN_TRIALS,
              level: float = LEVEL) -> Agreement:
    """Whether the modes' intervals all overlap: agree, disagree (naming the
    pairs apart) or undecided (naming the modes too short to tell)."""
    names = [e.mode for e in estimates]
    if len(estimates) < 2:
        raise ValueError(f"agreement needs at least two modes, got {len(estimates)}: {names}")
    if len(set(names)) != len(names):
        raise ValueError(f"agreement needs a distinct name per mode, got {names}")
    apart = tuple((a.mode, b.mode) for a, b in itertools.combinations(estimates, 2)
                  if a.ci is not None and b.ci is not None and not overlaps(a.ci, b.ci))
    short = tuple(e.mode for e in estimates if e.ci is None or e.n < min_trials)
    pct = f"{level:.0%}"
    if apart:
        pairs = [f"of {a} and {b}" for a, b in apart]
        which = pairs[0] if len(pairs) == 1 else ", ".join(pairs[:-1]) + f", and {pairs[-1]},"
        return Agreement(DISAGREE, apart, short, f"The modes disagree: the {pct} intervals {which} do not overlap.")
    if short:
        reasons = [_shortfall(e) for e in estimates if e.mode in short]
        why = reasons[0] if len(reasons) == 1 else ", ".join(reasons[:-1]) + " and " + reasons[-1]
        return Agreement(UNDECIDED, apart, short,
                         f"Agreement undecided: no two {pct} intervals are apart, but {why}; a mode needs at least "
                         f"{min_trials} counted trials to test agreement.")
    return Agreement(AGREE, apart, short,
                     f"The modes agree: every pair of {pct} intervals overlaps ({', '.join(names)}).")


def rows(estimates: Sequence[ModeEstimate], *, level: float = LEVEL, digits: int = 3) -> list[dict[str, Any]]:
    """A row per mode, figures as text at `digits` decimals (the way verdict labels print them)."""
    out = []
    for e in estimates:
        ci = "no interval" if e.ci is None else f"{e.ci[0]:.{digits}f}, {e.ci[1]:.{digits}f}"
        out.append({"mode": e.mode, "n trials": e.n,
                    "ratio": f"{e.ratio:.{digits}f}" if math.isfinite(e.ratio) else "none",
                    f"{level:.0%} CI": ci, "method": e.method, "excluded trials": e.excluded,
                    "verdict": e.verdict})
    return out


def text_table(estimates: Sequence[ModeEstimate], *, level: float = LEVEL) -> str:
    """The rows and the agreement line as fixed-width text."""
    table = rows(estimates, level=level)
    cols = list(table[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in table)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in cols) for r in table]
    return "\n".join([*(line.rstrip() for line in lines), agreement(estimates, level=level).line])
