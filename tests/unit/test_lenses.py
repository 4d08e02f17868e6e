"""The notes the build matrix puts under itself where two of its figures
tell different stories: instructions against time per cycle, and the verbs'
time inside the scripts against the main thread's whole CPU per cycle. On
synthetic typed records, read as the report reads them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from echomq_bench.records.files import Run
from echomq_bench.records.kinds.compare import CompareEntry, CompareRecord, Spread
from echomq_bench.records.kinds.counts import CountsBuild, CountsRecord
from echomq_bench.records.kinds.verbs import VerbFigures, VerbsBuild, VerbsRecord
from echomq_bench.records.verdicts import RatioVerdictEntry
from echomq_bench.report.lenses import count_notes, count_ratios, order_notes
from echomq_bench.report.matrix import matrix_frame, matrix_section
from echomq_bench.report.doc import Notes

REF = "redis7.0"


def _compare(builds: dict[str, tuple[float, tuple[float, float] | None, float]]) -> CompareRecord:
    """build -> (time ratio, its interval, median server µs per cycle); the reference at ratio 1 has no verdict."""
    entries = {}
    for name, (ratio, ci, us) in builds.items():
        verdicts = {} if name == REF else {"server_us": RatioVerdictEntry(verdict="slower", ratio=ratio, ci=ci, n=16)}
        entries[name] = CompareEntry(baseline=REF, server_us_per_cycle=Spread(median=us, min=us, max=us),
                                     verdicts=verdicts)
    return CompareRecord(baseline=REF, trials=16, builds=entries)


def _counts(per_build: dict[str, tuple[float, float]], skipped: str | None = None) -> CountsRecord:
    """build -> (claim, complete) instructions per call."""
    return CountsRecord(cycle=("claim", "complete"), skipped=skipped, builds=tuple(
        CountsBuild(build=name, settings={"calls": 100},
                    figures={"claim": {"instructions": claim, "commands": {}},
                             "complete": {"instructions": complete, "commands": {}}})
        for name, (claim, complete) in per_build.items()))


def _verbs(per_build: dict[str, tuple[float, float]]) -> VerbsRecord:
    """build -> (claim, complete) server µs."""
    return VerbsRecord(cases=("claim", "complete"), labels={"claim": "claim", "complete": "complete"}, builds=tuple(
        VerbsBuild(build=name, verbs={"claim": VerbFigures(server_us=claim),
                                      "complete": VerbFigures(server_us=complete)})
        for name, (claim, complete) in per_build.items()))


def test_same_instructions_in_more_time_is_named_as_memory_or_the_allocator() -> None:
    compare = _compare({REF: (1.0, None, 20.0), "redis6.2": (1.25, (1.22, 1.28), 25.0)})
    counts = _counts({REF: (98_000, 46_000), "redis6.2": (98_500, 46_200)})
    assert count_ratios(compare, counts)["redis6.2"] == (144_700 / 144_000, REF)
    (note,) = count_notes(compare, counts)
    assert note.startswith("redis6.2 runs 1.005× redis7.0's instructions per cycle but takes 1.25× its server time "
                           "(95% CI 1.22–1.28): same instructions, more time: the difference is in memory or the "
                           "allocator")


def test_a_count_ratio_inside_the_time_interval_says_nothing() -> None:
    compare = _compare({REF: (1.0, None, 20.0), "valkey8.0": (0.96, (0.95, 0.97), 19.2)})
    assert count_notes(compare, _counts({REF: (100_000, 50_000), "valkey8.0": (96_000, 48_000)})) == []


def test_more_time_than_more_instructions_explain_and_less_time_than_fewer_do() -> None:
    compare = _compare({REF: (1.0, None, 20.0), "valkey9.1": (1.30, (1.28, 1.32), 26.0),
                        "valkey8.1": (0.70, (0.69, 0.71), 14.0)})
    counts = _counts({REF: (100_000, 50_000), "valkey9.1": (105_000, 52_500), "valkey8.1": (90_000, 45_000)})
    more, fewer = count_notes(compare, counts)
    assert more.startswith("valkey9.1 runs 1.050× ") and "more time than its instructions account for" in more
    assert fewer.startswith("valkey8.1 runs 0.900× ") and "less time than its instructions account for" in fewer


def test_no_note_without_a_count_of_the_build_or_of_its_reference() -> None:
    compare = _compare({REF: (1.0, None, 20.0), "redis8.2": (1.30, (1.28, 1.32), 26.0)})
    assert count_notes(compare, _counts({"redis8.2": (100_000, 50_000)})) == []
    assert count_notes(compare, _counts({REF: (100_000, 50_000)})) == []


def test_a_pair_ranked_in_opposite_orders_is_named_with_which_figure_answers() -> None:
    # As on a real run: the verbs put Redis 6.2's claim and complete below 7.0's, the matrix its cycle above.
    compare = _compare({REF: (1.0, None, 20.0), "redis6.2": (1.25, (1.22, 1.28), 25.1)})
    (note,) = order_notes(compare, _verbs({REF: (3.4, 4.0), "redis6.2": (3.1, 3.8)}))
    assert "rank two builds in opposite orders: redis7.0 against redis6.2 (claim + complete 7.4 against 6.9 µs " \
           "inside the scripts; 20.0 against 25.1 µs of main-thread CPU per cycle)" in note
    assert "For which build to run, read the per-cycle figure: it is what the server spends." in note


def test_pairs_that_agree_or_differ_within_the_margin_are_not_named() -> None:
    compare = _compare({REF: (1.0, None, 20.0), "redis6.2": (1.25, (1.22, 1.28), 25.1),
                        "valkey8.0": (1.01, (1.0, 1.02), 20.2)})
    # redis6.2 costlier on both; valkey8.0 cheaper inside the scripts but within 2% per cycle.
    verbs = _verbs({REF: (3.4, 4.0), "redis6.2": (3.6, 4.2), "valkey8.0": (3.0, 3.5)})
    assert order_notes(compare, verbs) == []


def test_a_pair_whose_trials_overlap_is_not_ranked() -> None:
    # A quick run's two trials: medians far apart, ranges across each other.
    compare = _compare({REF: (1.0, None, 19.1), "redis6.2": (1.25, None, 29.5)})
    wide = {REF: Spread(median=19.1, min=1.4, max=36.7), "redis6.2": Spread(median=29.5, min=18.7, max=40.4)}
    compare = replace(compare, builds={n: replace(e, server_us_per_cycle=wide[n]) for n, e in compare.builds.items()})
    assert order_notes(compare, _verbs({REF: (50.2, 38.2), "redis6.2": (41.0, 15.4)})) == []


def _run(kind: str, summary: dict[str, Any]) -> Run:
    return Run(path=Path(kind), meta={"servers": []}, summary={"kind": kind, **summary})


def test_the_matrix_sets_instructions_and_their_ratio_beside_the_time_ratio() -> None:
    compare = _compare({REF: (1.0, None, 20.0), "redis6.2": (1.25, (1.22, 1.28), 25.1)})
    runs = {"verbs": _run("verbs", _verbs({REF: (3.4, 4.0), "redis6.2": (3.1, 3.8)}).to_record()),
            "counts": _run("counts", _counts({REF: (98_000, 46_000), "redis6.2": (98_500, 46_200)}).to_record()),
            "compare": _run("compare", compare.to_record())}
    frame, _ = matrix_frame(runs)
    rows = frame.set_index("build")
    assert rows.loc[REF, "instructions/cycle"] == "144,000" and rows.loc["redis6.2", "instructions/cycle"] == "144,700"
    assert rows.loc[REF, "instructions ratio to redis7.0"] == "1 (the baseline)"
    assert rows.loc["redis6.2", "instructions ratio to redis7.0"] == "1.005×"
    notes = [line for b in matrix_section(runs, Path(".")) if isinstance(b, Notes) for line in b.lines]
    assert any(line.startswith("redis6.2 runs 1.005× redis7.0's instructions") for line in notes)
    assert any("in opposite orders: redis7.0 against redis6.2" in line for line in notes)


def test_without_valgrind_the_matrix_says_so_in_one_line_and_shows_no_count_columns() -> None:
    compare = _compare({REF: (1.0, None, 20.0), "redis6.2": (1.25, (1.22, 1.28), 25.1)})
    why = "valgrind is not installed; instruction counts run the server under callgrind: apt-get install valgrind"
    runs = {"counts": _run("counts", _counts({}, skipped=why).to_record()),
            "compare": _run("compare", compare.to_record())}
    frame, _ = matrix_frame(runs)
    assert not [c for c in frame.columns if c.startswith("instructions")]
    notes = [line for b in matrix_section(runs, Path(".")) if isinstance(b, Notes) for line in b.lines]
    assert [line for line in notes if "not counted" in line] == [f"Instructions not counted: {why}."]


def test_a_cycle_count_is_kept_in_the_history_under_its_own_name_not_the_gate_s() -> None:
    from echomq_bench.records.headlines import headlines
    from echomq_bench.records.record import Record

    summary = _counts({REF: (98_000, 46_000), "redis6.2": (98_500, 46_200)}).to_record()
    kept = [(h.build, h.metric, h.value) for h in headlines(Record(kind="counts", summary=summary))]
    assert kept == [(REF, "counts.cycle.instructions", 144_000.0), ("redis6.2", "counts.cycle.instructions", 144_700.0)]
