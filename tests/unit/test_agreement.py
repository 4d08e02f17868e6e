"""Whether compare's interleave modes agree: the overlap rule on constructed intervals."""

from __future__ import annotations


import pytest

from echomq_bench.measurement.agreement import (AGREE, DISAGREE, UNDECIDED, ModeEstimate, agreement, estimate_of,
                                                overlaps, rows, text_table)
from echomq_bench.measurement.verdicts import judge

METHOD = "t-interval on log ratios, TOST for equivalence"


def _mode(mode: str, ratio: float, ci: tuple[float, float] | None, n: int = 10, excluded: int = 0,
          verdict: str = "faster") -> ModeEstimate:
    return ModeEstimate(mode, ratio, ci, n, excluded, METHOD, verdict)


def test_intervals_that_all_overlap_agree() -> None:
    found = agreement([_mode("together", 0.933, (0.912, 0.954)), _mode("slot", 0.934, (0.916, 0.952)),
                       _mode("trial", 0.944, (0.919, 0.970))])
    assert (found.status, found.apart, found.short) == (AGREE, (), ())
    assert found.line == "The modes agree: every pair of 95% intervals overlaps (together, slot, trial)."


def test_two_intervals_apart_disagree_and_are_named() -> None:
    found = agreement([_mode("together", 0.933, (0.912, 0.954)), _mode("slot", 0.960, (0.940, 0.980)),
                       _mode("trial", 0.990, (0.970, 1.010))])
    assert found.status == DISAGREE and found.apart == (("together", "trial"),)
    assert found.line == "The modes disagree: the 95% intervals of together and trial do not overlap."


def test_one_inconclusive_mode_leaves_agreement_undecided() -> None:
    # Two trials give a t-interval wide enough to overlap anything: it cannot show agreement.
    short = agreement([_mode("together", 0.933, (0.912, 0.954)),
                       _mode("slot", 0.95, (0.60, 1.50), n=2, verdict="inconclusive (2 trials)")])
    assert (short.status, short.apart, short.short) == (UNDECIDED, (), ("slot",))
    assert short.line == ("Agreement undecided: no two 95% intervals are apart, but slot has 2 counted trials; "
                          "a mode needs at least 6 counted trials to test agreement.")
    # One counted trial gives no interval at all.
    none = agreement([_mode("together", 0.933, (0.912, 0.954)),
                      _mode("trial", 0.95, None, n=1, excluded=1, verdict="inconclusive (1 trials)")])
    assert none.status == UNDECIDED and none.short == ("trial",)
    assert "but trial has no interval (1 counted trial);" in none.line


def test_intervals_apart_disagree_even_when_a_mode_is_short() -> None:
    found = agreement([_mode("together", 0.933, (0.912, 0.954)), _mode("slot", 1.10, (1.05, 1.16), n=3),
                       _mode("trial", 0.95, None, n=1)])
    assert (found.status, found.apart, found.short) == (DISAGREE, (("together", "slot"),), ("slot", "trial"))


def test_an_inconclusive_verdict_from_enough_trials_still_tests_agreement() -> None:
    # Enough trials, an interval straddling the margin: no verdict on the builds, but a fine interval to compare.
    straddling = judge([0.95, 1.04, 0.97, 1.05, 0.94, 1.03], higher_is_better=False)
    assert straddling.text == "inconclusive" and straddling.ci is not None
    found = agreement([estimate_of("together", straddling), _mode("trial", 1.0, (0.98, 1.02))])
    assert found.status == AGREE


def test_intervals_that_touch_at_an_end_overlap() -> None:
    assert overlaps((0.90, 0.95), (0.95, 1.00)) and overlaps((0.95, 1.00), (0.90, 0.95))
    assert not overlaps((0.90, 0.9499), (0.95, 1.00))
    assert overlaps((0.90, 1.10), (0.99, 1.01))  # one inside the other


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"at least two modes, got 1: \['together'\]"):
        agreement([_mode("together", 0.93, (0.91, 0.95))])
    with pytest.raises(ValueError, match=r"a distinct name per mode, got \['slot', 'slot'\]"):
        agreement([_mode("slot", 0.93, (0.91, 0.95)), _mode("slot", 0.94, (0.92, 0.96))])
    with pytest.raises(ValueError, match=r"trial: interval \(0\.96, 0\.91\) has its lower end above its upper end"):
        _mode("trial", 0.93, (0.96, 0.91))


def test_rows_and_text_table_print_the_verdict_label_figures() -> None:
    estimates = [_mode("together", 0.93361816, (0.92249893, 0.94487141)),
                 _mode("trial", 0.95, None, n=1, excluded=1, verdict="inconclusive (1 trials)")]
    assert rows(estimates) == [
        {"mode": "together", "n trials": 10, "ratio": "0.934", "95% CI": "0.922, 0.945", "method": METHOD,
         "excluded trials": 0, "verdict": "faster"},
        {"mode": "trial", "n trials": 1, "ratio": "0.950", "95% CI": "no interval", "method": METHOD,
         "excluded trials": 1, "verdict": "inconclusive (1 trials)"}]
    assert text_table(estimates).splitlines() == [
        f"mode      n trials  ratio  95% CI        method{' ' * 42}excluded trials  verdict",
        f"together  10        0.934  0.922, 0.945  {METHOD}  0                faster",
        f"trial     1         0.950  no interval   {METHOD}  1                inconclusive (1 trials)",
        agreement(estimates).line]
