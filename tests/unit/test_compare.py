"""compare: its statistics on synthetic data with known answers, and its
command line's refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from echomq_bench.commands.capacity import CapacitySettings
from echomq_bench.cli import main
from echomq_bench.commands.compare import Build, run_compare, unique_builds
from echomq_bench.servers import parse_server_spec
from echomq_bench.measurement.serverstats import bound
from tests.helpers import LUA
from echomq_bench.measurement.stats import FASTER, SAME, SLOWER, bootstrap_ci, compare_metric, paired_ratios, verdict



def test_bound_names_the_saturated_side() -> None:
    assert bound(0.99, 0.40) == "server"      # the server's main thread had no time left
    assert bound(0.40, 0.30) == "server"      # the server did more of the work than the client
    assert bound(0.30, 0.95) == "client"      # the client could not keep the server busy


def test_constant_ratio_gives_a_point_interval() -> None:
    base = [100.0, 90.0, 110.0, 105.0, 95.0]
    got = compare_metric(base, [1.2 * x for x in base], higher_is_better=True)
    assert got.ratio == pytest.approx(1.2)
    assert got.ci95 == pytest.approx((1.2, 1.2))
    assert got.verdict == FASTER and got.trials == 5


def test_interval_of_five_trials_spans_their_smallest_and_largest_ratio() -> None:
    # With five values the bootstrap median falls on x(1) with probability
    # 5.8% (three or more draws of the smallest), so the 2.5% point is x(1).
    ratios = [0.97, 1.01, 1.02, 1.04, 1.08]
    median, lo, hi = bootstrap_ci(ratios)
    assert median == pytest.approx(1.02)
    assert lo == pytest.approx(0.97) and hi == pytest.approx(1.08)
    assert verdict(lo, hi, higher_is_better=True) == SAME


def test_the_bootstrap_resamples_rows_of_several_columns_together() -> None:
    # Work and a refused flag per execution: the wasted share is a ratio of
    # sums, so each resample must keep a row's work and its flag together.
    work = [10.0, 10.0, 10.0, 10.0, 60.0]
    refused = [0.0, 0.0, 0.0, 0.0, 1.0]
    share, lo, hi = bootstrap_ci(work, refused, stat=lambda w, r: float((w * r).sum() / w.sum()), n_boot=2000)
    assert share == pytest.approx(0.6)
    # Rows kept together: a resample holding the refused row k times has the
    # share 60k / (60k + 10(5-k)); k = 3 (0.9) is above 94% of resamples
    # and below 99%, so it is the 97.5% point. Resampled apart, it would not be.
    assert lo == 0.0 and hi == pytest.approx(0.9)
    with pytest.raises(ValueError, match="one length"):
        bootstrap_ci(work, refused[:3], stat=lambda w, r: 0.0)
    with pytest.raises(ValueError, match="give stat"):
        bootstrap_ci(work, refused)


def test_cost_and_latency_verdicts_read_lower_as_better() -> None:
    base = [30.0, 31.0, 29.5, 30.5, 30.2]
    dearer = compare_metric(base, [x * 1.15 for x in base], higher_is_better=False)
    cheaper = compare_metric(base, [x * 0.9 for x in base], higher_is_better=False)
    assert dearer.verdict == SLOWER and dearer.ratio == pytest.approx(1.15)
    assert cheaper.verdict == FASTER and cheaper.ratio == pytest.approx(0.9)


def test_a_real_difference_under_noise_is_found_and_covered() -> None:
    rng = np.random.default_rng(7)
    base = 30_000 * rng.lognormal(0, 0.02, 5)
    slow = base / 1.12 * rng.lognormal(0, 0.02, 5)       # 12% slower, 2% noise
    got = compare_metric(base, slow, higher_is_better=True)
    assert got.verdict == SLOWER
    assert got.ci95[0] <= 1 / 1.12 * 1.05 and got.ci95[1] >= 1 / 1.12 * 0.95
    assert got.ci95[1] < 1.0


def test_a_and_a_under_noise_is_no_significant_difference() -> None:
    rng = np.random.default_rng(11)
    base = 30_000 * rng.lognormal(0, 0.03, 5)
    same = 30_000 * rng.lognormal(0, 0.03, 5)
    got = compare_metric(base, same, higher_is_better=True)
    assert got.ci95[0] <= 1.0 <= got.ci95[1]
    assert got.verdict == SAME


def test_bootstrap_interval_covers_the_true_ratio_about_as_often_as_it_claims() -> None:
    # 300 synthetic experiments of 15 paired trials with a known ratio of
    # 1.10; a 95% percentile interval of a median should cover it in most.
    rng = np.random.default_rng(3)
    covered = 0
    experiments = 300
    for i in range(experiments):
        ratios = 1.10 * rng.lognormal(0, 0.04, 15)
        _, lo, hi = bootstrap_ci(ratios, n_boot=2000, seed=i)
        covered += lo <= 1.10 <= hi
    assert 0.88 <= covered / experiments <= 0.995


def test_min_effect_turns_a_tiny_significant_difference_into_none() -> None:
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    other = [x * 1.005 for x in base]
    assert compare_metric(base, other, higher_is_better=True).verdict == FASTER
    assert compare_metric(base, other, higher_is_better=True, min_effect=0.01).verdict == SAME


def test_bad_trials_are_refused() -> None:
    with pytest.raises(ValueError):
        paired_ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        paired_ratios([1.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_a_repeated_build_gets_a_distinct_name() -> None:
    specs = unique_builds([parse_server_spec("redis"), parse_server_spec("redis"), parse_server_spec("redis")])
    assert [s.name for s in specs] == ["redis", "redis-2", "redis-3"]
    assert {s.binary for s in specs} == {"redis-server"}


def test_scripts_for_an_unknown_build_exit_2_and_write_nothing(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["compare", "--server", "redis", "--server", "redis", "--scripts", f"nope={LUA}",
                 "--out", str(out)])
    assert code == 2
    assert "nope" in capsys.readouterr().err
    assert not out.exists()


def test_scripts_folder_without_scripts_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--server", "redis", "--scripts", f"redis={tmp_path}"])
    assert exc.value.code == 2
    assert "--scripts" in capsys.readouterr().err


def test_run_compare_needs_two_builds_and_two_trials() -> None:
    from echomq_bench.commands.capacity import CapacityError

    one = [Build(parse_server_spec("redis"))]
    with pytest.raises(CapacityError):
        run_compare(one, CapacitySettings(), 3)
    with pytest.raises(CapacityError):
        run_compare(one * 2, CapacitySettings(), 1)
