"""The rule both gates judge a verb by (measurement.regression), on made-up
figures: flagged over the allowance, confirmed by a second measurement,
missing from the baseline, and the status words each gate prints."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable

import pytest

from echomq_bench.measurement.regression import RegressionVerdict
from echomq_bench.records.kinds.counts import CountVerdictEntry
from echomq_bench.records.kinds.gate import GateVerdictEntry

Make = Callable[..., RegressionVerdict]


def timing(change: float | None, allowed: float | None = 0.20, **kw: Any) -> GateVerdictEntry:
    base = None if change is None else 10.0
    return GateVerdictEntry(case="claim", reference="noop_script", server_us=20.0, client_us=60.0, base_ratio=base,
                            now_ratio=10.0 * (1 + (change or 0.0)), change=change, allowed=allowed, **kw)


def count(change: float | None, allowed: float | None = 0.01, **kw: Any) -> CountVerdictEntry:
    base = None if change is None else 100_000.0
    return CountVerdictEntry(verb="claim", base=base, now=100_000.0 * (1 + (change or 0.0)), change=change,
                             allowed=allowed, **kw)


# Each gate: how it is made, its allowance, and its words for worse and better.
GATES = [pytest.param(timing, 0.20, "SLOWER", "faster", id="timing"),
         pytest.param(count, 0.01, "COSTLIER", "cheaper", id="count")]


@pytest.mark.parametrize("make, allowed, worse, better", GATES)
def test_a_change_within_the_allowance_is_ok_and_beyond_it_the_other_way_is_better(
        make: Make, allowed: float, worse: str, better: str) -> None:
    within = make(allowed * 0.9, allowed)
    assert (within.flagged, within.regressed, within.status) == (False, False, "ok")
    improved = make(-allowed * 1.5, allowed)
    assert (improved.flagged, improved.regressed, improved.status) == (False, False, better)


@pytest.mark.parametrize("make, allowed, worse, better", GATES)
def test_a_flag_is_a_regression_unless_a_second_measurement_clears_it(
        make: Make, allowed: float, worse: str, better: str) -> None:
    flagged = make(allowed * 2, allowed)
    # Not measured again (--no-confirm): the one flag stands.
    assert (flagged.flagged, flagged.confirmed, flagged.regressed, flagged.status) == (True, None, True, worse)
    again = flagged.confirm(make(allowed * 1.5, allowed))
    assert (again.confirmed, again.regressed, again.status) == (True, True, worse)
    cleared = flagged.confirm(make(allowed * 0.5, allowed))
    assert (cleared.confirmed, cleared.regressed, cleared.status) == (False, False, "ok (not confirmed)")


@pytest.mark.parametrize("make, allowed, worse, better", GATES)
def test_an_unflagged_verb_is_left_as_it_was_by_a_second_measurement(
        make: Make, allowed: float, worse: str, better: str) -> None:
    quiet = make(allowed * 0.5, allowed)
    assert quiet.confirm(make(allowed * 3, allowed)) == quiet


@pytest.mark.parametrize("make, allowed, worse, better", GATES)
def test_a_verb_missing_from_the_baseline_fails_whatever_else_it_says(
        make: Make, allowed: float, worse: str, better: str) -> None:
    missing = make(None, None, missing=True)
    assert (missing.flagged, missing.regressed, missing.status) == (False, True, "MISSING from the baseline")
    assert make(None, None, missing=True, confirmed=False).regressed


def test_no_baseline_figure_and_none_missing_is_ok() -> None:
    # --update writing a first baseline: nothing to compare, and nothing that should have been there.
    for first in (timing(None, None), count(None, None)):
        assert (first.flagged, first.regressed, first.status) == (False, False, "ok")


def test_the_count_gate_keeps_the_confirming_runs_change() -> None:
    confirmed = count(0.03).confirm(count(0.025))
    assert (confirmed.confirmed, confirmed.again) == (True, 0.025)
    assert count(0.0).confirm(count(0.025)).again is None   # an unflagged verb is not counted again


def test_the_timing_gate_judges_its_script_ab_beside_the_cross_run_figure() -> None:
    ab = timing(0.0, ab_change=0.15, ab_allowed=0.10)
    assert (ab.flagged, ab.status) == (True, "SLOWER")
    assert timing(0.0, ab_change=-0.15, ab_allowed=0.10).status == "faster"
    # Another machine's cross-run figure is shown, not judged: only the A/B can fail it.
    assert timing(0.5, advisory=True).status == "ok (cross-run figure advisory: another machine)"
    assert timing(0.5, advisory=True, ab_change=0.15, ab_allowed=0.10).status == "SLOWER"
    assert timing(0.5, below_resolution=True).status == "ok (cross-run figure advisory: under 2 µs)"
    assert timing(0.05, noisy=True).status == "inconclusive (noise above tolerance)"


@pytest.mark.parametrize("verdict, entry", [(timing(0.3, confirmed=True, ab_change=0.2, ab_allowed=0.1),
                                             GateVerdictEntry),
                                            (count(0.03, grew="lua", grew_by=3_000.0, more_calls={"ZADD": 1.0}),
                                             CountVerdictEntry)], ids=["timing", "count"])
def test_a_verdict_is_written_under_its_records_keys_and_read_back_with_its_status(
        verdict: RegressionVerdict, entry: Any) -> None:
    written = verdict.to_record()
    assert set(written) == {f.name for f in fields(entry)} | {"status"} and written["status"] == verdict.status
    read = entry.from_record(written)
    assert (read.change, read.allowed, read.confirmed, read.missing, read.status) == (
        verdict.change, verdict.allowed, verdict.confirmed, verdict.missing, verdict.status)
