"""The report's charts, drawn from tidy tables (matplotlib, Agg, PNG).

Each function takes DataFrames as the runners wrote them and a path, and
returns the path; none of them measures anything.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from echomq_bench.measurement import latency  # noqa: E402
from echomq_bench.measurement.stats import median

__all__ = ["throughput_vs_consumers", "latency_quantiles", "read_hgrm", "rate_timeline", "forest", "lease_tradeoff",
           "reap_against_cap", "consumers_growth", "instruction_parts", "MAX_LINES"]

QUANTILE_TICKS = (50.0, 90.0, 99.0, 99.9, 99.99)


def _save(fig: Figure, path: Path, footer: str) -> Path:
    if footer:
        # Below the axes, so the PNG carries its context when it travels alone.
        text = "\n".join(textwrap.wrap(footer, 170))
        fig.text(0.0, -0.02, text, fontsize=6.5, color="#555", ha="left", va="top")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def throughput_vs_consumers(frame: pd.DataFrame, path: Path, footer: str = "") -> Path:
    """frame: build, consumers, cycles_per_s (one row per point; trials averaged by median)."""
    _few(list(dict.fromkeys(frame["build"])), "builds")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for build, rows in frame.groupby("build", sort=False):
        pts = rows.groupby("consumers")["cycles_per_s"].agg(median).sort_index()
        ax.plot(pts.index, pts.values, marker="o", label=str(build))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("consumers (connections, one claim in flight each)")
    ax.set_ylabel("claim+complete cycles/s")
    ax.set_title("Throughput against consumers")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, path, footer)


def rate_timeline(frame: pd.DataFrame, path: Path, footer: str = "", *, by: str = "build",
                  ylabel: str = "claim+complete cycles/s", title: str = "Rate over the window",
                  xlabel: str = "seconds since the window opened") -> Path:
    """frame: `by` (a build, or a Locust request name), t_s, value (a rate per bin); one line
    per `by`, so a burst of interference shows as a dip in one bin, not in the headline."""
    _few(list(dict.fromkeys(frame[by])), f"{by}s")
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for label, rows in frame.groupby(by, sort=False):
        pts = rows.groupby("t_s")["value"].agg(median).sort_index()
        ax.plot(pts.index, pts.values, marker=".", label=str(label))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, path, footer)


def read_hgrm(path: Path) -> pd.DataFrame:
    """The percentile table of an .hgrm file: value (ms) against percentile."""
    return pd.DataFrame([row[:2] for row in latency.read_hgrm(path)], columns=["value_ms", "percentile"])


def latency_quantiles(curves: Mapping[str, pd.DataFrame], path: Path, footer: str = "") -> Path:
    """Latency against percentile on the log-inverse quantile axis
    (x = 1/(1-q)), as the OpenMessaging Benchmark draws it: the tail gets
    the room it deserves."""
    _few(list(curves), "curves")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, curve in curves.items():
        c = curve[curve["percentile"] < 0.99999]
        ax.plot(1.0 / (1.0 - c["percentile"]), c["value_ms"], label=label)
    ax.set_xscale("log")
    ax.set_xticks([1 / (1 - q / 100) for q in QUANTILE_TICKS])
    ax.set_xticklabels([f"p{q:g}" for q in QUANTILE_TICKS])
    ax.set_ylabel("latency, ms")
    ax.set_title("Latency by percentile")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _save(fig, path, footer)


# --------------------------------------------------------------------------
# The first screen: one chart per answer, each small enough for a quarter of
# a 1400 x 900 screen and at most six lines (more become panels, not legend)

ANSWER_SIZE = (6.4, 2.5)
MAX_LINES = 6
VERDICT_COLOURS = {"faster": "#1a7f37", "slower": "#c62828", "equivalent": "#1565c0"}


def _few(labels: list[str], what: str) -> None:
    if len(labels) > MAX_LINES:
        raise ValueError(f"{len(labels)} {what} in one chart; at most {MAX_LINES}: split it into panels")


def forest(frame: pd.DataFrame, baseline: str, margin: float, path: Path) -> Path:
    """frame: label, ratio, lo, hi, verdict; one row per build against the baseline,
    each with its 95% interval, over the equivalence band."""
    _few(list(frame["label"]), "builds")
    fig, ax = plt.subplots(figsize=ANSWER_SIZE)
    y = np.arange(len(frame))[::-1]
    ax.axvspan(1 - margin, 1 + margin, color="#1565c0", alpha=0.12, label=f"equivalent within ±{margin:.0%}")
    ax.axvline(1.0, color="#888", linestyle=":", linewidth=1)
    for yi, row in zip(y, frame.itertuples(index=False)):
        colour = VERDICT_COLOURS.get(str(row.verdict), "#555")
        ax.errorbar([row.ratio], [yi], xerr=[[row.ratio - row.lo], [row.hi - row.ratio]], fmt="o", color=colour,
                    capsize=4, markersize=5)
        ax.annotate(f"{row.ratio:.2f}x {row.verdict}", (row.hi, yi), xytext=(6, 0), textcoords="offset points",
                    va="center", fontsize=8, color=colour)
    ax.set_yticks(y)
    ax.set_yticklabels(list(frame["label"]), fontsize=8)
    lo = min(float(frame["lo"].min()), 1 - margin)
    hi = max(float(frame["hi"].max()), 1 + margin)
    pad = (hi - lo) * 0.12
    ax.set_xlim(lo - pad, hi + pad * 2.6)
    ax.set_ylim(-0.6, len(frame) - 0.4)
    ax.set_xlabel(f"server time per cycle, ratio to {baseline} (95% CI)", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return _save(fig, path, "")


def lease_tradeoff(frame: pd.DataFrame, chosen_ms: float | None, budget: float, tolerance_ms: float,
                   path: Path) -> Path:
    """frame: lease_ms, false_expiry, fe_lo, fe_hi, overran_hi, recovery_p99_ms (one row per lease).
    Left: false expiry with its interval and the overrun's upper bound against the budget; right:
    p99 recovery against the tolerance; the chosen lease marked on both."""
    floor = budget / 100   # a rate of 0 has no place on a log axis: drawn on the floor, hollow
    fig, (left, right) = plt.subplots(1, 2, figsize=ANSWER_SIZE)
    x = frame["lease_ms"] / 1000
    fe = frame["false_expiry"].clip(lower=floor)
    left.errorbar(x, fe, yerr=[fe - frame["fe_lo"].clip(lower=floor), frame["fe_hi"].clip(lower=floor) - fe],
                  fmt="o-", color="#555", capsize=3, markersize=4, label="ran twice (95% CI)")
    left.plot(x, frame["overran_hi"].clip(lower=floor), "v--", color="#c62828", markersize=4,
              label="outlived it, 95% upper bound")
    left.axhline(budget, color="#1a7f37", linewidth=1, label=f"budget {budget:.1%}")
    left.set_yscale("log")
    left.set_ylabel("share of executions", fontsize=8)
    right.plot(x, frame["recovery_p99_ms"] / 1000, "o-", color="#555", markersize=4, label="crash to re-claim, p99")
    right.axhline(tolerance_ms / 1000, color="#1a7f37", linewidth=1, label=f"tolerance {tolerance_ms / 1000:g} s")
    right.set_ylabel("seconds", fontsize=8)
    for ax in (left, right):
        if chosen_ms is not None:
            ax.axvline(chosen_ms / 1000, color="#1565c0", linestyle=":", linewidth=1.5,
                       label=f"chosen {chosen_ms / 1000:g} s")
        ax.set_xlabel("lease, s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=6.5, loc="best")
    fig.tight_layout()
    return _save(fig, path, "")


def reap_against_cap(blocking: pd.DataFrame, drain: pd.DataFrame, cap: int, path: Path) -> Path:
    """blocking: build, cap, ms (one full call at the largest M); drain: build, cap, s (a mass
    crash at the reaper's interval). One line per build in each panel, the product cap marked."""
    _few(sorted(set(blocking["build"])), "builds")
    fig, (left, right) = plt.subplots(1, 2, figsize=ANSWER_SIZE)
    for ax, frame, column, label in ((left, blocking, "ms", "server ms one call blocks"),
                                     (right, drain, "s", "seconds to drain the crash")):
        for build, rows in frame.groupby("build", sort=False):
            rows = rows.sort_values("cap")
            ax.plot(rows["cap"], rows[column], marker="o", markersize=3.5, label=str(build))
        ax.axvline(cap, color="#c62828", linestyle=":", linewidth=1.5, label=f"cap {cap}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("cap, jobs per reap call", fontsize=8)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3, which="both")
    left.legend(fontsize=6.5)
    fig.tight_layout()
    return _save(fig, path, "")


def consumers_growth(frame: pd.DataFrame, path: Path) -> Path:
    """frame: build, consumers, cycles_per_s, bound; a line per build, a filled
    marker where the server was the bound and a hollow one where the client was."""
    _few(sorted(set(frame["build"])), "builds")
    fig, ax = plt.subplots(figsize=ANSWER_SIZE)
    for build, rows in frame.groupby("build", sort=False):
        rows = rows.sort_values("consumers")
        line, = ax.plot(rows["consumers"], rows["cycles_per_s"], marker="", label=str(build))
        for r in rows.itertuples(index=False):
            ax.plot([r.consumers], [r.cycles_per_s], "o", markersize=5, color=line.get_color(),
                    markerfacecolor=line.get_color() if r.bound == "server" else "white")
    ax.set_xscale("log", base=2)
    ticks = sorted(set(frame["consumers"]))
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(int(t)) for t in ticks])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("consumers (one claim or complete in flight each); filled: server-bound, hollow: not",
                  fontsize=7.5)
    ax.set_ylabel("cycles/s", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path, "")


def instruction_parts(frame: pd.DataFrame, path: Path, footer: str = "") -> Path:
    """frame: build, verb, part, instructions (per call). One panel per build: a stacked bar per verb, one
    segment per server command the script called and one for the Lua rest, so a reader sees where a
    script's cost goes. The pumps moving 100 jobs are drawn per job moved, beside the single-job verbs."""
    frame = frame.copy()
    per_job = frame["verb"].str.endswith("_100")
    frame.loc[per_job, "instructions"] = frame.loc[per_job, "instructions"] / 100
    frame.loc[per_job, "verb"] = frame.loc[per_job, "verb"] + " / job"
    builds = list(dict.fromkeys(frame["build"]))
    parts = list(frame.groupby("part")["instructions"].sum().sort_values(ascending=False).index)
    colours = dict(zip(parts, plt.get_cmap("tab20")(np.linspace(0, 1, max(len(parts), 2)))))
    fig, axes = plt.subplots(1, len(builds), figsize=(5.5 * len(builds), 4.2), squeeze=False, sharey=True)
    for ax, build in zip(axes[0], builds):
        table = frame[frame["build"] == build].pivot_table(index="verb", columns="part", values="instructions",
                                                           aggfunc="sum", sort=False).fillna(0.0)
        bottom = np.zeros(len(table))
        for part in [p for p in parts if p in table.columns]:
            ax.barh(table.index, table[part], left=bottom, color=colours[part], label=part)
            bottom += table[part].to_numpy()
        ax.set_title(build)
        ax.set_xlabel("instructions per call (callgrind)")
    axes[0][0].invert_yaxis()  # the axes share y: once turns every panel so the first verb is on top
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title="part")
    fig.tight_layout()
    return _save(fig, path, footer)
