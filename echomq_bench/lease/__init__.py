"""Lease sizing: an empirical sweep on a real server, an analytical model
beside it, and a recommendation a team can act on.

    from echomq_bench.lease import SweepSettings, run_sweep, recommend_for
    result = run_sweep(server, SweepSettings(work="exp:mean=200ms"), progress=print)
    print(recommend_for(result).text)

    # the main job's short form: a 12 s window at time scale 10, ~35 s per server
    result = run_sweep(server, quick_settings())

Modules: `settings` (what a sweep depends on), `sweep` (the runner, with
`worker`: one lease's process, and `calibrate`: reap cost and mass crash),
`records` (raw data), `model` (the formulas), `blocks` (rates over blocks of
time, the unit a stall replicates in), `rescale` (a crashed job's wait at
scale 1, the physical delays counted once), `figures` (intervals and
quantiles), `split` (which attempts fit the model, which it is judged on),
`modelfit` (the model fed the fit half), `analysis` (measured vs model),
`verdict` (where a lease stands against each limit), `recommend` and
`wording` (the recommendation and its sentences), `report` (tables, files),
`chart`; the CLI is `echomq_bench.commands.lease`.
"""

from __future__ import annotations

from typing import Any

from echomq_bench.lease.analysis import LeaseResult, SweepResult, analyse
from echomq_bench.lease.recommend import Candidate, Recommendation, recommend, recommend_for
from echomq_bench.lease.settings import QUICK
from echomq_bench.progress import ProgressFn
from echomq_bench.lease.sweep import DEFAULT_WORK, SettingsError, SweepError, SweepSettings, auto_leases, collect

__all__ = [
    "DEFAULT_WORK",
    "SweepSettings",
    "SettingsError",
    "SweepError",
    "SweepResult",
    "LeaseResult",
    "Candidate",
    "Recommendation",
    "auto_leases",
    "run_sweep",
    "quick_settings",
    "recommend",
    "recommend_for",
]


def quick_settings(**overrides: Any) -> SweepSettings:
    """The short sweep the main job runs (~35 s per server): the defaults
    with a 12 s window at time scale 10 and one mass crash."""
    return SweepSettings(**{**QUICK, **overrides})


def run_sweep(server: Any, settings: SweepSettings, progress: ProgressFn | None = None,
              leases_ms: tuple[float, ...] | None = None) -> SweepResult:
    """Run the sweep on a started server (echomq_bench.servers.start) and analyse it:
    measured rates with 95% intervals, the model beside them, agreement."""
    return analyse(collect(server, settings, progress=progress, leases_ms=leases_ms))
