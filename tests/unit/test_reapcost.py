"""Reap and promote cost curves without a server: the id blocks they fill
with, and the command line's refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from echomq_bench.load.bulk import id_block
from echomq_bench.cli import main
from echomq_bench.reapcost import VERBS, Curve, CurveSettings, Drain, Point, run_record


def test_id_block_is_distinct_ordered_and_well_formed() -> None:
    from echomq.ids import parse_id

    a, b = id_block(5_000), id_block(3)
    assert a == sorted(a) and len(set(a)) == 5_000 and b[0] > a[-1]
    for job_id in (a[0], a[-1], b[0]):
        assert parse_id(job_id).kind == "JOB"


@pytest.mark.parametrize("bad", [["--caps", "0"], ["--caps", "200000"], ["--sizes", "1k"],
                                 ["--verbs", "claim"], ["--repeats", "0"]])
def test_cli_refuses_bad_options(bad: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["reapcost", "--server", "redis", "--out", str(tmp_path / "r"), *bad])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code == 2
    assert "error" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- the printed record

SIZES, CAPS = (1_000, 100_000), (10, 100)


def _curve(form: str, per_job_us: int) -> Curve:
    """reap and promote at two sizes and two caps: a call costs 10 µs plus `per_job_us` per job it moves
    (promote one µs more per job), the same at either M but for 1 µs more at the larger."""
    settings = CurveSettings(sizes=SIZES, caps=CAPS, repeats=3, orphans=1_000, drain_size=100_000,
                             cadences_ms=(100, 1_000), ratio_repeats=3)
    points = [Point(verb, m, cap, k, [10 + (per_job_us + (verb == "promote")) * min(k, cap) + (m > 1_000)] * 3,
                    [50.0] * 3)
              for verb in VERBS for m in SIZES for cap in CAPS for k in settings.ks(cap)]
    drains = [Drain(verb, cap, 1_000, 100_000, calls=1_000 // cap, wall_ms=400.0 / cap, server_ms=30.0,
                    max_call_us=12 * cap) for verb in VERBS for cap in CAPS]
    pairs = {verb: [(1_000, 1_050), (1_000, 1_000), (1_000, 1_100)] for verb in VERBS}
    return Curve("redis7.0", "redis 7.0.15", settings, points, drains, pairs, wall_s=2.0, server_main_cpu_s=1.0,
                 client_cpu_s=0.5, form=form)


def _rows(lines: list[str], caption: str) -> list[list[str]]:
    """The rows of the table under `caption`, each split into its cells."""
    start = next(i for i, line in enumerate(lines) if line.startswith(caption))
    head = next(i for i in range(start, len(lines)) if lines[i].startswith("-----"))
    end = next((i for i in range(head, len(lines)) if not lines[i]), len(lines))
    return [re.split(r"\s{2,}", line.strip()) for line in lines[head + 1:end]]


def test_the_printed_record_shows_both_verbs_both_forms_the_fit_and_the_drain(tmp_path: Path) -> None:
    from echomq_bench.records.record import Record
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    curves = [_curve("bare", 4), _curve("rows", 5)]
    write_record(tmp_path, Record(kind="reapcost", summary=run_record(curves).to_record(), meta={"settings": {}},
                                  tables={"reapcost": [r for c in curves for r in (*c.tidy_rows(), *c.ratio_rows())],
                                          "drain": [r for c in curves for r in c.drain_rows()]}))
    text = record_text(tmp_path)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100, text
    flat = " ".join(line.strip() for line in lines)
    # The answer reads reap with job rows at the largest M: 10 + 5 x 100 + 1 µs.
    assert "one reap call blocks redis 7.0.15 for 0.51 ms at M = 100,000 live" in flat
    # One full call (and the empty one) at each M and cap, per verb and form: 10 µs + 4 or 5 a job, +1 at 100k.
    reap = _rows(lines, "reap: server µs of one call, median of 3, by M live entries")
    assert ["redis7.0", "bare", "100", "100", "410", "411"] in reap
    assert ["redis7.0", "with job rows", "100", "100", "510", "511"] in reap
    assert ["redis7.0", "with job rows", "100", "0", "10", "11"] in reap
    assert ["redis7.0", "with job rows", "10", "10", "60", "61"] in reap and len(reap) == 6
    promote = _rows(lines, "promote: server µs of one call, median of 3, by M live entries")
    assert ["redis7.0", "with job rows", "100", "100", "610", "611"] in promote
    # The fit (µs per job moved), the ratio of the side-by-side pairs, its quartiles and the 2x target.
    fits = {(r[1], r[2]): r[3:] for r in _rows(lines, "Cost against M: one call of 100 at M=100k over the same")}
    assert set(fits) == {(f, v) for f in ("bare", "with job rows") for v in VERBS}
    assert fits[("bare", "reap")][1:] == ["4.00", "+0.15", "1.05x", "1.05 [1.00-1.10]", "1.10x", "ok"]
    assert fits[("with job rows", "promote")][1] == "6.00"
    assert "a cost linear in M gives 100x" in flat
    # The drain: calls, the longest call, back to back, and one call per tick (calls - 1 ticks + the calls).
    drains = _rows(lines, "Drain of a mass crash: K=1,000 at once beside M=100,000 live entries")
    assert ["redis7.0", "with job rows", "reap", "100", "10", "1,200", "4 ms", "905 ms", "9.01 s"] in drains
    assert ["redis7.0", "bare", "promote", "10", "100", "120", "40 ms", "9.91 s", "1.65 min"] in drains
    assert "redis7.0 (with job rows) server main thread 50% busy, client 25%" in flat


def test_the_record_reads_back_as_it_was_built_and_its_headlines_read_the_typed_entries() -> None:
    from echomq_bench.records.kinds.reapcost import ReapcostRecord, headlines
    from echomq_bench.records.record import Record

    record = run_record([_curve("bare", 4), _curve("rows", 5)])
    assert ReapcostRecord.from_record(record.to_record()) == record
    assert [(b.form, b.form_label) for b in record.builds] == [("bare", "bare"), ("rows", "with job rows")]
    # Both forms' full calls side by side: reap at cap 100 and the larger M, 411 µs bare and 511 with rows.
    row = next(r for r in record.side_by_side if (r.verb, r.M, r.cap) == ("reap", 100_000, 100))
    assert (row.bare_us, row.rows_us, row.rows_over_bare) == (411.0, 511.0, round(511 / 411, 3))
    assert record.reap_ratio_target_met == {"bare": True, "rows": True}
    figures = {h.metric: h.value for h in headlines(Record(kind="reapcost", summary=record.to_record()))
               if h.build == "redis7.0"}
    assert figures["reapcost.reap.rows.call_us_cap100"] == 511.0
    assert figures["reapcost.reap.bare.us_per_job"] == 4.0
    assert figures["reapcost.promote.rows.ratio_largest_to_smallest_M"] == 1.05


def test_the_sample_from_before_the_forms_prints_as_the_bare_form_alone(tmp_path: Path) -> None:
    """The committed reapcost sample was measured before the with-job-rows form: its record names
    the bare form alone, and it prints as that form, promote beside reap. Printed from a copy:
    printing draws its charts beside the record, and the repository's sample must stay as committed."""
    import shutil

    from echomq_bench.records.kinds.reapcost import ReapcostRecord
    from echomq_bench.records.record import read_record
    from echomq_bench.report import record_text
    from tests.helpers import ROOT

    sample = tmp_path / "reapcost"
    shutil.copytree(ROOT / "results" / "sample" / "reapcost", sample)
    assert set(ReapcostRecord.from_record(read_record(sample).summary).forms) == {"bare"}
    lines = record_text(sample).splitlines()
    assert max(map(len, lines)) <= 100
    assert "bare (sorted-set members only, with no job rows; this run was made before the with-job-rows " \
           "form was measured)" in " ".join(line.strip() for line in lines)
    reap = _rows(lines, "reap: server µs of one call, median of 5, by M live entries")
    assert ["redis", "bare", "100", "100", "759", "732", "712", "693"] in reap
    assert ["valkey", "bare", "10,000", "10,000", "41,353", "42,306", "44,033", "42,717"] in reap
    assert _rows(lines, "promote: server µs of one call")[0][:2] == ["redis", "bare"]
    assert not any("with job rows" in line for line in lines)


def test_a_record_from_before_the_forms_is_refused_with_what_to_do(tmp_path: Path) -> None:
    import json
    import shutil

    from echomq_bench.records.files import load
    from echomq_bench.records.record import ResultsError, read_record
    from tests.helpers import ROOT

    old = tmp_path / "reapcost"
    shutil.copytree(ROOT / "results" / "sample" / "reapcost", old)
    summary = json.loads((old / "summary.json").read_text())
    (old / "summary.json").write_text(json.dumps({**summary, "schema": 1}))
    for read in (read_record, load):
        with pytest.raises(ResultsError, match="a reapcost record of schema 1 is older than this version reads "
                                               r"\(schema 2 on\); run `echomq-bench reapcost` again"):
            read(old)


def test_the_main_job_fills_a_server_reached_by_url_with_at_most_its_cap_of_live_leases() -> None:
    from echomq_bench.commands.run import PLANS, USERS_SERVER_MOST_LIVE, reap_settings
    from echomq_bench.servers import parse_server_spec

    plan = PLANS["default"]
    assert max(plan.reap.sizes) > USERS_SERVER_MOST_LIVE, "the default fills its own servers beyond the cap"
    own = [parse_server_spec("redis7.0"), parse_server_spec("valkey8.0")]
    assert reap_settings(own, plan) == (plan.reap, None)
    capped, note = reap_settings([parse_server_spec("redis://:pw@127.0.0.1:6379/2")], plan)
    assert max(capped.sizes) == USERS_SERVER_MOST_LIVE and min(capped.sizes) == min(plan.reap.sizes)
    assert capped.caps == plan.reap.caps and capped.forms == plan.reap.forms and capped.orphans == plan.reap.orphans
    assert note is not None and f"at most {USERS_SERVER_MOST_LIVE:,} live leases" in note and "pw" not in note
    # Beside a server of its own, the builds are filled alike, so they stay comparable.
    mixed, _ = reap_settings([*own, parse_server_spec("redis://127.0.0.1:6379")], plan)
    assert mixed == capped
    # The quick form stays under the cap already: nothing to say.
    assert reap_settings([parse_server_spec("redis://127.0.0.1:6379")], PLANS["quick"]) == (PLANS["quick"].reap, None)
