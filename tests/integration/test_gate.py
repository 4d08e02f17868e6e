"""The timing gate (`gate --count time`) on a real server: the baseline it
writes per machine fingerprint, its passes and its confirmation each on a
fresh server process, the record and the lines it prints, the script it
names as changed and measures A/B; and the microbench cases it stands on.

No assertion here hangs on a timing: what a figure reads depends on how busy
the machine is. The verdicts themselves are checked on synthetic figures in
tests/unit/test_gate.py; a slowed claim is caught deterministically by the
count gate (tests/integration/test_counts.py); the timing gate's sensitivity
on this machine is measured by docs/measurements/scripts/gate_sensitivity.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import redis

from echomq_bench.records.history import HISTORY_ENV
from echomq_bench.records.record import SCHEMA
from echomq_bench.records import files as results
from echomq_bench.records.files import write_record
from echomq_bench.cli import main
from echomq_bench.commands.gate import gate_record, run_gate
from echomq_bench.report import record_text
from echomq_bench.microbench.baseline import baseline_path, fingerprint, fingerprint_id, load_baseline, slowed_copy
from echomq_bench.microbench.gate import DEFAULT_AB_TOLERANCE, GateOptions, GateResult, gate_one
from echomq_bench.microbench.runner import CASES, QUICK, VERB_CASES, Env, Sizes, run_batch
from echomq._instrument import discover

ALL_VERBS = [c.name for c in VERB_CASES]
# The mechanism, not the resolution: a tenth of the pending rows, since each fresh server is filled anew.
SHORT = replace(QUICK, rounds=4, calls=15, heavy_calls=4, sizes=Sizes(pending=10_000))
TEST_TOLERANCE = 1.0
PASSES = 2   # the fewest a drift is drawn from: each pass more is one more server started and filled
# A 3x slower claim: the loop costs ~10 ns an iteration, claim ~20-30 µs.
SLOW_ITERATIONS = 5000


def printed(result: GateResult, folder: Path) -> str:
    """What the gate prints for `result`: its record, written to `folder` (not into the history), as text."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(HISTORY_ENV, "off")
        write_record(folder, gate_record([result], {"machine": {"cpu_model": "test"}}))
    return record_text(folder)


def test_every_case_replies_as_its_state_demands_and_puts_the_state_back(client: redis.Redis) -> None:
    env = Env(client)
    try:
        cases = [CASES[name](env) for name in ALL_VERBS]
        pending = env.queue("pending")
        size = client.zcard(pending.keys.pending)
        for case in cases:
            [batch] = run_batch([case], 3)  # raises MicrobenchError on a wrong reply
            assert batch.calls == 3 and len(batch.noop_us) == len(batch.ping_client_us) == 3
            # Each call's round trip holds the server's time for it: the two figures are of one call.
            assert all(rt >= us for rt, us in zip(batch.client_us, batch.server_us)), batch
            assert all(rt >= us for rt, us in zip(batch.noop_client_us, batch.noop_us)), batch
        assert client.zcard(pending.keys.pending) == size  # claim refilled, enqueue removed its own
        for name in ("reap", "promote", "dead"):
            assert client.zcard(env.queue(name).keys.pending) == 0
        assert client.zcard(env.queue("dead", 1).keys.dead) == 0
    finally:
        env.close()
    assert not list(client.scan_iter(match=f"emq:{{{env.tag}-*"))


def test_gate_writes_its_baseline_per_fingerprint_and_measures_a_changed_script_a_b(
        server: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base_dir = tmp_path / "baselines"
    up = gate_one(server, GateOptions(baseline=base_dir, settings=SHORT, update=True, quiet=True, passes=PASSES))
    assert up.updated and up.regressions == []   # the first baseline: nothing to compare, nothing to fail
    here = fingerprint(server.client())  # type: ignore[attr-defined]
    # Written per machine fingerprint, and found there.
    data = load_baseline(base_dir / fingerprint_id(here) / f"gate-{server.name}.json")  # type: ignore[attr-defined]
    assert data["fingerprint"] == here
    assert baseline_path(base_dir, server.name, fingerprint_id(here)) == up.baseline  # type: ignore[attr-defined]
    assert set(data["figures"]) == {"noop_script", "ping", "read_100", *ALL_VERBS}
    assert set(data["scripts"]) == set(discover())
    assert data["version"] == server.version()  # type: ignore[attr-defined]

    # Unchanged code: every verb judged against this machine's baseline by its normalised figure alone.
    same = gate_one(server, GateOptions(baseline=base_dir, settings=SHORT, tolerance=TEST_TOLERANCE, quiet=True))
    assert same.same_machine and same.changed_scripts == [] and same.baseline == up.baseline
    assert [v.case for v in same.verdicts] == ALL_VERBS
    assert all(v.base_ratio == data["figures"][v.case]["server_ratio"] and v.allowed == TEST_TOLERANCE
               and v.ab_change is None for v in same.verdicts)
    _prints_each_verdict(same, printed(same, tmp_path / "same"))

    # A changed claim: named, and measured A/B against the baseline's script; the verbs it did not touch are not.
    monkeypatch.setenv("ECHOMQ_LUA_DIR", str(slowed_copy(tmp_path / "slow", "claim", SLOW_ITERATIONS)))
    slow = gate_one(server, GateOptions(baseline=base_dir, settings=SHORT, tolerance=TEST_TOLERANCE,
                                        cases=["claim", "complete", "reap_0"], quiet=True))
    assert slow.changed_scripts == ["claim"]
    ab = {v.case: (v.ab_change is not None, v.ab_allowed) for v in slow.verdicts}
    assert ab == {"claim": (True, DEFAULT_AB_TOLERANCE), "complete": (False, None), "reap_0": (False, None)}
    assert [c.case for c in slow.measurement.comparisons().values()] == ["claim"]
    slow_text = printed(slow, tmp_path / "slowed")
    assert "Scripts that differ from the baseline's: claim" in " ".join(slow_text.split())
    _prints_each_verdict(slow, slow_text)


def _prints_each_verdict(result: GateResult, text: str) -> None:
    """Each verb has a row ending in its verdict as judged, and the last line is this build's."""
    lines = text.splitlines()
    for v in result.verdicts:
        word = v.status.split(" (")[0]
        assert any(line.split()[:1] == [v.case] and line.rstrip().endswith(word) for line in lines), (v.status, text)
    assert f" on {result.build}" in lines[-1]


def test_run_gate_writes_a_results_folder(server: object, tmp_path: Path) -> None:
    base = tmp_path / "base.json"  # one file for every build
    found = run_gate([server], GateOptions(baseline=base, settings=replace(QUICK, rounds=2), update=True,
                                           cases=["claim", "browse_5"], quiet=True, passes=PASSES),
                     out_dir=tmp_path / "run")
    assert base.is_file() and found[0].updated
    run = results.load(tmp_path / "run")
    assert run.summary["passed"] is True
    table = run.table("microbench")
    assert set(table["case"]) == {"claim", "browse_5"}
    assert {"server_us_typical", "server_us_mean", "client_us_p50"} <= set(table["metric"])
    assert run.meta["settings"]["gate"]["update"] is True


def test_cli_exit_codes_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "b"
    args = ["gate", "--count", "time", "--server", "redis", "--quick", "--rounds", "3", "--baseline", str(base)]
    assert main(args + ["--verbs", "claim", "--update", "--passes", "5", "--out", str(tmp_path / "r1")]) == 0
    assert len(list(base.glob("*/gate-redis.json"))) == 1   # in the folder of this machine's fingerprint
    capsys.readouterr()
    # A changed claim, and a verb the baseline lacks: whatever the timings read, the missing verb fails the run.
    monkeypatch.setenv("ECHOMQ_LUA_DIR", str(slowed_copy(tmp_path / "slow", "claim", SLOW_ITERATIONS)))
    assert main(args + ["--verbs", "claim,reap_0", "--tolerance", str(TEST_TOLERANCE),
                        "--out", str(tmp_path / "r2")]) == 1
    out = capsys.readouterr().out
    assert "FAIL: regressed: " in out and "redis:reap_0" in out
    for column in ("baseline", "now", "change", "allowed", "script A/B", "verdict"):
        assert column in out
    summary = json.loads((tmp_path / "r2" / "summary.json").read_text())
    assert summary["passed"] is False and "reap_0" in summary["builds"][0]["regressions"]
    assert summary["kind"] == "gate" and summary["schema"] == SCHEMA and "results: " + str(tmp_path / "r2") in out
    # What a later gate needs to use this run as its baseline (--baseline history): figures and scripts.
    assert set(summary["builds"][0]["figures"]) == {"noop_script", "ping", "read_100", "claim", "reap_0"}
    scripts = results.load(tmp_path / "r2").table("scripts")
    assert scripts.loc[scripts["verb"] == "claim", "text"].item() == discover(tmp_path / "slow")["claim"].text


def test_a_baseline_from_another_machine_is_advisory_and_a_missing_verb_fails(server: object, tmp_path: Path) -> None:
    base_dir = tmp_path / "b"
    up = gate_one(server, GateOptions(baseline=base_dir, settings=SHORT, update=True, cases=["claim", "browse_5"],
                                      quiet=True, passes=PASSES))
    data = json.loads(up.baseline.read_text())
    data["fingerprint"] = {**data["fingerprint"], "cores": 64}           # as if written on another machine
    data["figures"]["claim"]["server_ratio"] /= 10                        # and claim 10x cheaper there
    del data["figures"]["browse_5"]
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(data))
    got = gate_one(server, GateOptions(baseline=elsewhere, settings=SHORT, cases=["claim", "browse_5"], quiet=True))
    assert not got.same_machine
    claim = next(v for v in got.verdicts if v.case == "claim")
    # 10x cheaper there: the change is shown, and only advisory, so it cannot fail the run.
    assert claim.advisory and claim.change is not None and claim.checks() == ((None, None),)
    assert not claim.regressed
    text = printed(got, tmp_path / "elsewhere")
    assert got.regressions == ["browse_5"], text
    assert "the normalised change is advisory" in " ".join(text.split()) and "64 saved" in " ".join(text.split())
    assert "MISSING from the baseline: browse_5" in text


def test_a_noisy_verb_gets_more_passes_then_is_inconclusive(server: object, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import echomq_bench.microbench.gate as gate_module

    base_dir = tmp_path / "b"
    gate_one(server, GateOptions(baseline=base_dir, settings=SHORT, update=True, cases=["claim"], quiet=True,
                                 passes=PASSES))
    # Noise planted: a z so large that no sample can resolve any allowance.
    monkeypatch.setattr(gate_module, "Z", 1e9)
    got = gate_one(server, GateOptions(baseline=base_dir, settings=SHORT, tolerance=TEST_TOLERANCE,
                                       cases=["claim"], quiet=True))
    assert got.measurement.settings.rounds == SHORT.rounds * (1 + gate_module.NOISY_PASSES)
    assert len(got.measurement.batches("claim")) == SHORT.rounds * (1 + gate_module.NOISY_PASSES)
    text = printed(got, tmp_path / "noisy")
    assert got.inconclusive == ["claim"] and got.regressions == [], text
    assert text.splitlines()[-1].startswith(f"INCONCLUSIVE on {server.name}: claim")  # type: ignore


@pytest.mark.parametrize("server", ["redis"], indirect=True)
def test_the_baseline_passes_and_the_confirmation_each_run_on_a_fresh_server_process(
        server: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passes = PASSES
    base = tmp_path / "gate-redis.json"
    run_gate([server], GateOptions(baseline=base, settings=SHORT, update=True, cases=["claim"], quiet=True,
                                   passes=passes), out_dir=tmp_path / "update")
    written = json.loads(base.read_text())
    pooled = [(s["role"], s["run_id"], s["pid"]) for s in written["servers"]]
    assert [role for role, _, _ in pooled] == [f"pass {n} of {passes}" for n in range(1, passes + 1)]
    # A process of its own per pass: as many run ids and pids as passes, and the drift's degrees of freedom said.
    assert len({run_id for _, run_id, _ in pooled}) == len({pid for _, _, pid in pooled}) == passes
    assert (written["passes"], written["drift_degrees_of_freedom"]) == (passes, passes - 1)
    update = json.loads((tmp_path / "update" / "summary.json").read_text())["builds"][0]
    assert [s["run_id"] for s in update["servers"]] == [run_id for _, run_id, _ in pooled]

    # A claim 3x slower is flagged by its A/B and measured again: on another process than the judged one.
    monkeypatch.setenv("ECHOMQ_LUA_DIR", str(slowed_copy(tmp_path / "slow", "claim", SLOW_ITERATIONS)))
    run_gate([server], GateOptions(baseline=base, settings=SHORT, tolerance=TEST_TOLERANCE, cases=["claim"],
                                   quiet=True), out_dir=tmp_path / "judged")
    judged = json.loads((tmp_path / "judged" / "summary.json").read_text())["builds"][0]
    [claim] = judged["verdicts"]
    assert claim["confirmed"] is not None, claim   # measured again, whatever the second reading said
    (first, again) = judged["servers"]
    assert (first["role"], again["role"]) == ("judged", "confirmation")
    assert first["run_id"] != again["run_id"] and first["pid"] != again["pid"]
    assert again["run_id"] not in {run_id for _, run_id, _ in pooled}
    assert (judged["baseline_from"]["passes"], judged["baseline_from"]["processes"]) == (passes, passes)
    text = " ".join(record_text(tmp_path / "judged").split())
    assert f"It pools {passes} passes on {passes} server processes: the drift between them has {passes - 1} degree" \
        in text
    assert f"measured again on a fresh server process (pid {again['pid']}, port {again['port']}" in text
