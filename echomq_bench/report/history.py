"""The results history read back: each figure followed across revisions,
one series per metric, build and machine fingerprint, and the step changes
flagged in it (echomq_bench.measurement.steps).

A series has one point per revision: the median of the runs made at it,
placed at its first run's date. Points are never pooled across machine
fingerprints: a figure from another CPU, core count, server version or
allocator is another line, not a step.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from echomq_bench.measurement.steps import DEFAULT_THRESHOLD, Segment, fit_segments, flag_steps
from echomq_bench.records.history import HistoryError

__all__ = ["Series", "FlaggedStep", "select", "all_series", "flagged", "summary_text", "DEFAULT_THRESHOLD"]


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
    steps: list[FlaggedStep]


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


def _series(key: tuple[str, str, str], rows: pd.DataFrame, threshold: float) -> Series:
    metric, build, machine = key
    points = _points(rows)
    unit, better = str(rows["unit"].iloc[-1]), str(rows["better"].iloc[-1] or "")
    segments = fit_segments(points["value"].tolist())
    steps = [FlaggedStep(metric, build, machine, str(points["revision"].iloc[s.index]),
                         str(points["first_utc"].iloc[s.index])[:10], s.before, s.after, unit, better,
                         next(seg.size for seg in segments if seg.start == s.index))
             for s in flag_steps(segments, threshold)]
    return Series(metric, build, machine, unit, better, points, segments, steps)


def all_series(frame: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD) -> list[Series]:
    """Every metric, build and fingerprint in `frame`, fitted and its steps flagged."""
    rows = frame.dropna(subset=["value"])
    return [_series((str(k[0]), str(k[1]), str(k[2])), group, threshold)
            for k, group in rows.groupby(["metric", "build", "fingerprint_id"], sort=True)]


def flagged(series: Sequence[Series]) -> list[FlaggedStep]:
    return [step for s in series for step in s.steps]


def _level(x: float) -> str:
    return f"{x:,.4g}"


def step_line(step: FlaggedStep) -> str:
    """One flagged step, as the text summary and the page say it."""
    size = f"{step.change * 100:+.1f}%" if step.change is not None else "from 0"
    way = f" ({step.direction}: {step.better} is better)" if step.direction else ""
    alone = " (one revision after it so far: the next run confirms or undoes it)" if step.runs_after == 1 else ""
    return (f"{step.metric}  {step.build}  fingerprint {step.fingerprint_id}  at {step.revision} ({step.date})  "
            f"{size}  {_level(step.before)} -> {_level(step.after)} {step.unit}{way}{alone}")


def summary_text(frame: pd.DataFrame, series: Sequence[Series], threshold: float, where: Path) -> str:
    steps = flagged(series)
    lines = [f"history: {where}: {frame['run_key'].nunique()} runs, {frame['revision'].nunique()} revisions, "
             f"{len(frame)} figures, {frame['fingerprint_id'].nunique()} machine fingerprint(s)",
             f"series: {len(series)} (metric x build x fingerprint); steps by asv's step detection, flagged over "
             f"{threshold:.0%} and the runs' spread"]
    if steps:
        lines.append(f"flagged steps: {len(steps)}")
        lines += [f"  {step_line(s)}" for s in steps]
    quiet = sum(1 for s in series if not s.steps)
    lines.append(f"no step flagged in {quiet} of the {len(series)} series")
    return "\n".join(lines)
