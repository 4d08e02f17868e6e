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

__all__ = ["throughput_vs_consumers", "latency_quantiles", "ratio_cis", "reap_curves", "read_hgrm", "rate_timeline"]

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
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for build, rows in frame.groupby("build", sort=False):
        pts = rows.groupby("consumers")["cycles_per_s"].median().sort_index()
        ax.plot(pts.index, pts.values, marker="o", label=str(build))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("consumers (connections, one claim in flight each)")
    ax.set_ylabel("claim+complete cycles/s")
    ax.set_title("Throughput against consumers")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, path, footer)


def rate_timeline(frame: pd.DataFrame, path: Path, footer: str = "") -> Path:
    """frame: build, t_s, value (cycles/s per bin); one line per build, so a
    burst of interference shows as a dip in one bin, not in the headline."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for build, rows in frame.groupby("build", sort=False):
        pts = rows.groupby("t_s")["value"].median().sort_index()
        ax.plot(pts.index, pts.values, marker=".", label=str(build))
    ax.set_xlabel("seconds since the window opened")
    ax.set_ylabel("claim+complete cycles/s")
    ax.set_title("Rate over the window")
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


def ratio_cis(frame: pd.DataFrame, baseline: str, path: Path, footer: str = "") -> Path:
    """frame: build, metric, ratio, lo, hi, verdict; one error bar per build and metric."""
    metrics = list(dict.fromkeys(frame["metric"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 2.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        rows = frame[frame["metric"] == metric].reset_index(drop=True)
        y = np.arange(len(rows))
        err = np.array([rows["ratio"] - rows["lo"], rows["hi"] - rows["ratio"]])
        ax.errorbar(rows["ratio"], y, xerr=err, fmt="o", capsize=4)
        ax.axvline(1.0, color="#888", linestyle="--")
        ax.set_yticks(y)
        ax.set_yticklabels([f"{b}\n{v}" for b, v in zip(rows["build"], rows["verdict"])], fontsize=8)
        ax.set_title(f"{metric}\nratio to {baseline}", fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_ylim(-0.7, len(rows) - 0.3)
    fig.suptitle("Geometric mean ratio with 95% t-interval on the log ratios", fontsize=10)
    fig.tight_layout()
    return _save(fig, path, footer)


def reap_curves(points: pd.DataFrame, drains: pd.DataFrame, cap: int, path: Path, footer: str = "") -> Path:
    """Left: server time of one full reap call against its cap (the spike
    every other client waits out), at the largest M measured. Right: time to
    drain a mass crash at each cadence. The product cap is marked on both."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    for build, rows in points.groupby("build", sort=False):
        top = rows[rows["M"] == rows["M"].max()]
        full = top[top["k"] == top["cap"]].groupby("cap")["server_us"].median().sort_index()
        left.plot(full.index, full.values / 1000.0, marker="o", label=f"{build} (M={int(top['M'].max()):,})")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("cap (jobs per reap call, all expired)")
    left.set_ylabel("server ms blocked by one call")
    left.set_title("Blocking time of one reap call")
    for build, rows in drains.groupby("build", sort=False):
        for cadence, sub in rows.groupby("cadence_ms"):
            pts = sub.groupby("cap")["value"].median().sort_index()
            k = int(sub["K"].iloc[0])
            right.plot(pts.index, pts.values / 1000.0, marker="o",
                       label=f"{build}, reap every {int(cadence)} ms (K={k:,})")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("cap (jobs per reap call)")
    right.set_ylabel("seconds to drain the crash")
    right.set_title("Drain time of a mass crash")
    for ax in (left, right):
        ax.axvline(cap, color="#c33", linestyle=":", label=f"product cap {cap}")
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path, footer)
