"""Whether compare's interleave modes agree: the overlap rule on constructed
intervals, and the report's agreement table over constructed compare records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from echomq_bench.measurement.agreement import (AGREE, DISAGREE, UNDECIDED, ModeEstimate, agreement, estimate_of,
                                                overlaps, rows, text_table)
from echomq_bench.measurement.verdicts import judge
from echomq_bench.report import build_report
from tests.helpers import ROOT

METHOD = "t-interval on log ratios, TOST for equivalence"
SAMPLE_COMPARE = ROOT / "results" / "sample" / "compare"


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


# -- the report's table, from compare records made by hand --------------------------------------


def _record(folder: Path, mode: str, ratio: float, ci: list[float] | None, n: int = 10, excluded: int = 0,
            version: str | None = None) -> None:
    """The committed compare sample, as if made in `mode` with this headline for valkey."""
    shutil.copytree(SAMPLE_COMPARE, folder)
    summary: dict[str, Any] = json.loads((folder / "summary.json").read_text())
    summary["interleave"] = mode
    valkey = summary["builds"]["valkey"]
    valkey["verdicts"]["server_us"].update(ratio=ratio, ci=ci, n=n, excluded=excluded)
    if version:
        valkey["version"] = version
    (folder / "summary.json").write_text(json.dumps(summary))


def test_report_renders_the_agreement_table_of_a_folder_of_modes(tmp_path: Path) -> None:
    _record(tmp_path / "modes" / "together", "together", 0.9336181599908451, [0.9224989298347679, 0.9448714144533634])
    _record(tmp_path / "modes" / "slot", "slot", 0.9341, [0.9163, 0.9522])
    _record(tmp_path / "modes" / "trial", "trial", 0.9900, [0.9700, 1.0100], excluded=2, n=8)
    report = build_report([tmp_path / "modes"], tmp_path / "out")
    text, page = report.md.read_text(), report.html.read_text()
    head = "| mode | n trials | server µs/cycle, valkey / redis | 95% CI | method | excluded trials | verdict | run |"
    assert head in text
    assert f"| together | 10 | 0.934 | 0.922, 0.945 | {METHOD} | 0 | faster | together |" in text
    assert f"| slot | 10 | 0.934 | 0.916, 0.952 | {METHOD} | 0 | faster | slot |" in text
    assert f"| trial | 8 | 0.990 | 0.970, 1.010 | {METHOD} | 2 | faster | trial |" in text
    line = "The modes disagree: the 95% intervals of together and trial, and of slot and trial, do not overlap."
    assert line in text and line in page and 'id="agreement-valkey"' in page
    # The compare section beside it, and the first screen's answer, are the record made in compare's default mode.
    assert "Trials: 10 per build, all builds at once" in text
    assert "valkey 8.0.1 costs 0.93× redis 7.0.15's server time per cycle (95% CI 0.92–0.94, n = 10): faster" in text
    assert "Built from slot, together, trial." in text


def test_records_of_one_mode_or_of_other_builds_make_no_agreement_table(tmp_path: Path) -> None:
    _record(tmp_path / "one" / "a", "together", 0.93, [0.92, 0.94])
    _record(tmp_path / "one" / "b", "together", 0.94, [0.93, 0.95])
    _record(tmp_path / "other" / "a", "together", 0.93, [0.92, 0.94])
    _record(tmp_path / "other" / "b", "trial", 0.94, [0.93, 0.95], version="valkey 8.1.0")
    for folder in ("one", "other"):
        report = build_report([tmp_path / folder], tmp_path / f"out-{folder}")
        assert "Do the interleave modes agree?" not in report.md.read_text()
