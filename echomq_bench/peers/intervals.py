"""Intervals for the peers tables, by the compare verdicts' method.

A figure of one queue in one mode on one server is the geometric mean of
its trials with Student's t-interval on their logarithms; a ratio to the
baseline queue pairs trial i of each (they ran in the same round, minutes
apart, so a slow stretch of a shared machine slows both) and is judged by
`verdicts.judge` at the level of its family (`echomq_bench.peers.family`):
fewer trials than the method needs give "inconclusive". Only rounds of one
kind are ever paired and pooled; the caller hands in runs of one kind.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

from echomq_bench.measurement import verdicts
from echomq_bench.peers.family import FAILED, Tally
from echomq_bench.peers.result import PeerRun

__all__ = ["interval", "ratio_verdict", "FIGURES_WITH_CI", "LOWER_IS_BETTER"]

# The per-job figures every row carries with its interval.
FIGURES_WITH_CI = ("server_us_per_job", "script_us_per_job", "commands_per_job", "round_trips_per_job",
                   "bytes_per_pending_job", "jobs_per_s", "client_us_per_job")
LOWER_IS_BETTER = {name: name != "jobs_per_s" for name in FIGURES_WITH_CI}


def interval(values: Sequence[float], level: float = verdicts.LEVEL) -> dict[str, Any]:
    """Geometric mean and t-interval on logs; a figure that is zero in every trial is exactly zero,
    and one that is zero in some trials only has no interval on the log scale."""
    n = len(values)
    if n and all(v == 0 for v in values):
        return {"mean": 0.0, "ci": [0.0, 0.0], "n": n}
    if not n or any(not (v > 0 and math.isfinite(v)) for v in values):
        return {"mean": None, "ci": None, "n": n}
    logs = [math.log(v) for v in values]
    mean = sum(logs) / n
    if n < 2:
        return {"mean": math.exp(mean), "ci": None, "n": n}
    half = verdicts.log_half_width(values, level)
    return {"mean": math.exp(mean), "ci": [math.exp(mean - half), math.exp(mean + half)], "n": n}


def ratio_verdict(mine: list[PeerRun], baseline: list[PeerRun], figure: str, *, level: float,
                  rounds: Tally) -> verdicts.RatioVerdict | None:
    """This queue's figure over the baseline's, trial by trial, judged at `level`; None when no trial pairs
    and the queue did not fail. `rounds` counts the queue's own rounds: its failures stand beside the
    verdict, and a queue that failed in most of them gets none (a failed verdict, without a ratio)."""
    base = {r.trial: float(getattr(r, figure)) for r in baseline if r.clean}
    ratios = []
    for r in mine:
        value = float(getattr(r, figure))
        if r.clean and r.trial in base and base[r.trial] > 0 and value > 0:
            ratios.append(value / base[r.trial])
    excluded = len(mine) - len(ratios)
    if rounds.most_failed:
        return verdicts.RatioVerdict(verdict=FAILED, n=len(ratios), excluded=excluded, level=level,
                                     higher_is_better=not LOWER_IS_BETTER[figure], method=verdicts.METHOD,
                                     said=f"failed: {rounds.text}, no verdict")
    if not ratios:
        return None
    verdict = verdicts.judge(ratios, higher_is_better=not LOWER_IS_BETTER[figure], level=level, excluded=excluded)
    return replace(verdict, said=f"{verdict.text}; {rounds.text}") if rounds.failed else verdict
