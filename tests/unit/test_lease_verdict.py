"""The lease verdict at its unit of replication, on constructed sweeps whose figures are known:
overruns that come in clusters widen the bound that confirms a lease, a p99 recovery from too
few crashes decides nothing, and a run at a time scale counts its physical delays once."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from echomq_bench.lease import SweepSettings
from echomq_bench.lease.analysis import analyse
from echomq_bench.lease.records import LeaseData, SweepData
from echomq_bench.lease.report import recommend_for
from echomq_bench.measurement.intervals import wilson

START, WINDOW_S = 100.0, 12.0
SCALE = 10.0
LEASE_MS = 2600.0                        # nominal; 260 ms real at time scale 10
LIVE = 40_000                            # live executions over the window
TICK_S = 0.010                           # a reap every 100 nominal ms
SETTINGS = SweepSettings(work="exp:mean=200ms", leases_ms=(LEASE_MS,), time_scale=SCALE, duration_s=WINDOW_S,
                         reap_every_ms=100.0, mass_crash=0)


def _live(overrun_at: np.ndarray, long_at: np.ndarray) -> dict[str, np.ndarray]:
    """LIVE executions evenly over the window, each about 100 ms real of work; those at
    `overrun_at` (indices) answered their complete 300 ms real after the claim, past the 260 ms
    lease, and those at `long_at` 200 ms after, long but within it."""
    t0 = START + np.arange(LIVE) * (WINDOW_S / LIVE)
    t1 = t0 + 0.0004
    t3 = t1 + 0.1004 + np.random.default_rng(0).random(LIVE) / 1000
    t3[long_at] = t0[long_at] + 0.2
    t3[overrun_at] = t0[overrun_at] + 0.3
    return {"t0": t0, "t1": t1, "w_ms": np.full(LIVE, 1000.0), "t2": t3 - 0.0002, "t3": t3,
            "ok": np.ones(LIVE, dtype=bool), "reclaim": np.full(LIVE, math.nan)}


def _crashed(count: int, late_s: float) -> dict[str, np.ndarray]:
    """`count` crashes over the first 11.5 s, at most one per tick; each crashes c nominal ms into
    its work, 3 ms (real) late, and is re-claimed `late_s` (the reaper late, the client held up)
    after the first tick past its deadline, plus a 5 ms round trip."""
    t0 = START + 0.0037 + np.arange(count) * (11.5 / count)
    t1 = t0 + 0.0004
    c_ms = np.linspace(0.0, 500.0, count)
    tx = t1 + c_ms / SCALE / 1000 + 0.003
    deadline = t0 + 0.0002 + LEASE_MS / SCALE / 1000
    tick = START + np.ceil((deadline - START) / TICK_S) * TICK_S
    return {"t0": t0, "t1": t1, "w_ms": np.full(count, 1000.0), "c_ms": c_ms, "tx": tx,
            "reclaim": tick + late_s + 0.005}


def sweep(overrun_at: np.ndarray, crashes: int = 800, late_s: float = 0.0,
          long_at: np.ndarray | None = None) -> SweepData:
    """One lease at time scale 10 whose crashed jobs are re-claimed `late_s` (real) late, and whose
    executions at `long_at` ran long, within the lease."""
    due = START + np.arange(int((WINDOW_S + 1) / TICK_S)) * TICK_S
    reaps = np.column_stack([due + 0.002, due + 0.0025, np.ones(due.size), due])
    d = LeaseData(lease_ms=LEASE_MS, lease_real_ms=260, window=(START, START + WINDOW_S),
                  live=_live(overrun_at, np.zeros(0, dtype=int) if long_at is None else long_at),
                  crashed=_crashed(crashes, late_s), claim_t1=np.zeros(0), reaps=reaps, censored_live=0,
                  censored_crashed=0, empty_claims=0, cpu_s=1.0, tail_s=0.5)
    # Consumers fall free every ms, at 0.4 ms past each tick: the wait for one is 0.4 ms real.
    d = dataclasses.replace(d, free_at=START + 0.0004 + np.arange(int((WINDOW_S + 2) / 0.001)) * 0.001)
    return SweepData(settings=SETTINGS, server_name="redis", server_version="7.0.15", leases=[d], reap_cost=None,
                     mass=None, server_utilization=0.1, server_cpu_s=1.0, client_cpu_s=1.0, window_s=WINDOW_S,
                     wall_s=14.0, evalsha_calls=0, evalsha_usec=0)


def spread(count: int) -> np.ndarray:
    return np.linspace(0, LIVE - 1, count).astype(int)


def clustered(clusters: int, size: int = 5) -> np.ndarray:
    """`clusters` runs of `size` consecutive executions (one stall each), far apart."""
    starts = np.linspace(0, LIVE - size, clusters).astype(int)
    return np.concatenate([start + np.arange(size) for start in starts])


# ---------------------------------------------------------------- overruns in clusters


def test_overruns_in_clusters_of_five_widen_the_bound_where_wilson_did_not() -> None:
    # Twenty overruns in 40,000 executions: Wilson's upper end is 0.077%, within the 0.1% budget,
    # whether they came one by one or five at a time. In clusters of five the twenty are four
    # independent events, and the bound must say so.
    wilson_hi = wilson(20, LIVE)[1]
    assert wilson_hi < SETTINGS.budget
    alone = analyse(sweep(spread(20)))
    stalls = analyse(sweep(clustered(4)))
    one, five = alone.leases[0], stalls.leases[0]
    assert one.overran == five.overran == 20 and one.live == five.live == LIVE
    assert one.overran_rate.hi == pytest.approx(wilson_hi, rel=0.1)
    assert five.overran_rate.hi > 1.5 * wilson_hi and five.overran_rate.hi > SETTINGS.budget
    assert five.blocks["overran"].design_effect == pytest.approx(5, rel=0.2)
    # So the same run, one stall at a time, confirms the lease; five at a time, it does not, and says
    # it sits at the edge of the budget and how much longer to run.
    assert recommend_for(alone).lease_ms == LEASE_MS
    rec = recommend_for(stalls)
    assert rec.lease_ms is None and not rec.confirmed and rec.relax == "duration" and rec.relax_to > 1
    assert "2.6 s sits at the edge of the 0.1% budget" in rec.text and "run about" in rec.text


def test_a_lease_with_no_overrun_takes_the_clustering_of_its_longest_executions() -> None:
    # No overrun cannot show how overruns cluster. A stall that would push executions past the lease
    # stretches every execution in flight, so the lease's forty longest show it: stretched five at a
    # time by eight stalls in 23 blocks of time they lend a design effect of 3.4, and zero overruns are
    # not read as 40,000 independent trials; spread out, they lend none.
    none = np.zeros(0, dtype=int)
    stalled = analyse(sweep(none, long_at=clustered(8))).leases[0]
    calm = analyse(sweep(none, long_at=spread(40))).leases[0]
    assert stalled.overran == calm.overran == 0
    assert calm.overran_rate.hi == pytest.approx(wilson(0, LIVE)[1])
    assert stalled.overran_rate.hi > 3 * calm.overran_rate.hi
    assert stalled.blocks["longest"].measured == pytest.approx(3.4, abs=0.1)
    assert stalled.blocks["overran"].design_effect == pytest.approx(stalled.blocks["longest"].measured)
    assert calm.blocks["overran"].design_effect == 1.0 and stalled.blocks["overran"].supported


# ---------------------------------------------------------------- the p99 recovery's bound


def test_a_p99_from_too_few_crashes_is_inconclusive_and_says_how_many_more() -> None:
    # 300 crashes give a p99 well within the tolerance, but no 95% upper bound on it (that takes 368).
    result = analyse(sweep(spread(20), crashes=300))
    rec = recommend_for(result)
    assert rec.lease_ms is None and not rec.confirmed and rec.relax == "crashes"
    r = result.leases[0]
    assert r.recovery_unscaled["n"] == 300 and r.recovery_unscaled["p99"].value < SETTINGS.recovery_tolerance_ms
    assert math.isinf(r.recovery_unscaled["p99"].hi)
    assert rec.relax_to == pytest.approx(368 / 300)
    assert "2.6 s has too few crashes to judge its recovery (300; a 95% upper bound on the p99 needs 368)" in rec.text
    # 800 decide it.
    assert recommend_for(analyse(sweep(spread(20), crashes=800))).lease_ms == LEASE_MS


# ---------------------------------------------------------------- the time scale


def test_physical_delays_are_counted_once_not_times_the_scale() -> None:
    # A re-claim 20 ms (real) late, the reaper late or the client held up, and a 5 ms round trip: at
    # time scale 10 the measured wait reads them as 250 nominal ms, and the crash recorded 3 ms late
    # takes 30 off. At scale 1 they are 25 ms, and the crash is at its nominal point.
    late = analyse(sweep(spread(20), late_s=0.020)).leases[0]
    on_time = analyse(sweep(spread(20), late_s=0.0)).leases[0]
    assert late.recovery_unscaled["corrected"] is True
    waits, prompt = late.unscaled_samples_ms, on_time.unscaled_samples_ms
    # Each wait at scale 1 is the prompt run's plus the 20 ms, once.
    assert waits - prompt == pytest.approx(np.full(waits.size, 20.0), abs=1e-6)
    # And the prompt one is exact: 10 x (tick + 0.4 ms - the server's claim - c / 10) + the 5 ms round trip.
    d = sweep(spread(20)).leases[0]
    crashed = d.crashed
    tick = crashed["reclaim"] - 0.005
    want = SCALE * (tick + 0.0004 - (crashed["t0"] + 0.0002) - crashed["c_ms"] / SCALE / 1000) * 1000 + 4.6
    assert prompt == pytest.approx(want, abs=1e-6)
    # As measured, the same 20 ms become about 200 nominal ms.
    assert np.median(late.recovery_samples_ms - on_time.recovery_samples_ms) == pytest.approx(200.0, abs=1e-6)


def test_a_scaled_run_is_judged_on_its_recovery_at_scale_one() -> None:
    # Re-claims 35 ms late at scale 10: measured, the p99 is about 3.04 s, over the 3 s tolerance;
    # at scale 1 its 95% upper bound is about 2.73 s, and the lease is confirmed as an unscaled run
    # would confirm it.
    result = analyse(sweep(spread(20), late_s=0.035))
    rec = recommend_for(result)
    r = result.leases[0]
    assert rec.lease_ms == LEASE_MS and r.recovery["p99"].value > SETTINGS.recovery_tolerance_ms
    assert rec.recovery_p99_hi == r.recovery_unscaled["p99"].hi < SETTINGS.recovery_tolerance_ms
