"""The trade-off chart: false expiry and recovery against the lease,
measured (with 95% intervals) and modelled, the limits and the pick marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from echomq_bench.formatting import fmt_ms, fmt_pct
from echomq_bench.lease.analysis import SweepResult, pooled_inputs
from echomq_bench.lease.model import ModelInputs, false_expiry, recovery_samples
from echomq_bench.lease.recommend import Recommendation
from echomq_bench.measurement.stats import median, quantile

__all__ = ["draw"]


def _err(val: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """Error-bar lengths; an unbounded or missing side draws no bar."""
    down = np.where(np.isfinite(lo), val - lo, 0.0)
    up = np.where(np.isfinite(hi), hi - val, 0.0)
    return [np.nan_to_num(np.maximum(down, 0.0)), np.nan_to_num(np.maximum(up, 0.0))]


def draw(path: Path, results: Sequence[SweepResult], recs: Sequence[Recommendation]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = results[0].settings
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8.5, 8.5), sharex=True)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
    lows: list[float] = []
    for k, (res, rec) in enumerate(zip(results, recs)):
        lows.extend(_draw_server(ax1, ax2, res, rec, colours[k % len(colours)], s.budget))
    ax1.axhline(s.budget, color="red", linewidth=1, label=f"budget {fmt_pct(s.budget)}")
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    if lows:
        ax1.set_ylim(max(1e-7, min(lows) / 2), 1.0)
    from matplotlib.ticker import FuncFormatter

    swept = sorted({r.lease_ms / 1000 for res in results for r in res.leases})
    ax2.set_xticks(swept)
    ax2.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_ms(x * 1000)))
    ax2.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))
    ax1.set_ylabel("false expiry (share of live executions)")
    ax1.legend(fontsize=7, loc="lower left")
    ax1.grid(True, which="both", alpha=0.3)
    ax2.axhline(s.recovery_tolerance_ms / 1000, color="red", linewidth=1,
                label=f"tolerance {fmt_ms(s.recovery_tolerance_ms)}")
    ax2.set_xlabel("lease (s, nominal)")
    ax2.set_ylabel("crash -> re-claim (s)")
    ax2.legend(fontsize=7, loc="upper left")
    ax2.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"Lease trade-off: work {s.work}, crash rate {fmt_pct(s.crash_rate)}, reap every "
                 f"{fmt_ms(s.reap_every_ms)}, time scale 1:{s.time_scale:g}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _draw_server(ax1: Any, ax2: Any, res: SweepResult, rec: Recommendation, col: str, budget: float) -> list[float]:
    """One server's measured points and model curves on both panels; returns the
    false-expiry values the upper panel's y range must show."""
    lows: list[float] = []
    name = f"{res.data.server_name}"
    leases = np.array([r.lease_ms for r in res.leases]) / 1000
    dist = res.settings.dist()
    inputs: ModelInputs = pooled_inputs(res.data)
    grid = np.geomspace(leases.min() / 1.5, leases.max() * 1.5, 32)
    fe = np.array([r.false_expiry.value for r in res.leases])
    lo = np.array([r.false_expiry.lo for r in res.leases])
    hi = np.array([r.false_expiry.hi for r in res.leases])
    seen = fe > 0
    ax1.errorbar(leases[seen], fe[seen], yerr=_err(fe[seen], lo[seen], hi[seen]),
                 fmt="o", color=col, capsize=3, label=f"{name} measured (95% CI)")
    if (~seen).any():
        # No false expiry seen: only the interval's upper end is a number.
        ax1.plot(leases[~seen], hi[~seen], "v", color=col, markerfacecolor="none", markersize=8,
                 label=f"{name} none seen: 95% upper bound")
    model_fe = np.array([false_expiry(dist, g * 1000, inputs) for g in grid])
    ax1.plot(grid, model_fe, "-", color=col, alpha=0.6, label=f"{name} model")
    lows.extend([*model_fe[model_fe > 0], *lo[lo > 0], *hi])
    for q, marker in (("median", "o"), ("p99", "^")):
        val = np.array([r.recovery[q].value for r in res.leases]) / 1000
        qlo = np.array([r.recovery[q].lo for r in res.leases]) / 1000
        qhi = np.array([r.recovery[q].hi for r in res.leases]) / 1000
        ax2.errorbar(leases, val, yerr=_err(val, qlo, qhi), fmt=marker, color=col, capsize=3,
                     label=f"{name} {q} measured")
    mrec = [recovery_samples(dist, g * 1000, inputs, n=6000) for g in grid]
    ax2.plot(grid, [median(x) / 1000 for x in mrec], "-", color=col, alpha=0.6, label=f"{name} model median")
    ax2.plot(grid, [quantile(x, 0.99) / 1000 for x in mrec], "--", color=col, alpha=0.6,
             label=f"{name} model p99")
    if rec.lease_ms is not None:
        for ax in (ax1, ax2):
            ax.axvline(rec.lease_ms / 1000, color=col, linestyle=":", linewidth=2)
        ax1.annotate(f"recommended {fmt_ms(rec.lease_ms)}", (rec.lease_ms / 1000, budget),
                     xytext=(6, 12), textcoords="offset points", color=col)
    return lows
