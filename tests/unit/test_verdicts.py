"""The verdict rule on ratios whose answer is known: hand-computed intervals, and simulated
runs with a planted effect and a run-to-run shift."""

from __future__ import annotations

import math

import numpy as np
import pytest

from echomq_bench.measurement.runspread import estimate
from echomq_bench.measurement.verdicts import (EQUIVALENT, FASTER, INCONCLUSIVE, MIN_TRIALS, SLOWER, UNSTABLE, judge,
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


# The unit that varies is the run: each run of a build comparison carries its own shift (the
# machine's minutes, the builds beside it), and its trials only see their own noise around it.
# These plant that shift; an interval from one run's trials alone fails them.
RUN_SD, TRIAL_SD, TRIALS = 0.02, 0.008, 16


def _verdicts(effect: float, reps: int, seed: int, two_level: bool) -> dict[str, float]:
    """Share of each verdict over `reps` runs, each judged with the spread of the ten runs before it
    (two-level) or with its own trials only."""
    rng = np.random.default_rng(seed)

    def one_run() -> tuple[list[float], tuple[float, float]]:
        logs = math.log(effect) + rng.normal(0.0, RUN_SD) + rng.normal(0.0, TRIAL_SD, TRIALS)
        return list(np.exp(logs)), (float(np.mean(logs)), float(np.std(logs, ddof=1) / math.sqrt(TRIALS)))

    history = [one_run()[1] for _ in range(10)]
    counts = dict.fromkeys((FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE, UNSTABLE), 0)
    for _ in range(reps):
        ratios, summary = one_run()
        spread = estimate([*history[-10:], summary]) if two_level else None
        counts[judge(ratios, higher_is_better=False, spread=spread).verdict] += 1
        history.append(summary)
    return {k: c / reps for k, c in counts.items()}


def test_no_difference_between_runs_that_shift_gives_a_false_verdict_at_most_one_time_in_twenty() -> None:
    rates = _verdicts(1.0, reps=1500, seed=11, two_level=True)
    assert rates[FASTER] + rates[SLOWER] <= 0.05 + 0.015, rates
    # The same runs judged on their own trials: the shift reads as a difference most of the time.
    alone = _verdicts(1.0, reps=1500, seed=11, two_level=False)
    assert alone[FASTER] + alone[SLOWER] > 0.3, alone


def test_a_planted_eight_percent_cost_is_still_called_slower_across_shifting_runs() -> None:
    # Four run shifts' SDs of effect: the between-run part widens the interval, it must not hide this.
    rates = _verdicts(1.08, reps=1500, seed=7, two_level=True)
    assert rates[SLOWER] >= 0.8, rates
    assert rates[FASTER] == 0.0


def test_precision_stops_an_adaptive_run_only_with_enough_trials() -> None:
    tight = [1.01, 1.012, 1.011, 1.009, 1.01, 1.011]
    assert log_half_width(tight) < math.log1p(0.005)
    assert precision_reached(tight, 0.005)
    assert not precision_reached(tight[:5], 0.005)
    assert not precision_reached([1.0, 1.2, 0.9, 1.1, 1.05, 0.95], 0.005)
    assert log_half_width([1.0]) == math.inf
