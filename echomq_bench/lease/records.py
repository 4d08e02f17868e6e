"""What a sweep brings back: raw records, before any statistics."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from echomq_bench.lease.settings import SweepSettings
from echomq_bench.reapcost.curve import ReapCost

__all__ = ["LeaseData", "ReapCost", "MassCrash", "SweepData"]


# --------------------------------------------------------------------------
# What comes back from a run (real seconds on perf_counter, which is
# CLOCK_MONOTONIC on Linux and so one clock across the lease processes)


@dataclass(frozen=True)
class LeaseData:
    lease_ms: float                    # nominal, as run (real integer lease * time scale)
    lease_real_ms: int
    window: tuple[float, float]
    # counted live attempts: columns of one table
    live: dict[str, np.ndarray]        # t0 t1 w_ms(nominal) t2 t3 ok reclaim(t1 of token+1, nan if none)
    crashed: dict[str, np.ndarray]     # t0 t1 w_ms c_ms(nominal) tx reclaim
    claim_t1: np.ndarray               # every claim's reply time (window and tail)
    reaps: np.ndarray                  # rows (start, end, count, due: when the pump's tick was due)
    censored_live: int
    censored_crashed: int
    empty_claims: int
    cpu_s: float                       # this lease's process over the window
    tail_s: float                      # how long after the window the run went on
    # every claim's nominal end of work: when its consumer falls free if the client adds nothing
    free_at: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class MassCrash:
    k: int
    cap: int
    drain_ms: list[float]              # nominal: the deadline -> the call that returned the last job
    ticks: list[int]                   # non-empty reap calls it took
    spread_ms: list[float]             # nominal: first -> last deadline of the K (one deadline: 0)


@dataclass(frozen=True)
class SweepData:
    settings: SweepSettings
    server_name: str
    server_version: str
    leases: list[LeaseData]
    reap_cost: ReapCost | None
    mass: MassCrash | None
    server_utilization: float          # main thread, over the window
    server_cpu_s: float
    client_cpu_s: float                # all lease processes over the window
    window_s: float
    wall_s: float
    evalsha_calls: int
    evalsha_usec: int

    def settings_dict(self) -> dict[str, Any]:
        return asdict(self.settings)
