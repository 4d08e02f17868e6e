"""Alternating blocks judged pair by pair: a block's figure from two commandstats readings, and the
ratio over pairs with its t-interval on log ratios, against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from echomq_bench.errors import MeasurementError
from echomq_bench.measurement.pairedblocks import METHOD, block_figure, paired_ratio


def test_a_block_is_its_usec_per_cycle_when_the_calls_are_its_own() -> None:
    assert block_figure((1_000, 50_000), (2_000, 71_000), 500) == 42.0
    assert block_figure((0, 0), (300, 900), 100, calls_per_unit=3) == 9.0


@pytest.mark.parametrize("calls", [999, 1_001])
def test_a_block_whose_command_another_client_also_ran_fails(calls: int) -> None:
    with pytest.raises(MeasurementError, match=f"{calls} calls over a block of 1000"):
        block_figure((0, 0), (calls, 21_000), 500)


def test_an_empty_block_has_no_figure() -> None:
    with pytest.raises(ValueError, match="at least one unit"):
        block_figure((0, 0), (0, 0), 0)


def test_the_ratio_is_the_geometric_mean_of_the_pairs_with_a_t_interval_on_their_logs() -> None:
    # Pair ratios e^0.02, e^0.05, e^0.11: logs mean 0.06, sd 0.045826, se 0.026458; t(0.975, 2) = 4.302653.
    seed = [40.0, 50.0, 30.0]
    project = [s * math.exp(x) for s, x in zip(seed, (0.02, 0.05, 0.11))]
    p = paired_ratio(project, seed)
    assert p.ratio == pytest.approx(math.exp(0.06))
    half = 4.302653 * 0.0458258 / math.sqrt(3)
    assert p.ci == pytest.approx((math.exp(0.06 - half), math.exp(0.06 + half)), rel=1e-5)
    assert (p.n, p.level, p.method) == (3, 0.95, METHOD)
    assert (p.a_mean, p.b_mean) == (pytest.approx(sum(project) / 3), 40.0)
    # Not the ratio of the means: a pair is the unit, whatever its blocks' size.
    assert p.ratio != pytest.approx(p.a_mean / p.b_mean, rel=1e-3)


def test_the_ratio_turned_round_is_the_reciprocal_with_the_reciprocal_interval() -> None:
    a, b = [41.0, 44.0, 39.5, 42.0], [38.0, 40.5, 37.0, 39.0]
    there, back = paired_ratio(a, b), paired_ratio(b, a)
    assert there.ci is not None and back.ci is not None
    assert back.ratio == pytest.approx(1 / there.ratio)
    assert back.ci == pytest.approx((1 / there.ci[1], 1 / there.ci[0]))


def test_pairs_that_agree_exactly_have_a_zero_width_interval_and_one_pair_has_none() -> None:
    same = paired_ratio([20.0, 30.0, 40.0], [10.0, 15.0, 20.0])
    assert same.ci == pytest.approx((2.0, 2.0)) and same.ratio == pytest.approx(2.0)
    one = paired_ratio([20.0], [10.0])
    assert (one.ratio, one.ci, one.n) == (pytest.approx(2.0), None, 1)
    assert one.label() == "2.000 [no interval] (1 pair)"


def test_the_label_shows_the_ratio_its_interval_and_the_pairs() -> None:
    p = paired_ratio([41.0, 44.0, 39.5, 42.0], [38.0, 40.5, 37.0, 39.0])
    assert p.ci is not None
    assert p.label() == f"{p.ratio:.3f} [{p.ci[0]:.3f}, {p.ci[1]:.3f}] (4 pairs)"


@pytest.mark.parametrize("a, b", [([1.0, 2.0], [1.0]), ([], []), ([1.0, 0.0], [1.0, 1.0])])
def test_unpaired_empty_or_non_positive_blocks_are_refused(a: list[float], b: list[float]) -> None:
    with pytest.raises(ValueError):
        paired_ratio(a, b)
