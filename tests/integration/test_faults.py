"""`echomq-bench faults`: every scenario passes on every installed build in its quick
form, its call-log check classifies every job ok (or explained by a lost reply
or a refusal), the harness fails when jobs really are lost, and unanswered
calls are resolved from the evidence, not guessed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import redis

from echomq_bench.faults.load import LoadSettings
from echomq_bench.faults.runner import run_scenario
from echomq_bench.faults.scenarios import QUICK, SCENARIOS
from echomq_bench.records.kinds.faults import FaultsRecord
from echomq_bench.servers import EmbeddedServer, installed_builds, parse_server_spec, start
from tests.helpers import ROOT



@pytest.mark.slow
def test_quick_faults_pass_on_every_installed_build(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "echomq_bench", "faults", "--quick", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    record = FaultsRecord.from_record(json.loads((out / "summary.json").read_text()))
    entries = {(e.server, e.scenario): e for e in record.scenarios}
    builds = [b.name for b in installed_builds()]
    assert len(builds) == 6, "bash setup.sh installs the six builds"
    assert set(entries) == {(b, s) for b in builds for s in SCENARIOS}
    for (build, scenario), e in entries.items():
        assert e.passed is True, (build, scenario, [c for c in e.checks if not c.ok])
        assert e.double_accepted == 0 and e.jobs > 0
        assert (e.lost > 0) == (scenario == "restart-nopersist"), e
        assert e.faults > 0
        if scenario.startswith("net-"):  # every lost reply classified from the server's state
            assert e.audit is not None and e.audit.ambiguous is not None
            assert e.ambiguous_resolved == e.ambiguous, (build, scenario, e.audit.ambiguous)
            assert e.audit.ambiguous["claim_gaps_unmatched"] == 0
            assert (e.ambiguous > 0) == (scenario != "net-latency"), (build, scenario, e.audit.ambiguous)
        assert_call_log_ok(build, scenario, dict(e.history))
    assert (out / "meta.json").is_file() and (out / "faults.csv").is_file()
    assert "restart-nopersist" in done.stdout and "loss detected" in done.stdout
    assert "the call-log check, jobs under each scenario's fault and not" in done.stdout
    assert sorted(p.name for p in (out / "logs" / f"{builds[0]}-crash" / "history").iterdir())[:2] == [
        "consumer-0.jsonl", "consumer-1.jsonl"]


# Scenarios whose every call is answered: no lost reply, no refused enqueue, so every job is plainly ok.
ANSWERED = {"crash", "zombie", "script-flush", "net-latency"}


def assert_call_log_ok(build: str, scenario: str, checked: dict[str, object]) -> None:
    """The call-log check, apart from the audit: nothing lost (but where a loss is the
    scenario), unexpected, duplicated or unfenced; every other job ok, or explained
    by a lost reply (recovered, indeterminate) or a refused enqueue."""
    counts = checked["counts"]
    assert isinstance(counts, dict) and checked["ok"] is True, (build, scenario, checked)
    assert (counts["lost"] > 0) == (scenario == "restart-nopersist"), (build, scenario, counts)
    assert counts["unexpected"] == counts["duplicated"] == 0, (build, scenario, counts)
    assert counts["token_fell"] == counts["stale_accepted"] == counts["lease_overlap"] == 0, (build, scenario)
    explained = counts["ok"] + counts["lost"] + counts["recovered"] + counts["indeterminate"] + counts["refused"]
    assert counts["ok"] > 0 and explained == checked["jobs"], (build, scenario, counts)
    if scenario in ANSWERED:
        assert counts["ok"] == checked["jobs"], (build, scenario, counts)
    by_fault = checked["by_fault"]
    assert isinstance(by_fault, dict) and scenario in by_fault, (build, scenario, by_fault)


def test_harness_fails_when_jobs_are_lost(tmp_path: Path) -> None:
    """The same restart without persistence, judged as if no loss were expected: FAIL, with counts."""
    honest = replace(SCENARIOS["restart-nopersist"], expects_loss=False)
    outcome = run_scenario(parse_server_spec("redis"), honest, QUICK, LoadSettings(), tmp_path, seed=3)
    assert outcome.passed is False
    assert outcome.lost > 0
    failed = [c.text for c in outcome.checks if not c.ok]
    assert failed[0] == f"audit: lost {outcome.lost}, in two places 0, unknown ids 0"
    # The call-log check finds the loss on its own, from the calls' own log and the sets at the end.
    counts = outcome.history["counts"]
    assert len(failed) == 2 and outcome.history["ok"] is False and counts["lost"] > 0
    assert failed[1].startswith(f"call-log check of {outcome.history['jobs']} jobs")
    assert f"lost {counts['lost']}, unexpected 0, duplicated 0, token fell 0" in failed[1]
    assert outcome.history["by_fault"]["restart-nopersist"]["lost"] == counts["lost"]


@pytest.mark.parametrize("server", ["redis"], indirect=True)
def test_url_servers_skip_what_needs_the_process(server: EmbeddedServer, tmp_path: Path) -> None:
    url = parse_server_spec(f"redis://127.0.0.1:{server.port}/0")
    for name in ("pause", "restart-aof", "restart-nopersist"):
        outcome = run_scenario(url, SCENARIOS[name], QUICK, LoadSettings(), tmp_path, seed=1)
        assert outcome.passed is None and "embedded" in (outcome.skipped or "")


@pytest.mark.parametrize("build", ["redis", "valkey"])
def test_fault_load_clients_never_resend(build: str) -> None:
    """redis-py resends a timed-out command by default: a complete that landed
    comes back EMQSTALE. The fault load's clients never resend, and Queue
    sends a complete once: with the server asleep past the judging deadline,
    it cannot learn the outcome; when the server wakes within it, the judge
    reads the row the sent complete deleted, and the call is "ok"."""
    import signal
    import threading

    from echomq import OutcomeUnknownError, Queue, mint
    from echomq_bench.faults.load import worker_client

    srv = start(build)
    try:
        client = worker_client(srv, replace(LoadSettings(), socket_timeout_s=0.3))
        for judge_timeout_ms, asleep_s in ((200, 0.8), (10_000, 0.8)):
            q = Queue(client, f"resend-{judge_timeout_ms}", judge_timeout_ms=judge_timeout_ms)
            q.enqueue(mint(), b"x")
            job = q.claim(60_000)
            assert job is not None
            os.kill(srv.pid, signal.SIGSTOP)  # type: ignore[arg-type]
            wake = threading.Timer(asleep_s, os.kill, (srv.pid, signal.SIGCONT))
            wake.start()
            if judge_timeout_ms < asleep_s * 1000:
                with pytest.raises(OutcomeUnknownError):
                    q.complete(job.id, job.token)
            else:  # the judge waits the server out: the complete that ran is ours, never EMQSTALE
                assert q.complete(job.id, job.token) == "ok"
            wake.join()
            with srv.client() as admin:  # the server serves the sent complete when it wakes: the row goes
                deadline = time.monotonic() + 5
                while admin.exists(q.keys.job(job.id)) and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert admin.exists(q.keys.job(job.id)) == 0
    finally:
        srv.stop()


@pytest.mark.parametrize("server", ["redis"], indirect=True)
def test_a_scenario_that_cannot_run_is_a_failed_line(server: EmbeddedServer, client: redis.Redis,
                                                      tmp_path: Path) -> None:
    """A URL server whose user may run the queue but not CONFIG SET: oom fails, cleanly, with the reason."""
    client.execute_command("ACL", "SETUSER", "worker", "on", ">w-pw", "~emq:*", "resetchannels", "+@all",
                           "-@admin", "-@dangerous", "+info", "+script|load")
    try:
        url = parse_server_spec(f"redis://worker:w-pw@127.0.0.1:{server.port}/0")
        outcome = run_scenario(url, SCENARIOS["oom"], QUICK, LoadSettings(), tmp_path, seed=1)
    finally:
        client.execute_command("ACL", "DELUSER", "worker")
    assert outcome.passed is False
    assert [c.text for c in outcome.checks] == [
        "the scenario could not run: NoPermissionError: this user has no permissions to run the 'config|get' command"]
