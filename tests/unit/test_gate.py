"""The regression gate without a server: the slowed copy it measures against,
its refusals, the committed baselines it compares with (in step with lua/),
and what a record says of the server processes a baseline pools."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from echomq_bench.cli import main
from echomq_bench.microbench.baseline import BaselineError, load_baseline, slowed_copy
from echomq_bench.microbench.runner import VERB_CASES
from echomq_bench.records.kinds.gate import GateVerdictEntry
from echomq._instrument import discover
from tests.helpers import ROOT

def test_slowed_copy_changes_only_the_named_script(tmp_path: Path) -> None:
    slowed = slowed_copy(tmp_path / "lua", "claim", 123)
    now, orig = discover(slowed), discover()
    assert set(now) == set(orig)
    changed = [v for v in now if now[v].text != orig[v].text]
    assert changed == ["claim"]
    assert "for i = 1, 123 do" in now["claim"].text


@pytest.mark.parametrize("bad", [
    ["--tolerance", "-1"], ["--tolerance", "abc"], ["--rounds", "0"], ["--verbs", "claim,nope"],
])
def test_cli_refuses_bad_options(bad: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["gate", "--server", "redis", "--baseline", str(tmp_path), *bad])
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_missing_or_broken_baseline_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "--count", "time", "--server", "redis", "--baseline", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no baseline at" in err and "--count time --update" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["gate", "--count", "time", "--server", "redis", "--baseline", str(broken)]) == 2
    assert "not a readable baseline" in capsys.readouterr().err
    with pytest.raises(BaselineError):
        load_baseline(tmp_path / "x.json")


def test_committed_baselines_cover_every_verb() -> None:
    folder = ROOT / "results" / "baselines"
    for build in ("redis", "valkey"):
        data = load_baseline(folder / f"gate-{build}.json")
        assert data["build"] == build
        assert set(data["figures"]) >= {c.name for c in VERB_CASES}
        assert set(data["scripts"]) == set(discover())
        # Every verb has a figure to compare; PING, a reference, can read 0 µs on every call it keeps.
        assert all(data["figures"][c.name]["server_ratio"] > 0 for c in VERB_CASES)


def test_a_round_whose_reference_reads_zero_microseconds_has_no_ratio() -> None:
    # commandstats counts whole µs: a short round of the no-op can read 0 on every call it keeps.
    from echomq_bench.microbench.figures import pooled_ratio

    num = [[4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0]]
    den = [[0.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0]]
    ratio, se = pooled_ratio(num, den, keep_num=1.0, keep_den=1.0)
    assert ratio == pytest.approx(16.0 / 6.0)   # pooled: 4 µs against the mean 1.5 µs of all twelve
    assert se > 0
    assert math.isnan(pooled_ratio([[4.0]], [[0.0]], bootstrap=False)[0])   # nothing to divide by: no figure, no crash


def _verdict(**kw: object) -> GateVerdictEntry:
    base = dict(case="claim", reference="noop_script", server_us=20.0, client_us=60.0, base_ratio=10.0,
                now_ratio=10.0, change=0.0, allowed=0.2)
    return GateVerdictEntry(**{**base, **kw})  # type: ignore[arg-type]


def test_a_verb_missing_from_the_baseline_fails() -> None:
    v = _verdict(base_ratio=None, change=None, allowed=None, missing=True)
    assert v.regressed and v.status == "MISSING from the baseline"


def test_another_machines_baseline_is_advisory_and_cannot_fail() -> None:
    v = _verdict(now_ratio=15.0, change=0.5, advisory=True)
    assert not v.flagged and not v.regressed
    assert v.status == "ok (cross-run figure advisory: another machine)"
    assert _verdict(now_ratio=15.0, change=0.5).regressed   # the same change on the same machine fails


def test_a_first_baseline_is_not_called_another_machines() -> None:
    # --update with no baseline yet: no figure to compare, and no other machine either.
    v = _verdict(base_ratio=None, change=None, allowed=None, advisory=True)
    assert v.status == "ok"


def test_the_ab_check_fails_on_another_machine_too() -> None:
    v = _verdict(advisory=True, ab_change=0.25, ab_allowed=0.10, confirmed=True)
    assert v.regressed and v.status == "SLOWER"
    assert not _verdict(advisory=True, ab_change=0.25, ab_allowed=0.10, confirmed=False).regressed


def test_noise_above_tolerance_is_inconclusive_not_a_pass() -> None:
    v = _verdict(change=0.05, noisy=True)
    assert v.inconclusive and not v.regressed
    assert v.status == "inconclusive (noise above tolerance)"
    assert not _verdict(change=0.5, noisy=True, confirmed=True).inconclusive   # a regression is still one


def test_baselines_are_found_per_machine_fingerprint(tmp_path: Path) -> None:
    from echomq_bench.microbench.baseline import baseline_path, fingerprint_id

    here = fingerprint_id({"cpu_model": "x", "cores": 2, "server_version": "redis 7.0.15", "allocator": "jemalloc"})
    assert here == fingerprint_id({"allocator": "jemalloc", "server_version": "redis 7.0.15", "cores": 2,
                                   "cpu_model": "x"})
    assert here != fingerprint_id({"cpu_model": "x", "cores": 4, "server_version": "redis 7.0.15",
                                   "allocator": "jemalloc"})
    assert baseline_path(tmp_path, "redis", here) == tmp_path / "gate-redis.json"          # none of its own yet
    assert baseline_path(tmp_path, "redis", here, writing=True) == tmp_path / here / "gate-redis.json"
    (tmp_path / here).mkdir()
    (tmp_path / here / "gate-redis.json").write_text("{}")
    assert baseline_path(tmp_path, "redis", here) == tmp_path / here / "gate-redis.json"
    assert baseline_path(tmp_path / "one.json", "redis", here) == tmp_path / "one.json"


# -- the pytest-benchmark route: the fingerprint in machine_info, and the warning across machines ----------


def test_a_run_fingerprint_keeps_the_machine_once_and_each_build_by_name() -> None:
    from echomq_bench.microbench.benchmark_machine import run_fingerprint

    machine = {"cpu_model": "Xeon", "cpu_flags_sha256": "fc7d", "cores": 2}
    got = run_fingerprint({"redis": {**machine, "server_version": "redis 7.0.15", "allocator": "jemalloc-5.3.0"},
                           "valkey": {**machine, "server_version": "valkey 8.0.1", "allocator": "jemalloc-5.3.0"}})
    assert got == {**machine, "redis.server_version": "redis 7.0.15", "redis.allocator": "jemalloc-5.3.0",
                   "valkey.server_version": "valkey 8.0.1", "valkey.allocator": "jemalloc-5.3.0"}
    with pytest.raises(ValueError, match="at least one build"):
        run_fingerprint({})


def test_a_saved_run_from_another_fingerprint_is_named_field_by_field() -> None:
    from echomq_bench.microbench.benchmark_machine import FINGERPRINT_KEY, cross_machine_warning, differences

    here = {"cpu_model": "Xeon", "cores": 2, "redis.server_version": "redis 7.0.15"}
    assert cross_machine_warning(here, {FINGERPRINT_KEY: dict(here), "node": "elsewhere"}, "of today") is None
    saved = {"cpu_model": "Xeon", "cores": 64, "valkey.server_version": "valkey 8.0.1"}
    assert differences(here, saved) == ["cores 2 here, 64 saved",
                                        "redis.server_version redis 7.0.15 here, absent saved",
                                        "valkey.server_version absent here, valkey 8.0.1 saved"]
    text = cross_machine_warning(here, {FINGERPRINT_KEY: saved}, "of 2026-12-01 (commit 2c720de)")
    assert text == ("the saved run of 2026-12-01 (commit 2c720de) was measured on another machine fingerprint: "
                    "cores 2 here, 64 saved; redis.server_version redis 7.0.15 here, absent saved; "
                    "valkey.server_version absent here, valkey 8.0.1 saved. pytest-benchmark compares raw round-trip "
                    "seconds across these runs, and seconds do not carry across machines: --benchmark-compare-fail "
                    "is not meaningful against this run. To compare across machines use `echomq-bench gate`, which "
                    "counts each verb's instructions against a baseline of the same server binary, whatever the "
                    "machine.")
    unknown = cross_machine_warning(here, {"node": "ci"}, "of yesterday")
    assert unknown is not None and unknown.startswith(
        "the saved run of yesterday carries no echomq machine fingerprint, so whether it was measured on this "
        "machine is unknown. pytest-benchmark compares raw round-trip seconds")


# -- the verdicts on synthetic figures: what a gate run decides, with no timing in the test ----------------------


def _measurement(claim_us: int, ab_claim_us: int | None = None) -> Any:
    """Four rounds of claim and complete as the gate measures them, each call reading the same µs;
    with `ab_claim_us`, claim measured A/B against the baseline's script too, reading that."""
    from echomq_bench.microbench.figures import Batch, Measurement
    from echomq_bench.microbench.settings import QUICK

    def batch(case: str, us: int) -> Batch:
        n = 15
        return Batch(case, server_us=[us] * n, client_us=[us + 150.0] * n, noop_us=[2] * n,
                     noop_client_us=[90.0] * n, ping_us=[0] * n, ping_client_us=[80.0] * n, ref_us=[180] * n,
                     ref_client_us=[300.0] * n)

    rounds = [{"claim": batch("claim", claim_us), "complete": batch("complete", 11)} for _ in range(4)]
    ab_rounds = [{"claim": batch("claim", ab_claim_us)} for _ in range(4)] if ab_claim_us else []
    return Measurement("redis", "redis 7.0.15", str(ROOT / "lua"), QUICK, rounds, ab_rounds, wall_s=10.0,
                       server_main_cpu_s=4.0, client_cpu_s=9.0)


def _last_line(found: list[GateVerdictEntry], base: dict[str, Any], folder: Path) -> str:
    """The line the gate ends on for these verdicts, as its record prints it."""
    from echomq_bench.commands.gate import gate_record
    from echomq_bench.microbench.gate import GateResult
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    result = GateResult("redis", "redis 7.0.15", folder / "gate-redis.json", base, _measurement(20), found,
                        ["claim"] if any(v.ab_change is not None for v in found) else [])
    write_record(folder, gate_record([result], {"machine": {"cpu_model": "test"}}))
    return record_text(folder).splitlines()[-1]


def test_figures_as_the_baseline_pass_and_a_claim_three_times_slower_fails_once_confirmed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from echomq_bench.microbench.baseline import write_baseline
    from echomq_bench.microbench.gate import DEFAULT_AB_TOLERANCE, DEFAULT_TOLERANCE, verdicts
    from echomq_bench.records.history import HISTORY_ENV

    monkeypatch.setenv(HISTORY_ENV, "off")
    base = write_baseline(tmp_path / "gate-redis.json", _measurement(20), None)
    judged = partial(verdicts, base=base, tolerance=DEFAULT_TOLERANCE, ab_tolerance=DEFAULT_AB_TOLERANCE)

    same = judged(_measurement(20))
    assert [v.case for v in same] == ["claim", "complete"]
    assert all(v.change == pytest.approx(0, abs=1e-3) and v.ab_change is None and v.status == "ok" for v in same)
    assert _last_line(same, base, tmp_path / "same").startswith("PASS on redis")

    first = judged(_measurement(60, ab_claim_us=20))
    claim, complete = first
    assert claim.change == pytest.approx(2.0, abs=1e-3) and claim.ab_change == pytest.approx(2.0)
    assert claim.flagged and claim.confirmed is None and complete.status == "ok"
    # A flag is a regression once the verb is measured again and flagged again.
    confirmed = [v.confirm(again) for v, again in zip(first, judged(_measurement(60, ab_claim_us=20)))]
    assert [(v.case, v.status) for v in confirmed] == [("claim", "SLOWER"), ("complete", "ok")]
    assert _last_line(confirmed, base, tmp_path / "slow") == "REGRESSION on redis: claim"
    # Measured again as the baseline reads, the flag does not stand.
    passed = [v.confirm(again) for v, again in zip(first, judged(_measurement(20, ab_claim_us=20)))]
    assert [(v.case, v.regressed, v.status) for v in passed] == [("claim", False, "ok (not confirmed)"),
                                                                 ("complete", False, "ok")]
    assert _last_line(passed, base, tmp_path / "unconfirmed").startswith("PASS on redis")


def test_a_claim_five_percent_slower_is_within_both_allowances(tmp_path: Path) -> None:
    from echomq_bench.microbench.baseline import write_baseline
    from echomq_bench.microbench.gate import DEFAULT_AB_TOLERANCE, DEFAULT_TOLERANCE, verdicts

    base = write_baseline(tmp_path / "gate-redis.json", _measurement(20), None)
    claim = verdicts(_measurement(21, ab_claim_us=20), base, DEFAULT_TOLERANCE, DEFAULT_AB_TOLERANCE)[0]
    assert claim.change == pytest.approx(0.05, abs=1e-3) and claim.ab_change == pytest.approx(0.05)
    assert not claim.flagged and claim.status == "ok"


# -- the committed baselines and the scripts in the tree -----------------------------------------------------


def test_every_committed_baseline_records_the_scripts_in_the_tree() -> None:
    from echomq_bench.counts.baseline_scripts import committed_baselines, stale_baselines

    folder = ROOT / "results" / "baselines"
    # Both gates' baselines are read: a glob that found none would pass on nothing.
    assert {p.name.split("-")[0] for p in committed_baselines(folder)} == {"gate", "count"}
    stale = stale_baselines(folder, ROOT / "lua")
    assert stale == [], "\n".join(stale)


def test_a_baseline_recorded_with_other_scripts_fails_naming_the_command_that_records_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import shutil

    from echomq_bench.counts.baseline_scripts import stale_baselines
    from echomq_bench.microbench.baseline import script_sha1, write_baseline
    from echomq_bench.records.history import HISTORY_ENV

    monkeypatch.setenv(HISTORY_ENV, "off")
    monkeypatch.delenv("ECHOMQ_LUA_DIR", raising=False)
    lua = ROOT / "lua"
    # A timing baseline written now records each script's SHA beside its text, in step with the tree.
    timing = tmp_path / "gate-redis.json"
    data = write_baseline(timing, _measurement(20), None)
    assert {v: s["sha1"] for v, s in data["scripts"].items()} == {v: script_sha1(s.text) for v, s in
                                                                 discover(lua).items()}
    [count] = sorted((ROOT / "results" / "baselines" / "counts").glob("count-redis-*.json"))
    (tmp_path / "counts").mkdir()
    shutil.copy(count, tmp_path / "counts" / count.name)
    assert stale_baselines(tmp_path, lua) == []

    # Planted: claim recorded from other text in the timing baseline, and another claim SHA in the count one.
    data["scripts"]["claim"]["sha1"] = "0" * 40
    timing.write_text(json.dumps(data))
    counts = json.loads(count.read_text())
    counts["scripts"]["claim"] = "f" * 40
    (tmp_path / "counts" / count.name).write_text(json.dumps(counts))
    stale = stale_baselines(tmp_path, lua)
    tree = script_sha1(discover(lua)["claim"].text)[:10]
    assert len(stale) == 2
    assert stale[0].startswith(f"{tmp_path / 'counts' / count.name} was recorded with other scripts than lua: "
                               f"claim (ffffffffff recorded, {tree} in the tree); record it again with "
                               "`echomq-bench gate --count instructions --update --server redis` (deterministic")
    assert stale[1] == (f"{timing} was recorded with other scripts than lua: claim (0000000000 recorded, {tree} in "
                        f"the tree); record it again with `echomq-bench gate --count time --update --server redis "
                        f"--baseline {timing}` (on a quiet machine of the fingerprint it is for)")

    # A baseline from before the SHAs were recorded is out of step too, whatever its text.
    for s in data["scripts"].values():
        del s["sha1"]
    timing.write_text(json.dumps(data))
    [old] = [line for line in stale_baselines(tmp_path, lua) if str(timing) in line]
    assert "complete (recorded without its SHA; its text is the tree's)" in old


# -- the server processes a baseline pools and a confirmation runs on, as the record says them ---------------


def _process(role: str, n: int) -> Any:
    from echomq_bench.records.kinds.gate import ServerProcess

    return ServerProcess(role=role, run_id=f"{n:040x}", pid=200 + n, port=7100 + n)


def _printed(result: Any, folder: Path) -> tuple[dict[str, Any], str]:
    """The build's summary.json entry and the record as the gate prints it."""
    import json

    from echomq_bench.commands.gate import gate_record
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    write_record(folder, gate_record([result], {"machine": {"cpu_model": "test"}}))
    return json.loads((folder / "summary.json").read_text())["builds"][0], " ".join(record_text(folder).split())


def test_the_record_says_the_processes_a_baseline_pools_its_degrees_of_freedom_and_the_confirmations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from echomq_bench.microbench.baseline import write_baseline
    from echomq_bench.microbench.gate import DEFAULT_AB_TOLERANCE, DEFAULT_TOLERANCE, GateResult, verdicts
    from echomq_bench.records.history import HISTORY_ENV

    monkeypatch.setenv(HISTORY_ENV, "off")
    passes = [_process(f"pass {n} of 10", n).to_record() for n in range(1, 11)]
    base = write_baseline(tmp_path / "gate-redis.json", _measurement(20), None, passes=10, servers=passes,
                          drift_degrees_of_freedom=9)
    flagged = verdicts(_measurement(60, ab_claim_us=20), base, DEFAULT_TOLERANCE, DEFAULT_AB_TOLERANCE)
    found = [v.confirm(again) for v, again in zip(flagged, verdicts(_measurement(60, ab_claim_us=20), base,
                                                                     DEFAULT_TOLERANCE, DEFAULT_AB_TOLERANCE))]
    result = GateResult("redis", "redis 7.0.15", tmp_path / "gate-redis.json", base, _measurement(60), found,
                        ["claim"], servers=(_process("judged", 1001), _process("confirmation", 1002)))
    entry, text = _printed(result, tmp_path / "judged")
    assert (entry["baseline_from"]["passes"], entry["baseline_from"]["processes"]) == (10, 10)
    assert [(s["role"], s["pid"]) for s in entry["servers"]] == [("judged", 1201), ("confirmation", 1202)]
    assert "It pools 10 passes on 10 server processes: the drift between them has 9 degrees of freedom." in text
    assert ("confirmation: every verb measured again on a fresh server process (pid 1202, port 8102; the judged "
            "one: pid 1201, port 8101).") in text

    # A baseline of three passes on one process, as they were recorded before: its drift is said to be suspect.
    legacy = {k: v for k, v in base.items() if k not in ("servers", "drift_degrees_of_freedom")} | {"passes": 3}
    entry, text = _printed(replace(result, baseline_info=legacy), tmp_path / "legacy")
    assert (entry["baseline_from"]["passes"], entry["baseline_from"]["processes"]) == (3, None)
    assert "It pools 3 passes and does not say on which server processes" in text
    # A confirmation on a server this command only reaches re-measures the same process, and says so.
    same = replace(result, servers=(_process("judged", 7), replace(_process("judged", 7), role="confirmation")))
    assert "measured again on the same server process" in _printed(same, tmp_path / "same")[1]

    # --update: the passes written, and the degrees of freedom of their drift.
    written = replace(result, updated=True, servers=tuple(_process(f"pass {n} of 5", n) for n in range(1, 6)))
    assert ("Baseline written: " in _printed(written, tmp_path / "updated")[1]
            and "It pools 5 passes on 5 server processes: the drift between them has 4 degrees of freedom."
            in _printed(written, tmp_path / "updated2")[1])
