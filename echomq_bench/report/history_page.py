"""The results history drawn: a PNG per metric (a panel per build, a line
per machine fingerprint, the fitted levels and each flagged step marked at
the revision it starts), and history.md / history.html around them."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
import pandas as pd  # noqa: E402

from echomq_bench.formatting import fmt_change  # noqa: E402
from echomq_bench.measurement.stepverdict import FAMILY_ALPHA, RUN_CORRELATION  # noqa: E402
from echomq_bench.records.fingerprint import FIELDS  # noqa: E402
from echomq_bench.report.doc import Doc, Heading, Image, Notes, Para, Table  # noqa: E402
from echomq_bench.report.history import (  # noqa: E402
    FlaggedStep, Series, flagged, inconclusive, step_line, verdict_text,
)

__all__ = ["draw_metric", "write_page", "METHOD"]

METHOD = ("One point per revision: the median of its runs. Lines: the fitted levels of asv's step detection (an L1 "
          "piecewise-constant fit whose penalty an information criterion chooses). A dashed line marks each step "
          f"called at the first revision of the new level: flagged by asv, and its {1 - FAMILY_ALPHA:.0%} interval "
          "(Bonferroni over the places a step could be, neighbouring runs allowed a lag-1 correlation of "
          f"{RUN_CORRELATION}) excludes no change; a dotted line, a step flagged but inconclusive.")
MAX_TICKS = 30
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _machines(frame: pd.DataFrame) -> dict[str, str]:
    """fingerprint id -> a short description of it."""
    out = {}
    for machine, rows in frame.groupby("fingerprint_id"):
        row = rows.iloc[-1]
        partial = " (recorded without CPU flags or allocator)" if pd.isna(row["cpu_flags_sha256"]) else ""
        cores = f"{int(row['cores'])}" if pd.notna(row["cores"]) else "?"
        out[str(machine)] = f"{row['cpu_model']}, {cores} cores{partial}"
    return out


def _positions(series: Sequence[Series]) -> dict[str, int]:
    """Every revision in these series, oldest first, at one x position each."""
    firsts: dict[str, str] = {}
    for s in series:
        for rev, first in zip(s.points["revision"], s.points["first_utc"]):
            firsts[rev] = min(first, firsts.get(rev, first))
    return {rev: i for i, rev in enumerate(sorted(firsts, key=lambda r: (firsts[r], r)))}


def _panel(ax: Axes, series: Sequence[Series], at: dict[str, int], machines: dict[str, str]) -> None:
    for n, s in enumerate(series):
        color = f"C{n % 10}"
        xs = [at[r] for r in s.points["revision"]]
        ax.plot(xs, s.points["value"], marker="o", ms=3.5, lw=0.8, color=color,
                label=f"{s.fingerprint_id}: {machines.get(s.fingerprint_id, '?')}")
        for seg in s.segments:
            ax.hlines(seg.level, xs[seg.start] - 0.4, xs[seg.end - 1] + 0.4, colors=color, lw=2, alpha=0.45)
        for step in (*s.steps, *s.undecided):
            x = at[step.revision] - 0.5
            ax.axvline(x, color=color, ls="--" if step.called else ":", lw=1)
            size = fmt_change(step.change, none="from 0")
            ax.annotate(f"{size} at {step.revision}{'' if step.called else '?'}", (x, step.after), xytext=(4, 4),
                        textcoords="offset points", fontsize=7, color=color)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def draw_metric(metric: str, series: Sequence[Series], frame: pd.DataFrame, out_dir: Path) -> Path:
    """One PNG for `metric`: a panel per build, a line per machine fingerprint."""
    builds = sorted({s.build for s in series})
    at = _positions(series)
    machines = _machines(frame)
    fig, axes = plt.subplots(len(builds), 1, figsize=(8, 2.8 * len(builds) + 0.6), sharex=True, squeeze=False)
    for ax, build in zip(axes[:, 0], builds):
        mine = [s for s in series if s.build == build]
        _panel(ax, mine, at, machines)
        ax.set_ylabel(f"{build} ({mine[0].unit})", fontsize=8)
    dates = {r: d for s in series for r, d in zip(s.points["revision"], s.points["first_utc"])}
    every = max(1, -(-len(at) // MAX_TICKS))
    ticks = [(i, f"{r} ({str(dates[r])[5:10]})") for r, i in at.items() if i % every == 0]
    axes[-1, 0].set_xticks([t for t, _ in ticks], [label for _, label in ticks], rotation=60, fontsize=6.5,
                           ha="right")
    better = series[0].better
    fig.suptitle(f"{metric}{f' ({better} is better)' if better else ''}", fontsize=10)
    # Below the tick labels, so the PNG carries its method when it travels alone.
    axes[-1, 0].set_xlabel("\n".join(textwrap.wrap(METHOD, 130)), fontsize=6.5, color="#555", loc="left")
    path = out_dir / f"history-{_UNSAFE.sub('-', metric)}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _machine_table(frame: pd.DataFrame) -> pd.DataFrame:
    cols = ["fingerprint_id", *FIELDS]
    table = frame.groupby(cols, dropna=False).agg(runs=("run_key", "nunique")).reset_index()
    return table.rename(columns={"fingerprint_id": "fingerprint"})


def _steps_table(steps: Sequence[FlaggedStep]) -> pd.DataFrame:
    return pd.DataFrame([{"metric": s.metric, "build": s.build, "fingerprint": s.fingerprint_id,
                          "starts at": s.revision, "date": s.date,
                          "change": fmt_change(s.change, none="from 0"),
                          "before": s.before, "after": s.after, "unit": s.unit, "which way": s.direction,
                          "revisions before": s.runs_before, "revisions after": s.runs_after,
                          "verdict": verdict_text(s)} for s in steps])


def write_page(frame: pd.DataFrame, series: Sequence[Series], charts: dict[str, Path], summary: str,
               out_dir: Path) -> tuple[Path, Path]:
    """history.md and a self-contained history.html in `out_dir`."""
    doc = Doc("echomq-bench results history")
    steps = flagged(series)
    doc.add(Heading("Steps called", anchor="steps"))
    if steps:
        doc.add(Table(_steps_table(steps), caption="Step changes, each at the first revision of its new level",
                      id="steps"))
        doc.add(Notes([step_line(s) for s in steps]))
    else:
        doc.add(Para(f"No step called in any of the {len(series)} series."))
    undecided = inconclusive(series)
    if undecided:
        doc.add(Heading("Flagged, inconclusive", anchor="inconclusive"),
                Table(_steps_table(undecided), caption="Steps asv flagged that the runs do not yet tell from runs "
                      "that drift together", id="inconclusive"))
    doc.add(Notes(summary.splitlines()[:2]))
    doc.add(Heading("Machine fingerprints", anchor="machines"), Table(_machine_table(frame), id="machines"))
    for metric, path in charts.items():
        doc.add(Heading(metric, level=3), Image(path, metric, alt=f"{metric} across revisions"))
    doc.add(Notes([METHOD]))
    md, page = out_dir / "history.md", out_dir / "history.html"
    md.write_text(doc.markdown(out_dir))
    page.write_text(doc.html())
    return md, page
