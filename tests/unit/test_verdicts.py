"""The verdict rule on ratios whose answer is known: hand-computed intervals, and simulated
trials with a planted effect."""

from __future__ import annotations

import math

import numpy as np
import pytest

from echomq_bench.measurement.verdicts import (EQUIVALENT, FASTER, INCONCLUSIVE, MIN_TRIALS, SLOWER, judge,
                                               log_half_width, precision_reached)


def test_interval_is_the_t_interval_of_the_logs() -> None:
    # logs 0.01, 0.03, 0.05, 0.07, 0.09, 0.11: mean 0.06, sd 0.037417, se 0.015275; t(0.975, 5) = 2.570582.
    ratios = [math.exp(x) for x in (0.01, 0.03, 0.05, 0.07, 0.09, 0.11)]
    v = judge(ratios, higher_is_better=True)
    assert v.ratio == pytest.approx(math.exp(0.06))
    half = 2.570582 * 0.0374166 / math.sqrt(6)
    assert v.ci == pytest.approx((math.exp(0.06 - half), math.exp(0.06 + half)), rel=1e-5)
    assert (v.verdict, v.n, v.excluded) == (FASTER, 6, 0)
    assert v.label().endswith("t on log ratios, n=6] faster")


def test_a_cost_ratio_above_one_is_slower() -> None:
    v = judge([1.05, 1.06, 1.04, 1.05, 1.055, 1.045], higher_is_better=False)
    assert v.verdict == SLOWER
    assert v.ci is not None and v.ci[0] > 1.0


def test_throughput_below_one_is_slower_and_cost_below_one_is_faster() -> None:
    ratios = [0.95, 0.94, 0.96, 0.95, 0.945, 0.955]
    assert judge(ratios, higher_is_better=True).verdict == SLOWER
    assert judge(ratios, higher_is_better=False).verdict == FASTER


@pytest.mark.parametrize("n", [1, 2, 3, MIN_TRIALS - 1])
def test_fewer_trials_than_the_method_needs_is_inconclusive_whatever_the_ratios(n: int) -> None:
    v = judge([1.30] * n, higher_is_better=True)
    assert v.verdict == INCONCLUSIVE
    assert v.text == f"inconclusive ({n} trials)"


def test_a_tight_difference_inside_the_margin_is_equivalent() -> None:
    v = judge([1.004, 1.006, 1.005, 1.003, 1.007, 1.005, 1.004, 1.006], higher_is_better=True)
    assert v.verdict == EQUIVALENT
    assert v.text == "equivalent within ±2%"
    assert v.p_equivalence is not None and v.p_equivalence < 0.05


def test_a_significant_difference_inside_half_the_margin_is_no_verdict() -> None:
    # An A/A compare measured 1.015 [1.009, 1.022]: significant, but within the compare-level bias.
    v = judge([1.001, 1.030, 1.007, 1.024, 1.016, 1.003, 1.027, 1.011, 1.019, 1.014], higher_is_better=False)
    assert v.ci is not None and v.ci[0] > 1.0 and v.ci[0] < 1.01
    assert v.verdict == INCONCLUSIVE


def test_a_wide_interval_around_one_is_inconclusive_not_equivalent() -> None:
    v = judge([0.90, 1.10, 0.95, 1.06, 0.97, 1.03], higher_is_better=True)
    assert v.verdict == INCONCLUSIVE
    assert v.text == "inconclusive"
    assert v.ci is not None and v.ci[0] < 0.98 and v.ci[1] > 1.02


def test_the_margin_is_declared_not_fixed() -> None:
    ratios = [1.03, 1.035, 1.025, 1.03, 1.032, 1.028]
    assert judge(ratios, higher_is_better=True, margin=0.02).verdict == FASTER
    assert judge(ratios, higher_is_better=True, margin=0.05).verdict == EQUIVALENT


@pytest.mark.parametrize("bad", [[1.0, 0.0], [1.0, -1.0], [1.0, float("nan")], [1.0, float("inf")]])
def test_bad_ratios_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        judge(bad, higher_is_better=True)


def test_no_trial_to_judge_is_inconclusive_with_no_ratio_and_says_so() -> None:
    v = judge([], higher_is_better=False, margin=0.1, excluded=3)
    assert (v.verdict, v.n, v.ci, v.excluded, v.margin, v.higher_is_better) == (INCONCLUSIVE, 0, None, 3, 0.1, False)
    assert math.isnan(v.ratio) and v.p_difference is None and v.p_equivalence is None
    assert v.text == "inconclusive (0 trials)"


def _rates(effect: float, n: int, sd: float, reps: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts = {FASTER: 0, SLOWER: 0, EQUIVALENT: 0, INCONCLUSIVE: 0}
    for _ in range(reps):
        counts[judge(np.exp(rng.normal(math.log(effect), sd, n)), higher_is_better=False).verdict] += 1
    return {k: c / reps for k, c in counts.items()}


def test_no_difference_gives_a_false_verdict_at_most_one_time_in_twenty() -> None:
    # The bootstrap of the median it replaces said faster or slower 27% of the time at 3 trials.
    for n in (6, 10, 20):
        rates = _rates(1.0, n, sd=0.03, reps=4000, seed=n)
        assert rates[FASTER] + rates[SLOWER] <= 0.05 + 0.01, (n, rates)


def test_a_planted_five_percent_cost_is_called_slower_at_ten_trials() -> None:
    # sd 0.02 per trial's log ratio is what together mode shows on a quiet 2-core machine.
    rates = _rates(1.05, 10, sd=0.02, reps=2000, seed=7)
    assert rates[SLOWER] >= 0.95, rates
    assert rates[FASTER] == 0.0


def test_precision_stops_an_adaptive_run_only_with_enough_trials() -> None:
    tight = [1.01, 1.012, 1.011, 1.009, 1.01, 1.011]
    assert log_half_width(tight) < math.log1p(0.005)
    assert precision_reached(tight, 0.005)
    assert not precision_reached(tight[:5], 0.005)
    assert not precision_reached([1.0, 1.2, 0.9, 1.1, 1.05, 0.95], 0.005)
    assert log_half_width([1.0]) == math.inf
