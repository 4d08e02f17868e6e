"""The Locust scenarios, run as users run them: the venv's `locust` in
subprocesses, headless on each build, through the web UI, and distributed
(a master and two workers), each ending in the audit of every job."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from echomq import Queue, mint
from echomq_bench.locust.client import Books
from echomq_bench.locust.report import settle
from echomq_bench.servers import DEFAULT_SPECS, free_port, start

ROOT = Path(__file__).resolve().parent.parent
LOCUST = str(Path(sys.executable).with_name("locust"))
SCENARIOS = ROOT / "scenarios"
TIMEOUT_S = 90

# Options that make each scenario's story happen within a few seconds.
STORY = {
    "claim_complete": ["--work", "exp:mean=1ms"],
    "crash_reap": ["--crash-rate", "0.2", "--lease", "300ms", "--reap-every", "50ms"],
    "retry_dead": ["--fail-rate", "0.5", "--backoff-base", "5ms", "--backoff-cap", "50ms",
                   "--promote-every", "20ms"],
}


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def locust(args: list[str], cwd: Path, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([LOCUST, *args], cwd=cwd, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)


def finished(proc: subprocess.Popen[str], timeout: float = TIMEOUT_S) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"locust did not finish in {timeout} s:\n{out[-4000:]}")
    return proc.returncode, out


def read_audit(path: Path, output: str) -> dict[str, Any]:
    assert path.is_file(), f"no {path}; locust said:\n{output[-4000:]}"
    return json.loads(path.read_text())


@pytest.mark.parametrize("build", DEFAULT_SPECS)
@pytest.mark.parametrize("scenario", list(STORY))
def test_scenario_headless_audit_passes(scenario: str, build: str, tmp_path: Path) -> None:
    args = ["-f", str(SCENARIOS / f"{scenario}.py"), "--headless", "-u", "8", "-r", "8", "-t", "4s",
            "--server", build, "--csv", str(tmp_path / "out" / "run"), "--html", str(tmp_path / "out" / "run.html"),
            *STORY[scenario]]
    code, output = finished(locust(args, tmp_path))
    audit = read_audit(tmp_path / "out" / "audit.json", output)
    assert code == 0, output[-4000:]
    assert audit["passed"] is True and audit["audit"]["passed"] is True
    assert (tmp_path / "out" / "run_stats.csv").is_file() and (tmp_path / "out" / "run.html").is_file()
    assert audit["run"]["server"].startswith(build)
    a, flow = audit["audit"], audit["flow"]
    assert a["completed"] > 0 and a["lost"] == 0 and a["double_accepted"] == 0
    assert a["completed"] + a["pending"] + a["active"] + a["scheduled"] + a["dead"] == a["enqueued"]
    if scenario == "crash_reap":
        assert flow["crashes"] > 0 and flow["reaped"] > 0 and flow["recovered"] > 0
        assert a["zombie_sent"] > 0 and a["zombie_accepted"] == 0
        assert audit["recovery_ms"]["crash -> claim"]["count"] > 0
        stats = (tmp_path / "out" / "run_stats.csv").read_text()
        assert "complete (zombie refused)" in stats and "lease deadline -> claim" in stats
    if scenario == "retry_dead":
        assert flow["retry_scheduled"] > 0 and flow["promoted"] > 0 and flow["retry_dead"] > 0
        assert a["dead"] > 0


def test_broken_fence_fails_the_audit_and_the_exit_code(tmp_path: Path) -> None:
    # A complete script without the token check: zombies get through, and
    # the run must say so (exit 1, audit.json passed false).
    lua = tmp_path / "lua"
    shutil.copytree(ROOT / "lua", lua)
    complete = lua / "complete-2.lua"
    text = complete.read_text()
    fenced = "if row[1] ~= 'active' or tonumber(row[2]) ~= token then"
    assert fenced in text
    complete.write_text(text.replace(fenced, "if row[1] == nil and false then"))
    args = ["-f", str(SCENARIOS / "crash_reap.py"), "--headless", "-u", "8", "-r", "8", "-t", "4s",
            "--csv", str(tmp_path / "run"), *STORY["crash_reap"]]
    proc = subprocess.Popen([LOCUST, *args], cwd=tmp_path, env={**env(), "ECHOMQ_LUA_DIR": str(lua)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    code, output = finished(proc)
    audit = read_audit(tmp_path / "audit.json", output)
    assert audit["passed"] is False and audit["audit"]["zombie_accepted"] > 0
    assert code == 1, output[-4000:]
    assert "audit FAIL" in output


def get(url: str, data: dict[str, str] | None = None) -> tuple[int, bytes]:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(url, data=body, timeout=10) as resp:  # loopback only
        return resp.status, resp.read()


def test_web_ui_answers_and_runs(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = locust(["-f", str(SCENARIOS / "claim_complete.py"), "--web-host", "127.0.0.1", "--web-port", str(port)],
                  tmp_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, page = get(base + "/")
                break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"web UI never answered:\n{proc.communicate()[0][-4000:]}")
                time.sleep(0.2)
        assert status == 200 and b"<html" in page.lower()
        # The form's echomq options go in with the swarm, as a user would send them.
        status, body = get(base + "/swarm", {"user_count": "4", "spawn_rate": "4", "work": "exp:mean=1ms"})
        assert status == 200 and json.loads(body)["success"] is True
        deadline = time.monotonic() + 20
        while True:
            stats = json.loads(get(base + "/stats/requests")[1])
            done = {s["name"]: s["num_requests"] for s in stats["stats"]}.get("complete", 0)
            if done > 100:
                break
            assert time.monotonic() < deadline, f"no completes through the web UI: {stats['stats']}"
            time.sleep(0.3)
        assert get(base + "/stop", {})[0] == 200
        deadline = time.monotonic() + 30
        while not (tmp_path / "audit.json").is_file():  # no --csv/--html: it lands in the cwd
            assert time.monotonic() < deadline, "no audit.json after stopping from the web UI"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        code, output = finished(proc, 30)
    audit = json.loads((tmp_path / "audit.json").read_text())
    assert audit["passed"] is True and audit["audit"]["completed"] > 100
    assert audit["meta"]["settings"]["work"] == "exp:mean=1ms"
    assert code == 0, output[-4000:]


def test_distributed_master_and_two_workers_merge_their_books(tmp_path: Path) -> None:
    server = start("redis")
    try:
        port = free_port()
        scenario = str(SCENARIOS / "crash_reap.py")
        master = locust(["-f", scenario, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                         str(port), "--expect-workers", "2", "--headless", "-u", "10", "-r", "10", "-t", "5s",
                         "--server", server.url, "--csv", str(tmp_path / "run"), *STORY["crash_reap"]], tmp_path)
        workers = [locust(["-f", scenario, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
                          tmp_path) for _ in range(2)]
        code, output = finished(master)
        for w in workers:
            w_code, w_output = finished(w, 30)
            assert w_code == 0, w_output[-3000:]
    finally:
        server.stop()
    audit = read_audit(tmp_path / "audit.json", output)
    assert code == 0, output[-4000:]
    assert audit["passed"] is True
    assert audit["run"]["role"] == "master" and audit["run"]["load_processes"] == 2
    assert audit["missing_processes"] == 0
    a = audit["audit"]
    assert a["completed"] > 0 and a["zombie_sent"] > 0 and a["zombie_accepted"] == 0
    assert audit["flow"]["reaped"] > 0  # the master's pump


def test_distributed_run_over_a_cluster_spreads_queues_and_reports_each_master(tmp_path: Path) -> None:
    """A master and two workers against a cluster that already runs (its
    redis+cluster:// URL): the queues land one per master, every master
    serves completes, and the merged audit passes."""
    from echomq_bench.servers import start_cluster

    cluster = start_cluster("valkey-cluster")
    try:
        port = free_port()
        scenario = str(SCENARIOS / "crash_reap.py")
        master = locust(["-f", scenario, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                         str(port), "--expect-workers", "2", "--headless", "-u", "9", "-r", "9", "-t", "5s",
                         "--server", cluster.url, "--queues", "3", "--csv", str(tmp_path / "run"),
                         *STORY["crash_reap"]], tmp_path)
        workers = [locust(["-f", scenario, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port),
                           "--server", cluster.url], tmp_path) for _ in range(2)]
        code, output = finished(master)
        for w in workers:
            w_code, w_output = finished(w, 30)
            assert w_code == 0, w_output[-3000:]
        masters = {m.name for m in cluster.masters()}
    finally:
        cluster.stop()
    audit = read_audit(tmp_path / "audit.json", output)
    assert code == 0, output[-4000:]
    assert audit["passed"] is True and audit["missing_processes"] == 0
    assert audit["run"]["role"] == "master" and audit["run"]["load_processes"] == 2
    assert "queues over the cluster's masters" in output and "per node (3 masters" in output
    nodes = audit["nodes"]
    assert {n["node"] for n in nodes} == masters
    assert all(len(n["queues"]) == 1 and n["completed"] > 0 for n in nodes)
    assert sum(n["completed"] for n in nodes) == audit["audit"]["completed"]
    assert all(0 < n["server_main_util"] < 1.5 for n in nodes)
    a = audit["audit"]
    assert a["zombie_sent"] > 0 and a["zombie_accepted"] == 0
    assert audit["flow"]["reaped"] > 0


def test_master_without_a_url_says_what_it_needs(tmp_path: Path) -> None:
    code, output = finished(locust(["-f", str(SCENARIOS / "claim_complete.py"), "--master", "--master-bind-host",
                                    "127.0.0.1", "--master-bind-port", str(free_port()), "--headless"], tmp_path))
    assert code == 2
    assert "distributed run needs --server redis://HOST:PORT" in output


@pytest.mark.parametrize("option, value, said", [
    ("--work", "lognormal:median=50ms", "lognormal: missing p99"),
    ("--work", "gauss:1", "unknown distribution kind 'gauss'"),
    ("--server", "memcached", "bad server spec 'memcached'"),
    ("--reap-every", "soon", "bad duration 'soon'"),
    ("--crash-rate", "1.5", "must be from 0 to 1"),
    ("--reap-every", "50", "has no unit"),
    ("--lease", "300", "has no unit"),
    ("--step-time", "10", "500ms, 10s, 1.5s, 2m"),
    ("--lease-ms", "0", "must be from 1ms"),
    ("--rate", "fast", "'fast' is not a number"),
])
def test_bad_option_exits_2_naming_it(option: str, value: str, said: str, tmp_path: Path) -> None:
    code, output = finished(locust(["-f", str(SCENARIOS / "claim_complete.py"), "--headless", "-t", "1s",
                                    option, value], tmp_path))
    assert code == 2
    assert f"argument {option}" in output and said in output


def test_option_values_are_checked_again_when_a_run_starts() -> None:
    """Values from the web form reach Settings.from_options as text: the same rules hold there."""
    from types import SimpleNamespace

    from echomq_bench.locust.options import DEFAULTS, Settings, SettingsError

    s = Settings.from_options(SimpleNamespace(**{**DEFAULTS, "lease": "1.5s", "reap_every": "0",
                                                 "idle_wait": "250us", "enqueue_rate": "200"}))
    assert (s.lease_ms, s.reap_every_ms, s.idle_wait_ms, s.enqueue_rate) == (1500, 0.0, 0.25, 200.0)
    for name, value, said in [("lease", "300", "--lease: duration '300' has no unit"),
                              ("backoff_cap", "2", "--backoff-cap: duration '2' has no unit"),
                              ("enqueue_rate", "fast", "--rate 'fast' is not a number")]:
        with pytest.raises(SettingsError, match=said):
            Settings.from_options(SimpleNamespace(**{**DEFAULTS, name: value}))


def test_old_option_spellings_still_parse(tmp_path: Path) -> None:
    # Locust's own parser, in a child: importing locust here would monkey-patch this test process.
    code = ("from locust.argument_parser import LocustArgumentParser\n"
            "from echomq_bench.locust.options import DEFAULTS, add_options\n"
            "p = LocustArgumentParser()\n"
            "add_options(p, DEFAULTS)\n"
            "a = p.parse_args(['--lease-ms', '300', '--enqueue-rate', '50'])\n"
            "b = p.parse_args(['--lease', '300ms', '--rate', '50'])\n"
            "c = p.parse_args([])\n"
            "print(a.lease, a.enqueue_rate, b.lease, b.enqueue_rate, c.lease)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env(),
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["300ms", "50.0", "300ms", "50.0", "30s"]


def test_settle_decides_interrupted_calls_from_the_server(queue: Queue) -> None:
    # Calls killed with their reply unread (a ramp-down) are settled at the
    # audit from what the server holds.
    name = queue.name
    done, held = mint(), mint()
    queue.enqueue(done, b"x")
    job = queue.claim(lease_ms=60_000)
    assert job is not None and job.id == done
    queue.complete(job.id, job.token)  # applied; the reply never reached the ledger
    queue.enqueue(held, b"x")
    holder = queue.claim(lease_ms=60_000)
    assert holder is not None and holder.id == held
    applied, never_sent = mint(), mint()
    queue.enqueue(applied, b"x")  # applied, unheard
    books = Books()
    books.ledger.record_enqueue(done, "enqueued")
    books.ledger.record_enqueue(held, "enqueued")
    books.unresolved = [["enqueue", name, [applied, never_sent]],
                        ["complete", name, done, job.token, False],
                        ["complete", name, held, holder.token, False]]  # never applied: still active
    counts = settle(queue.client, books)
    assert counts == {"enqueues": 2, "enqueues_counted": 1, "completes": 2, "completes_accepted": 1}
    assert applied in books.ledger.enqueued and never_sent not in books.ledger.enqueued
    assert books.ledger.accepted[done] == 1 and books.ledger.accepted[held] == 0
