"""`echomq-bench faults`: every scenario passes on both builds in its quick
form, the harness fails when jobs really are lost, and unanswered calls are
resolved from the evidence, not guessed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from echomq_bench.faults.load import LoadSettings, read_logs
from echomq_bench.commands.faults import QUICK, SCENARIOS, run_scenario
from echomq_bench.servers import parse_server_spec, start

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_faults_pass_on_both_builds(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "echomq_bench", "faults", "--quick", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    entries = {(e["server"], e["scenario"]): e for e in summary["scenarios"]}
    assert set(entries) == {(b, s) for b in ("redis", "valkey") for s in SCENARIOS}
    for (build, scenario), e in entries.items():
        assert e["passed"] is True, (build, scenario, [c for c in e["checks"] if not c["ok"]])
        assert e["double_accepted"] == 0 and e["jobs"] > 0
        assert (e["lost"] > 0) == (scenario == "restart-nopersist"), e
        assert e["faults"] > 0
    assert (out / "meta.json").is_file() and (out / "faults.csv").is_file()
    assert "restart-nopersist" in done.stdout and "loss detected" in done.stdout


def test_harness_fails_when_jobs_are_lost(tmp_path: Path) -> None:
    """The same restart without persistence, judged as if no loss were expected: FAIL, with counts."""
    honest = replace(SCENARIOS["restart-nopersist"], expects_loss=False)
    outcome = run_scenario(parse_server_spec("redis"), honest, QUICK, LoadSettings(), tmp_path, seed=3)
    assert outcome.passed is False
    assert outcome.lost > 0
    failed = [c.text for c in outcome.checks if not c.ok]
    assert failed == [f"audit: lost {outcome.lost}, in two places 0, unknown ids 0"]


def test_url_servers_skip_what_needs_the_process(tmp_path: Path) -> None:
    srv = start("redis")
    try:
        url = parse_server_spec(f"redis://127.0.0.1:{srv.port}/0")  # type: ignore[attr-defined]
        for name in ("pause", "restart-aof", "restart-nopersist"):
            outcome = run_scenario(url, SCENARIOS[name], QUICK, LoadSettings(), tmp_path, seed=1)
            assert outcome.passed is None and "embedded" in (outcome.skipped or "")
    finally:
        srv.stop()


def test_unanswered_calls_are_resolved_by_the_evidence(tmp_path: Path) -> None:
    # producer: one definite enqueue, three unanswered (one later claimed, one still held, one never landed)
    (tmp_path / "producer-0.log").write_text(
        "E JOB0000000000A 1.0\nU JOB0000000000B 1.1\nU JOB0000000000C 1.2\nU JOB0000000000D 1.3\n"
        "O JOB0000000000E 1.4\n")
    # consumer: A completed; B claimed, its complete unanswered and B held nowhere: it landed;
    # an unanswered complete on C while C is still held: it did not; a zombie's complete on C refused
    (tmp_path / "consumer-0.log").write_text(
        "C JOB0000000000A 1 0 2.0\nS JOB0000000000A 1 2.1\nA JOB0000000000A 1 2.2\n"
        "C JOB0000000000B 1 0 2.3\nS JOB0000000000B 1 2.4\nQ JOB0000000000B 1 2.5\n"
        "Q JOB0000000000C 2 2.6\nR JOB0000000000C 1 2.7\nX 2.8 claim boom\n")
    ev = read_logs(sorted(tmp_path.glob("*.log")))
    ledger = ev.ledger(places={"JOB0000000000C"}, zombies={("JOB0000000000C", 1)})
    assert ledger.enqueued == {"JOB0000000000A", "JOB0000000000B", "JOB0000000000C"}
    assert dict(ledger.accepted) == {"JOB0000000000A": 1, "JOB0000000000B": 1}
    assert ledger.refused == [("JOB0000000000C", 1)] and ledger.zombie_sent == 1
    assert ev.oom_refused == [("JOB0000000000E", 1.4)] and ev.unanswered == 5
    assert ev.errors == ["consumer-0: claim boom"]
    assert ev.first_after("A", 2.0) == 2.2 and ev.first_after("A", 3.0) is None
    # the reply to a complete sent before a fault, read after it, is not recovery
    assert ev.first_sent_after(2.05) == 2.2 and ev.first_sent_after(2.15) is None


@pytest.mark.parametrize("build", ["redis", "valkey"])
def test_fault_load_clients_never_resend(build: str) -> None:
    """redis-py resends a timed-out command by default: a complete that landed
    comes back EMQSTALE. The fault load's clients report it unanswered instead."""
    import signal
    import threading

    from echomq import Queue, ServerUnavailableError, mint
    from echomq_bench.faults.load import worker_client

    srv = start(build)
    try:
        q = Queue(worker_client(srv, replace(LoadSettings(), socket_timeout_s=0.3)), "resend")
        q.enqueue(mint(), b"x")
        job = q.claim(60_000)
        os.kill(srv.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        wake = threading.Timer(0.8, os.kill, (srv.pid, signal.SIGCONT))
        wake.start()
        with pytest.raises(ServerUnavailableError):
            q.complete(job.id, job.token)  # type: ignore[union-attr]
        wake.join()
        with srv.client() as admin:  # the server serves the sent complete when it wakes: the row goes
            deadline = time.monotonic() + 5
            while admin.exists(q.keys.job(job.id)) and time.monotonic() < deadline:  # type: ignore[union-attr]
                time.sleep(0.01)
            assert admin.exists(q.keys.job(job.id)) == 0  # type: ignore[union-attr]
    finally:
        srv.stop()


def test_a_scenario_that_cannot_run_is_a_failed_line(tmp_path: Path) -> None:
    """A URL server whose user may run the queue but not CONFIG SET: oom fails, cleanly, with the reason."""
    srv = start("redis")
    try:
        with srv.client() as admin:
            admin.execute_command("ACL", "SETUSER", "worker", "on", ">w-pw", "~emq:*", "resetchannels", "+@all",
                                  "-@admin", "-@dangerous", "+info", "+script|load")
        url = parse_server_spec(f"redis://worker:w-pw@127.0.0.1:{srv.port}/0")  # type: ignore[attr-defined]
        outcome = run_scenario(url, SCENARIOS["oom"], QUICK, LoadSettings(), tmp_path, seed=1)
    finally:
        srv.stop()
    assert outcome.passed is False
    assert [c.text for c in outcome.checks] == [
        "the scenario could not run: NoPermissionError: this user has no permissions to run the 'config|get' command"]
