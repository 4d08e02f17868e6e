"""The soak's schedule is a pure function of its seed and length; its
recovery figures and headlines follow from the evidence as documented."""

from __future__ import annotations

import pytest

from echomq_bench.faults.nemesis import (GAP_MAX_S, GAP_MIN_S, HOLD_S, KINDS, LEAD_IN_S, MIN_SOAK_S, NETWORK,
                                         PROCESS, Fault, counts, schedule)
from echomq_bench.faults.soakstats import by_kind, per_second, recovery_s
from echomq_bench.measurement.stats import nearest_rank
from echomq_bench.records.headlines import headlines
from echomq_bench.records.record import Record


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert schedule(7, 600) == schedule(7, 600)
    assert schedule(7, 20) == (Fault("zombie", 2.0, 2.0, 3.396), Fault("half-open", 7.396, 0.1, 3.146),
                               Fault("oom", 10.642, 3.0, 4.037))


def test_different_seeds_give_different_schedules() -> None:
    plans = {schedule(seed, 600) for seed in range(50)}
    assert len(plans) == 50


@pytest.mark.parametrize("duration", [MIN_SOAK_S, 37.5, 600.0])
def test_every_fault_fits_the_soak_with_its_recovery_gap(duration: float) -> None:
    for seed in range(200):
        plan = schedule(seed, duration)
        assert plan[0].at_s == LEAD_IN_S
        for before, after in zip(plan, plan[1:]):
            assert after.at_s == pytest.approx(before.ends_s, abs=0.002)  # no fault inside another's gap
            assert after.family != before.family  # families alternate
        for fault in plan:
            assert fault.hold_s == HOLD_S[fault.kind]
            assert GAP_MIN_S <= fault.gap_s <= GAP_MAX_S
            assert fault.ends_s <= duration
        # the shortest soak holds a process and a network fault whatever the seed
        assert {f.family for f in plan} == {"process", "network"}


def test_a_long_soak_draws_every_kind() -> None:
    assert set(counts(schedule(7, 600))) == set(KINDS) == set(PROCESS) | set(NETWORK)
    assert sum(counts(schedule(7, 600)).values()) == len(schedule(7, 600)) == 110


@pytest.mark.parametrize("seed, duration, message", [
    (-1, 60, "seed must be 0 or more, got -1"),
    (1, 19.9, "a soak lasts from 20 s to 86400 s, got 19.9 s"),
    (1, 0, "a soak lasts from 20 s to 86400 s, got 0 s"),
])
def test_a_schedule_refuses_what_it_cannot_plan(seed: int, duration: float, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        schedule(seed, duration)
    assert str(exc.value) == message


def test_every_kind_has_its_injection() -> None:
    from echomq_bench.faults.soak import ACTIONS

    assert tuple(ACTIONS) == KINDS


def test_recovery_is_the_first_window_back_at_80_percent_of_the_rate_before() -> None:
    # 100 completes/s until 10 s, none during a fault from 10 to 12 s, then 50/s until 13 s, 100/s after.
    times = [i / 100 for i in range(1000)] + [12 + i / 50 for i in range(50)] + [13 + i / 100 for i in range(700)]
    assert recovery_s(times, start=10.0, end=12.0, limit=20.0) == 0.6   # [12.6, 13.6): 20 + 60 = 80 completes
    assert recovery_s(times, start=10.0, end=12.0, limit=13.5) is None  # no whole window before the limit
    assert recovery_s([], start=10.0, end=12.0, limit=20.0) is None     # no rate before the fault


def test_per_kind_figures_use_nearest_rank_over_recovered_faults() -> None:
    assert nearest_rank([3.0, 1.0, 2.0], 0.5) == 2.0 and nearest_rank([3.0, 1.0, 2.0], 0.99) == 3.0
    assert nearest_rank([], 0.5) is None
    found = by_kind([("pause", "process", 0.4), ("reset", "network", None), ("pause", "process", 0.2),
                     ("pause", "process", None)])
    assert [(k.kind, k.family, k.injected, k.recovered, k.recovery_p50_s, k.recovery_p99_s) for k in found] == [
        ("pause", "process", 3, 2, 0.2, 0.4), ("reset", "network", 1, 0, None, None)]
    assert per_second([100.2, 100.7, 101.1, 103.9, 99.0], t0=100.0, end=103.5) == [2, 1, 0, 0]


def test_a_soak_record_has_its_headlines() -> None:
    soak = {"server": "redis", "build": "redis 7.0.15", "lost": 0, "double_accepted": 0, "ambiguous_resolved": 6,
            "ambiguous_unresolved": 0, "kinds": [{"kind": "pause", "recovery_p50_s": 0.2, "recovery_p99_s": 0.4},
                                                 {"kind": "reset", "recovery_p50_s": None, "recovery_p99_s": None}]}
    found = {h.metric: (h.build, h.value, h.better) for h in
             headlines(Record(kind="faults", summary={"passed": True, "scenarios": [], "soak": [soak]}))}
    assert found == {
        "faults.soak.lost": ("redis", 0.0, "lower"), "faults.soak.double_accepted": ("redis", 0.0, "lower"),
        "faults.soak.ambiguous_resolved": ("redis", 6.0, ""),
        "faults.soak.ambiguous_unresolved": ("redis", 0.0, "lower"),
        "faults.soak.pause.recovery_p50_s": ("redis", 0.2, "lower"),
        "faults.soak.pause.recovery_p99_s": ("redis", 0.4, "lower")}
