"""The results history read back: each figure followed across revisions,
one series per metric, build and machine fingerprint, and the step changes
in it: flagged by asv's detection (echomq_bench.measurement.steps), then
called or left inconclusive by a test that allows for neighbouring runs
being correlated (echomq_bench.measurement.stepverdict).

A series has one point per revision: the median of the runs made at it,
placed at its first run's date. Points are never pooled across machine
fingerprints: a figure from another CPU, core count, server version or
allocator is another line, not a step. Runs at one revision ran close
together and share the machine's state: they make one point, not several.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from echomq_bench.formatting import fmt_change
from echomq_bench.measurement.steps import DEFAULT_THRESHOLD, Segment
from echomq_bench.measurement.stepverdict import FAMILY_ALPHA, RUN_CORRELATION, StepVerdict, judge_steps
from echomq_bench.records.history import HistoryError

__all__ = ["Series", "FlaggedStep", "select", "all_series", "flagged", "inconclusive", "step_line", "verdict_text",
           "summary_text", "DEFAULT_THRESHOLD", "METHOD_LINE"]

METHOD_LINE = (f"steps flagged by asv's step detection over the threshold and the runs' spread, then called when "
               f"their {1 - FAMILY_ALPHA:.0%} interval (Bonferroni over the places a step could be) excludes no "
               f"change, with neighbouring runs allowed a lag-1 correlation of {RUN_CORRELATION}; the unit is one "
               f"run, a revision's runs one point")


@dataclass(frozen=True)
class FlaggedStep:
    metric: str
    build: str
    fingerprint_id: str
    revision: str        # the first revision at the new level
    date: str            # its first run's date (UTC)
    before: float
    after: float
    unit: str
    better: str          # "lower", "higher" or ""
    runs_after: int      # revisions at the new level so far
    runs_before: int     # revisions at the level before
    low: float           # the simultaneous interval of after - before
    high: float
    called: bool         # the interval excludes no change; else inconclusive
    more_runs: int | None = None   # inconclusive: revisions at the new level that would decide it

    @property
    def change(self) -> float | None:
        return self.after / self.before - 1 if self.before else None

    @property
    def direction(self) -> str:
        """worse, better, or '' for a figure neither way of which is better."""
        if not self.better:
            return ""
        up = self.after > self.before
        return "better" if up == (self.better == "higher") else "worse"


@dataclass(frozen=True)
class Series:
    metric: str
    build: str
    fingerprint_id: str
    unit: str
    better: str
    points: pd.DataFrame          # revision, first_utc, value (median of its runs), runs; oldest first
    segments: list[Segment]
    steps: list[FlaggedStep]      # called
    undecided: list[FlaggedStep]  # flagged by asv, not told from correlated runs: inconclusive


def _matching(wanted: Sequence[str], have: Sequence[str], what: str, path: Path | None) -> list[str]:
    """The names `wanted` picks (names, or shell-style patterns such as gate.claim.*); an unknown one is refused."""
    picked: list[str] = []
    for name in wanted:
        hits = [h for h in have if fnmatch.fnmatchcase(h, name)]
        if not hits:
            raise HistoryError(f"unknown {what} {name!r}: the results history{f' at {path}' if path else ''} holds "
                               f"{what}s {', '.join(sorted(have))}")
        picked += [h for h in hits if h not in picked]
    return picked


def select(frame: pd.DataFrame, kinds: Sequence[str] = (), metrics: Sequence[str] = (),
           builds: Sequence[str] = (), path: Path | None = None) -> pd.DataFrame:
    """The rows of these kinds, metrics and builds (each empty: all); a name
    the history does not hold is refused with the names it does."""
    out = frame
    for column, wanted, what in (("kind", kinds, "kind"), ("metric", metrics, "metric"),
                                 ("build", builds, "build")):
        if wanted:
            out = out[out[column].isin(_matching(wanted, sorted(set(out[column])), what, path))]
    return out


def _points(rows: pd.DataFrame) -> pd.DataFrame:
    per = rows.groupby("revision", sort=False).agg(first_utc=("created_utc", "min"), value=("value", "median"),
                                                   runs=("value", "size"))
    return per.reset_index().sort_values(["first_utc", "revision"], kind="stable").reset_index(drop=True)


def _flagged(key: tuple[str, str, str], points: pd.DataFrame, v: StepVerdict, unit: str,
             better: str) -> FlaggedStep:
    metric, build, machine = key
    return FlaggedStep(metric, build, machine, str(points["revision"].iloc[v.index]),
                       str(points["first_utc"].iloc[v.index])[:10], v.before, v.after, unit, better, v.runs_after,
                       v.runs_before, v.low, v.high, v.called, v.more_runs)


def _series(key: tuple[str, str, str], rows: pd.DataFrame, threshold: float) -> Series:
    points = _points(rows)
    unit, better = str(rows["unit"].iloc[-1]), str(rows["better"].iloc[-1] or "")
    segments, verdicts = judge_steps(points["value"].tolist(), threshold)
    steps = [_flagged(key, points, v, unit, better) for v in verdicts]
    return Series(*key, unit, better, points, segments, [s for s in steps if s.called],
                  [s for s in steps if not s.called])


def all_series(frame: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD) -> list[Series]:
    """Every metric, build and fingerprint in `frame`, fitted and its steps judged."""
    rows = frame.dropna(subset=["value"])
    return [_series((str(k[0]), str(k[1]), str(k[2])), group, threshold)
            for k, group in rows.groupby(["metric", "build", "fingerprint_id"], sort=True)]


def flagged(series: Sequence[Series]) -> list[FlaggedStep]:
    """The steps called."""
    return [step for s in series for step in s.steps]


def inconclusive(series: Sequence[Series]) -> list[FlaggedStep]:
    """The steps asv flagged that the runs do not yet tell from correlated noise."""
    return [step for s in series for step in s.undecided]


def _level(x: float) -> str:
    return f"{x:,.4g}"


def _interval(step: FlaggedStep) -> str:
    if step.before:
        return f"{step.low / step.before * 100:+.1f}% to {step.high / step.before * 100:+.1f}%"
    return f"{_level(step.low)} to {_level(step.high)} {step.unit}"


def verdict_text(step: FlaggedStep) -> str:
    """n, method and interval: `95% interval +9.0% to +18.8%, 8 revisions before, 8 after`."""
    n = f"{step.runs_before} revisions before, {step.runs_after} after"
    if step.called:
        return f"{1 - FAMILY_ALPHA:.0%} interval {_interval(step)}, {n}"
    if step.low == -float("inf"):
        return f"inconclusive: too few revisions to judge ({n})"
    decide = (f"about {step.more_runs} more revision(s) at this level would decide it" if step.more_runs else
              "more revisions on either side would decide it")
    return f"inconclusive: {1 - FAMILY_ALPHA:.0%} interval {_interval(step)} includes zero ({n}); {decide}"


def step_line(step: FlaggedStep) -> str:
    """One flagged step, as the text summary and the page say it."""
    size = fmt_change(step.change, none="from 0")
    way = f" ({step.direction}: {step.better} is better)" if step.direction else ""
    alone = (" (one revision after it so far: the next run confirms or undoes it)"
             if step.runs_after == 1 and step.called else "")
    return (f"{step.metric}  {step.build}  fingerprint {step.fingerprint_id}  at {step.revision} ({step.date})  "
            f"{size}  {_level(step.before)} -> {_level(step.after)} {step.unit}{way}{alone}  [{verdict_text(step)}]")


def summary_text(frame: pd.DataFrame, series: Sequence[Series], threshold: float, where: Path) -> str:
    steps, undecided = flagged(series), inconclusive(series)
    lines = [f"history: {where}: {frame['run_key'].nunique()} runs, {frame['revision'].nunique()} revisions, "
             f"{len(frame)} figures, {frame['fingerprint_id'].nunique()} machine fingerprint(s)",
             f"series: {len(series)} (metric x build x fingerprint); {METHOD_LINE}; threshold {threshold:.0%}"]
    if steps:
        lines.append(f"steps called: {len(steps)}")
        lines += [f"  {step_line(s)}" for s in steps]
    if undecided:
        lines.append(f"flagged, not yet told from runs that drift together: {len(undecided)}")
        lines += [f"  {step_line(s)}" for s in undecided]
    quiet = sum(1 for s in series if not s.steps)
    lines.append(f"no step called in {quiet} of the {len(series)} series")
    return "\n".join(lines)
