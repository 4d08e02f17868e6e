"""The two-level interval of a build verdict on synthetic figures: trials within a run, and runs
on one machine, with a between-run shift that an interval from one run's trials would miss."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from echomq_bench.capacity.compare_history import spreads_for
from echomq_bench.capacity.compare_result import CompareResult, Trial
from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.capacity.compare import Build
from echomq_bench.measurement.runspread import ASSUMED, MEASURED, MIN_RUNS, PRIOR_SD, combined, estimate
from echomq_bench.measurement.verdicts import FASTER, INCONCLUSIVE, SLOWER, UNSTABLE, judge
from echomq_bench.records.history import HISTORY_ENV, record_run
from echomq_bench.records.record import Record
from echomq_bench.servers import parse_server_spec

RUN_SD, TRIAL_SD, TRIALS = 0.02, 0.01, 16


def _run(rng: np.random.Generator, true_log: float) -> list[float]:
    """One run's per-trial ratios: the run's own shift, then each trial's noise."""
    shift = rng.normal(0.0, RUN_SD)
    return list(np.exp(true_log + shift + rng.normal(0.0, TRIAL_SD, TRIALS)))


def _summary(ratios: list[float]) -> tuple[float, float]:
    logs = np.log(ratios)
    return float(np.mean(logs)), float(np.std(logs, ddof=1) / math.sqrt(len(logs)))


def test_below_three_runs_the_spread_is_the_declared_prior_and_says_so() -> None:
    for k in range(MIN_RUNS):
        spread = estimate([(0.01, 0.003)] * k)
        assert spread.source == ASSUMED and spread.sd == PRIOR_SD and spread.runs == k
        assert f"assumed: {k} of {MIN_RUNS} runs here" in spread.text


def test_runs_that_agree_within_their_errors_have_no_between_run_spread() -> None:
    spread = estimate([(0.010, 0.004), (0.012, 0.004), (0.009, 0.004), (0.011, 0.004)])
    assert spread.source == MEASURED and spread.sd == 0.0 and spread.runs == 4 and spread.df == 3
    assert spread.text == "between runs: none beyond the trials (4 runs here)"


def test_dersimonian_laird_recovers_a_known_between_run_spread() -> None:
    rng = np.random.default_rng(7)
    runs = [_summary(_run(rng, 0.05)) for _ in range(200)]
    spread = estimate(runs)
    assert spread.source == MEASURED
    assert spread.sd == pytest.approx(RUN_SD, rel=0.15)


def test_the_combined_error_adds_in_quadrature_and_few_runs_cost_degrees_of_freedom() -> None:
    many = estimate([(0.0, 0.004), (0.03, 0.004), (-0.03, 0.004), (0.01, 0.004), (-0.01, 0.004)] * 4)
    few = estimate([(0.0, 0.004), (0.03, 0.004), (-0.03, 0.004)])
    se_many, df_many = combined(0.004, 15, many)
    assert se_many == pytest.approx(math.hypot(0.004, many.sd))
    se_few, df_few = combined(0.004, 15, few)
    assert df_few < df_many and df_few < 15
    assert combined(0.004, 15, None) == (0.004, 15)


def test_a_between_run_shift_escapes_the_one_level_interval_and_not_the_two_level_one() -> None:
    """Runs whose shift is twice their trials' noise: the interval from one run's trials covers the true
    ratio far less often than 95%; with the spread of the ten runs before it, close to 95% or above."""
    rng = np.random.default_rng(2013)
    true = math.log(1.05)
    history: list[tuple[float, float]] = [_summary(_run(rng, true)) for _ in range(10)]
    one_level = two_level = 0
    trials = 400
    for _ in range(trials):
        ratios = _run(rng, true)
        current = _summary(ratios)
        spread = estimate([*history[-10:], current])
        plain = judge(ratios, higher_is_better=False)
        both = judge(ratios, higher_is_better=False, spread=spread)
        assert plain.ci is not None and both.ci is not None
        one_level += plain.ci[0] <= 1.05 <= plain.ci[1]
        two_level += both.ci[0] <= 1.05 <= both.ci[1]
        history.append(current)
    assert one_level / trials < 0.6
    assert two_level / trials >= 0.92


def test_runs_that_differ_more_than_their_trials_are_unstable_not_inconclusive() -> None:
    ratios = [1.005 * (1 + 0.002 * (i % 3 - 1)) for i in range(TRIALS)]
    wide = estimate([(0.0, 0.001), (0.05, 0.001), (-0.05, 0.001), (0.005, 0.001)])
    v = judge(ratios, higher_is_better=False, spread=wide)
    assert v.verdict == UNSTABLE
    assert v.text == f"unstable: runs on this machine differ by about {wide.sd:.1%}"
    # The same trials with the prior: wide too, but nothing was measured to call the runs unstable.
    v = judge(ratios, higher_is_better=False, spread=estimate([]))
    assert v.verdict == INCONCLUSIVE and "assumed" in v.label()


def test_a_large_difference_is_still_decided_with_the_spread_added() -> None:
    rng = np.random.default_rng(3)
    ratios = list(np.exp(math.log(0.94) + rng.normal(0, 0.01, TRIALS)))
    assert judge(ratios, higher_is_better=False, spread=estimate([])).verdict == FASTER
    ratios = list(np.exp(math.log(1.06) + rng.normal(0, 0.01, TRIALS)))
    assert judge(ratios, higher_is_better=False, spread=estimate([])).verdict == SLOWER


# --------------------------------------------------------------------------
# The spread read back from the results history, series by series

JEMALLOC = {"version": "redis 7.0.15", "allocator": "jemalloc-5.3.0", "binary": "/usr/bin/redis-server",
            "fingerprint": {"cpu_model": "AMD EPYC", "cpu_flags_sha256": "ab", "cores": 2,
                            "server_version": "7.0.15", "allocator": "jemalloc-5.3.0"}}
LIBC = {**JEMALLOC, "version": "redis 6.2.14", "allocator": "libc",
        "fingerprint": {**JEMALLOC["fingerprint"], "server_version": "6.2.14", "allocator": "libc"}}
LIBC_91 = {**LIBC, "version": "valkey 9.1.2", "fingerprint": {**LIBC["fingerprint"], "server_version": "9.1.2"}}


def _trial_result(server_us: float, server: dict[str, object]) -> SimpleNamespace:
    return SimpleNamespace(server_us_per_cycle=server_us, cycles_per_s=1e6 / server_us, bound="server",
                           latency_ms=lambda verb: {"p99": 1.0}, server_utilization=0.5, server_wait=0.5,
                           rows=lambda **_: [], client_utilization=0.3, version=server["version"], scripts=None,
                           pinning="pinned", warnings=[], ceiling=None, ceiling_claims_per_s=None, settings=None,
                           server=server)


def _three_builds(rng: np.random.Generator, libc_shift: float) -> CompareResult:
    """redis7.0 (the reference), redis6.2 and valkey9.1 (libc): the libc builds shifted together by
    `libc_shift` in this run, as a run shares its luck between builds of one allocator."""
    names = [("redis7.0", JEMALLOC, 1.0), ("redis6.2", LIBC, 1.2), ("valkey9.1", LIBC_91, 1.5)]
    trials = []
    for i in range(TRIALS):
        for pos, (name, server, factor) in enumerate(names):
            shift = libc_shift if server["allocator"] == "libc" else 0.0
            cost = 20.0 * factor * math.exp(shift + rng.normal(0, 0.004))
            trials.append(Trial(name, i + 1, 3 * i + pos + 1, _trial_result(cost, server)))  # type: ignore[arg-type]
    builds = tuple(Build(parse_server_spec(n)) for n, _, _ in names)
    return CompareResult(builds, CapacitySettings(), tuple(trials), order_seed=1)


def test_each_pair_takes_its_own_series_spread_from_the_history(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "history.sqlite"
    monkeypatch.setenv(HISTORY_ENV, str(db))
    rng = np.random.default_rng(11)
    first = _three_builds(rng, 0.0)
    assert first.pairs_judged() == [("redis6.2", "redis7.0"), ("valkey9.1", "redis7.0"), ("valkey9.1", "redis6.2")]
    assert all(s.source == ASSUMED and s.runs == 1 for s in spreads_for(first).values())
    for i, shift in enumerate([0.03, -0.03, 0.02, -0.02, 0.0]):
        run = _three_builds(rng, shift)
        run = CompareResult(run.builds, run.settings, run.trials, order_seed=1, spreads=spreads_for(run))
        meta = {"created_utc": f"2026-12-04T0{i}:00:00Z", "servers": [{**t.result.server, "name": t.build}
                                                                      for t in run.trials[:3]]}
        record = Record(kind="compare", summary=run.record().to_record(), meta=meta)
        folder = tmp_path / f"run{i}"   # a run is known by its files: each its own
        folder.mkdir()
        (folder / "meta.json").write_text(json.dumps(meta))
        record_run(folder, record)
    now = spreads_for(_three_builds(rng, 0.0))
    # The libc builds moved together against the reference, run by run: a spread of about 2%;
    # against each other they held still, so their own series has next to none.
    assert now[("redis6.2", "redis7.0")].source == MEASURED and now[("redis6.2", "redis7.0")].runs == 6
    assert 0.01 < now[("redis6.2", "redis7.0")].sd < 0.04
    assert now[("valkey9.1", "redis6.2")].sd < 0.005
    # Another machine's runs are another series.
    other = _three_builds(rng, 0.0)
    moved = [Trial(t.build, t.trial, t.order, _trial_result(
        t.result.server_us_per_cycle, {**t.result.server, "fingerprint": {"cpu_model": "Intel"}}))  # type: ignore
        for t in other.trials]
    elsewhere = spreads_for(CompareResult(other.builds, other.settings, tuple(moved)))
    assert elsewhere[("redis6.2", "redis7.0")].source == ASSUMED


def test_the_first_screen_ranks_every_build_against_one_reference_cheapest_first(tmp_path: Path) -> None:
    from echomq_bench.records.files import Run
    from echomq_bench.report.kinds.compare import answer

    rng = np.random.default_rng(5)
    run = _three_builds(rng, 0.0)
    run = CompareResult(run.builds, run.settings, run.trials, order_seed=1, spreads={
        pair: estimate([]) for pair in run.pairs_judged()})
    shown = answer(Run(tmp_path, {}, run.record().to_record(), {}), tmp_path)
    assert shown is not None
    ranked, within = shown.lines[:3], shown.lines[3]
    assert [line.split(" costs ")[0].split(":")[0] for line in ranked] == [
        "redis 7.0.15", "redis 6.2.14", "valkey 9.1.2"]
    assert ranked[0] == "redis 7.0.15: the reference (1.00×)"
    assert "1.20× redis 7.0.15's" in ranked[1] and "1.50× redis 7.0.15's" in ranked[2]
    assert all("between runs ±1.5% (assumed: 0 of 3 runs here)" in line for line in ranked[1:])
    # The version's effect within its allocator is the second line, not the headline.
    assert within.startswith("Within an allocator (the version's effect alone): valkey 9.1.2 costs 1.25× "
                             "redis 6.2.14's")


def test_a_build_with_no_server_bound_trial_is_named_without_a_ratio(tmp_path: Path) -> None:
    from echomq_bench.records.files import Run
    from echomq_bench.report.kinds.compare import answer

    run = _three_builds(np.random.default_rng(5), 0.0)
    client_bound = tuple(Trial(t.build, t.trial, t.order, SimpleNamespace(**{**vars(t.result), "bound": "client"}))
                         if t.build == "valkey9.1" else t for t in run.trials)  # type: ignore[arg-type]
    run = CompareResult(run.builds, run.settings, client_bound, order_seed=1)
    shown = answer(Run(tmp_path, {}, run.record().to_record(), {}), tmp_path)
    assert shown is not None
    assert (f"valkey 9.1.2 against redis 7.0.15: inconclusive (0 trials); {TRIALS} left out, not server-bound"
            in shown.lines)
    assert not any("nan" in line for line in shown.lines)
