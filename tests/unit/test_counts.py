"""The instruction-count gate's parts that need no server: reading a callgrind dump, the
decision rule, binary identity, the deterministic ids and baselines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echomq_bench.counts.baseline import (MIN_PASSES, SCHEMA, CountBaselineError, baseline_data,
                                          count_baseline_path, load_count_baseline)
from echomq_bench.counts.callgrind import Window, command_name, read_dump
from echomq_bench.counts.identity import BinaryIdentity, gnu_build_id
from echomq_bench.counts.measure import CountRun, VerbCount
from echomq_bench.counts.verdict import FLOOR, allowance, judge, largest_growth
from echomq_bench.load.bulk import FixedIds

# A dump in callgrind's format as `callgrind_control -d` writes it with compressed names:
# call() calls the script entry, then, one level down (call'2), two commands and a helper.
DUMP = """version: 1
creator: callgrind-3.19.0
events: Ir
fn=(1) call
cfn=(2) evalShaCommand
calls=10 0
0 5000
fn=(3) call'2
0 40
cfn=(4) zpopminCommand
calls=10 0
0 700
cfn=(5) afterCommand
calls=20 0
0 60
cfn=(6) monotonicGetType
calls=20 0
0 30
cfn=(4)
calls=5 0
0 300
fn=(7) hsetCommand
0 90
fn=(3)
cfn=(7)
calls=10 0
0 400
summary: 5000
"""


def test_a_dump_gives_totals_and_each_command_the_dispatcher_called() -> None:
    window = read_dump(DUMP)
    # Recursion levels fold into call; a name given once is known by its number after.
    assert window.instructions == 5000
    assert window.commands == {"AFTER": (20, 60), "HSET": (10, 400), "ZPOPMIN": (15, 1000)}
    assert window.lua == 5000 - 1460


def test_only_commands_the_server_knows_count_as_commands() -> None:
    window = read_dump(DUMP, known=frozenset({"ZPOPMIN", "HSET"}))
    assert window.commands == {"HSET": (10, 400), "ZPOPMIN": (15, 1000)}
    assert window.lua == 5000 - 1400


def test_a_dump_without_totals_is_refused() -> None:
    from echomq_bench.counts.callgrind import CallgrindError

    with pytest.raises(CallgrindError, match="no summary or totals"):
        read_dump("events: Ir\nfn=(1) call\n")


def test_command_names() -> None:
    assert [command_name(f) for f in ("zpopminCommand", "hsetCommand", "zremrangebyrankCommand", "call")] == [
        "ZPOPMIN", "HSET", "ZREMRANGEBYRANK", "call"]


def test_the_allowance_is_the_prediction_bound_with_a_floor() -> None:
    from scipy.stats import t

    # 10 runs of sd 0.3% of the mean: t(0.999, 9) x 0.3% x sqrt(1.1).
    assert allowance(100_000, 300, 10) == pytest.approx(float(t.ppf(0.999, 9)) * 0.003 * 1.1 ** 0.5)
    assert allowance(100_000, 300, 10) == pytest.approx(0.01356, abs=1e-4)
    # A spread of zero still leaves the floor.
    assert allowance(100_000, 0, 10) == FLOOR
    # Fewer runs, a wider bound for the same spread.
    assert allowance(100_000, 300, 5) > allowance(100_000, 300, 10)
    with pytest.raises(ValueError):
        allowance(100_000, 300, 1)


def _figure(instructions: float, **commands: float) -> dict:
    return {"instructions": instructions, "sd": instructions * 0.002,
            "commands": {k: {"calls": 1, "instructions": v} for k, v in commands.items()}}


def test_a_verb_over_its_allowance_is_flagged_and_names_the_part_that_grew() -> None:
    base = _figure(100_000, ZADD=5_000, HSET=3_000)
    same = judge("claim", _figure(100_300, ZADD=5_000, HSET=3_000), base, 10)
    assert (same.flagged, same.regressed, same.status, same.grew) == (False, False, "ok", "")
    lua_grew = judge("claim", _figure(102_000, ZADD=5_000, HSET=3_000), base, 10)
    assert (lua_grew.flagged, lua_grew.regressed, lua_grew.grew, lua_grew.grew_by) == (True, True, "lua", 2_000)
    zadd_grew = judge("claim", _figure(102_000, ZADD=6_900, HSET=3_100), base, 10)
    assert (zadd_grew.grew, zadd_grew.grew_by) == ("ZADD", 1_900)
    assert judge("claim", _figure(97_000), base, 10).status == "cheaper"


def test_an_unconfirmed_flag_is_not_a_regression_and_a_missing_verb_is() -> None:
    from dataclasses import replace

    flagged = judge("claim", _figure(102_000, ZADD=5_000), _figure(100_000, ZADD=5_000), 10)
    assert replace(flagged, confirmed=False).regressed is False
    assert replace(flagged, confirmed=False).status == "ok (not confirmed)"
    assert replace(flagged, confirmed=True).regressed is True
    missing = judge("claim", _figure(100_000), None, 10)
    assert (missing.regressed, missing.status) == (True, "MISSING from the baseline")


def test_largest_growth_counts_a_command_new_to_the_verb() -> None:
    assert largest_growth(_figure(100, ZADD=10), _figure(150, ZADD=10, HGET=45)) == ("HGET", 45)


def test_the_gnu_build_id_is_read_from_its_note() -> None:
    note = b"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00" + bytes(range(20))
    assert gnu_build_id(b"\x7fELF" + b"\x00" * 50 + note + b"tail") == bytes(range(20)).hex()
    assert gnu_build_id(b"\x7fELF no note here") == ""


def _identity(sha: str = "a" * 64, libc: str = "glibc 2.36") -> BinaryIdentity:
    return BinaryIdentity("/usr/bin/redis-check-rdb", "redis 7.0.15", sha, "b" * 40, libc)


def test_a_baseline_is_filed_under_the_binary_and_its_c_library() -> None:
    assert _identity().key != _identity(sha="c" * 64).key
    assert _identity().key != _identity(libc="glibc 2.41").key
    path = count_baseline_path(Path("/b"), _identity())
    assert path == Path("/b/counts") / f"count-redis-{_identity().key}.json"   # the product, not a build name
    assert count_baseline_path(Path("/b/one.json"), _identity()) == Path("/b/one.json")


def _run(instructions: float, binary: BinaryIdentity | None = None) -> CountRun:
    verb = VerbCount("claim", 1200, instructions, {"ZADD": (1.0, 5_000.0)})
    return CountRun("redis", binary or _identity(), {"claim": "f" * 40}, {"claim": verb}, "valgrind-3.19.0", 20.0)


def test_baseline_data_pools_runs_of_one_binary(tmp_path: Path) -> None:
    runs = [_run(100_000 + 100 * i) for i in range(MIN_PASSES)]
    data = baseline_data(runs, {"cpu_model": "x"}, {"commit": "abc"})
    claim = data["figures"]["claim"]
    assert (claim["instructions"], claim["min"], claim["max"], data["passes"]) == (100_200, 100_000, 100_400, 5)
    assert claim["sd"] == pytest.approx(158.11, abs=0.01)
    assert claim["commands"] == {"ZADD": {"calls": 1.0, "instructions": 5_000.0}}
    with pytest.raises(ValueError, match="at least 5"):
        baseline_data(runs[:4], {}, {})
    with pytest.raises(ValueError, match="one binary"):
        baseline_data(runs[:4] + [_run(1, _identity(sha="d" * 64))], {}, {})


def test_a_baseline_of_another_binary_is_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "count-redis.json"
    with pytest.raises(CountBaselineError, match="no count baseline for redis 7.0.15"):
        load_count_baseline(path, _identity())
    path.write_text("{not json")
    with pytest.raises(CountBaselineError, match="not a readable count baseline"):
        load_count_baseline(path, _identity())
    path.write_text(json.dumps({"schema": "echomq-gate-baseline/1", "figures": {}}))
    with pytest.raises(CountBaselineError, match="not a count baseline"):
        load_count_baseline(path, _identity())
    data = baseline_data([_run(100_000 + i) for i in range(MIN_PASSES)], {}, {})
    path.write_text(json.dumps(data))
    assert load_count_baseline(path, _identity())["schema"] == SCHEMA
    with pytest.raises(CountBaselineError, match="counts of another binary do not compare"):
        load_count_baseline(path, _identity(sha="e" * 64))


def test_fixed_ids_repeat_run_after_run_and_never_repeat_within_one() -> None:
    assert FixedIds()(5) == FixedIds()(5)
    # Three ids short of the end of a block of 62**4, so the second call carries into the next block.
    start = (10**15 // 62**4 + 1) * 62**4 - 3
    first, second = FixedIds(start), FixedIds(start)
    a = first(2) + first(62 ** 2)
    assert a == second(2) + second(62 ** 2)
    assert len(set(a)) == len(a) and a == sorted(a)
    assert a[0][:10] != a[-1][:10]


def test_a_window_per_call() -> None:
    count = VerbCount.of("claim", 100, Window(1_000_000, {"ZADD": (100, 50_000)}))
    assert (count.instructions, count.commands, count.lua) == (10_000, {"ZADD": (1.0, 500.0)}, 9_500)
    assert count.shares() == {"ZADD": 0.05, "lua": 0.95}


@pytest.mark.parametrize("extra, says", [
    (["--tolerance", "0.1"], "--tolerance is the timing gate's"),
    (["--rounds", "3"], "--rounds is the timing gate's"),
    (["--quick"], "--quick is the timing gate's"),
    (["--verbs", "claim,browse_5"], "browse_5 runs no script"),
    (["--passes", "5"], "--passes sets how many fresh servers --update pools"),
    (["--baseline", "history"], "--baseline history reads timing gates"),
    (["--server", "redis://127.0.0.1:1"], "must be a build or a binary this command starts"),
])
def test_the_count_gate_refuses_bad_input_before_starting_anything(
        extra: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from echomq_bench.cli import main

    out = tmp_path / "out"
    code = main(["gate", "--count", "instructions", "--out", str(out), *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert says in err and err.startswith("echomq-bench gate: error:")
    assert not out.exists()


def test_the_gate_counts_instructions_unless_told_to_time(capsys: pytest.CaptureFixture[str]) -> None:
    from echomq_bench.cli import build_parser

    assert build_parser(["gate"]).parse_args(["gate"]).count == "instructions"
    assert build_parser(["gate"]).parse_args(["gate", "--count", "time"]).count == "time"


@pytest.mark.parametrize("extra, says", [
    (["--passes", "5"], "--passes sets how many fresh server processes --update pools"),
    (["--update", "--server", "redis://127.0.0.1:1"], "a timing baseline pools passes on fresh server processes, so "
                                                      "it is written only from a server this command starts"),
])
def test_the_timing_gate_refuses_passes_it_cannot_take_before_starting_anything(
        extra: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from echomq_bench.cli import main

    out = tmp_path / "out"
    assert main(["gate", "--count", "time", "--out", str(out), *extra]) == 2
    assert says in capsys.readouterr().err
    assert not out.exists()


def test_a_verdict_names_each_command_the_script_now_calls_more_often() -> None:
    base = _figure(100_000, ZADD=5_000)
    now = _figure(113_000, ZADD=5_000, ZINTERCARD=5_500)
    verdict = judge("claim", now, base, 10)
    assert (verdict.grew, verdict.grew_by, dict(verdict.more_calls or {})) == ("lua", 7_500, {"ZINTERCARD": 1.0})
    assert verdict.named() == "lua +7,500 per call; calls ZINTERCARD +1 per call"
    assert verdict.to_record()["more_calls"] == {"ZINTERCARD": 1.0}


def test_the_count_gate_writes_its_typed_record_and_the_report_reads_it_back(tmp_path: Path) -> None:
    from echomq_bench.counts.gate import CountGateResult, counts_record
    from echomq_bench.records.kinds.counts import CountsRecord
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    base = _figure(100_000, ZADD=5_000)
    flagged = judge("claim", _figure(108_000, ZADD=5_000), base, 10)
    verdict = flagged.confirm(judge("claim", _figure(107_000, ZADD=5_000), base, 10))
    info = {"created_utc": "2026-12-01T05:00:00+00:00", "passes": 10, "git": {"commit": "2c720de9a1b2"},
            "recorded_on": {"cpu_model": "x"}}
    result = CountGateResult("redis", _identity(), Path("/b/counts/count-redis.json"), (_run(108_000), _run(107_000)),
                             (verdict,), baseline_info=info)
    record = counts_record([result], {"created_utc": "2026-12-03T10:00:00+00:00", "servers": []})
    build = record.summary["builds"][0]
    assert set(build) == {"build", "version", "binary", "baseline", "updated", "regressions", "runs", "wall_s",
                          "valgrind", "settings", "baseline_from", "verdicts", "figures"}
    assert (record.summary["passed"], build["regressions"], build["runs"], build["wall_s"]) == (
        False, ["claim"], 2, 40.0)
    assert build["baseline_from"] == {"created_utc": "2026-12-01T05:00:00+00:00", "passes": 10,
                                      "revision": "2c720de9a1", "recorded_on": "x"}
    [written] = build["verdicts"]
    assert (written["status"], written["confirmed"], written["again"], written["grew"]) == (
        "COSTLIER", True, 0.07, "lua")
    assert CountsRecord.from_record(record.summary).builds[0].verdicts[0].status == "COSTLIER"
    write_record(tmp_path, record)
    assert record_text(tmp_path).splitlines()[-1] == "COSTLIER on redis: claim"
