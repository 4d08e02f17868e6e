"""The Locust scenarios, run as users run them: the venv's `locust` in
subprocesses, headless on each build, through the web UI, and distributed
(a master and two workers), each ending in the audit of every job, kept in
the run's results folder (a `locust` record); and their options as Locust's
own parser refuses or reads them."""

from __future__ import annotations

import json
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
from echomq_bench.locust.books import Books
from echomq_bench.locust.report import settle
from echomq_bench.servers import DEFAULT_SPECS, EmbeddedCluster, EmbeddedServer, free_port
from tests.helpers import ROOT, SCENARIOS, child_env, finished, locust

# Options that make each scenario's story happen within a few seconds.
STORY = {
    "claim_complete": ["--work", "exp:mean=1ms"],
    "crash_reap": ["--crash-rate", "0.2", "--lease", "300ms", "--reap-every", "50ms"],
    "retry_dead": ["--fail-rate", "0.5", "--backoff-base", "5ms", "--backoff-cap", "50ms",
                   "--promote-every", "20ms"],
}


def read_run(folder: Path, output: str) -> dict[str, Any]:
    """The run's record: its summary.json, with its meta.json under `meta`."""
    path = folder / "summary.json"
    assert path.is_file(), f"no {path}; locust said:\n{output[-4000:]}"
    summary = json.loads(path.read_text())
    assert summary["kind"] == "locust"
    return {**summary, "meta": json.loads((folder / "meta.json").read_text())}


@pytest.mark.parametrize("build", DEFAULT_SPECS)
@pytest.mark.parametrize("scenario", list(STORY))
def test_scenario_headless_audit_passes(scenario: str, build: str, tmp_path: Path) -> None:
    args = ["-f", str(SCENARIOS / f"{scenario}.py"), "--headless", "-u", "8", "-r", "8", "-t", "4s",
            "--server", build, "--csv", str(tmp_path / "out" / "run"), "--html", str(tmp_path / "out" / "run.html"),
            "--out", str(tmp_path / "record"), *STORY[scenario]]
    code, output = finished(locust(args, tmp_path))
    audit = read_run(tmp_path / "record", output)
    assert code == 0, output[-4000:]
    assert audit["passed"] is True and audit["audit"]["passed"] is True
    assert (tmp_path / "out" / "run_stats.csv").is_file() and (tmp_path / "out" / "run.html").is_file()
    assert audit["run"]["server"].startswith(build)
    a, flow = audit["audit"], audit["flow"]
    assert a["completed"] > 0 and a["lost"] == 0 and a["double_accepted"] == 0
    assert a["completed"] + a["pending"] + a["active"] + a["scheduled"] + a["dead"] == a["enqueued"]
    checked = audit["call_log"]  # the call-log check
    assert checked["passed"] is True and checked["counts"]["ok"] > 0, checked
    assert checked["processes"] >= 8 + 2 and "call-log check PASS" in output
    assert sorted((tmp_path / "record" / "call_log").glob(f"{audit['run']['run_id']}-local.jsonl"))
    if scenario == "crash_reap":
        assert checked["by_fault"]["crash"]["ok"] > 0  # a zombie's job was struck by its crash first
        assert checked["leases"]["by_client"] > 0
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
    # the run must say so (exit 1, its record passed false).
    lua = tmp_path / "lua"
    shutil.copytree(ROOT / "lua", lua)
    complete = lua / "complete-2.lua"
    text = complete.read_text()
    fenced = "local stale = checkFence(jobKey, id, token, tokenText)"
    assert fenced in text
    complete.write_text(text.replace(fenced, "local stale = nil"))
    args = ["-f", str(SCENARIOS / "crash_reap.py"), "--headless", "-u", "8", "-r", "8", "-t", "4s",
            "--out", str(tmp_path / "record"), *STORY["crash_reap"]]
    code, output = finished(locust(args, tmp_path, env={**child_env(), "ECHOMQ_LUA_DIR": str(lua)}))
    audit = read_run(tmp_path / "record", output)
    assert audit["passed"] is False and audit["audit"]["zombie_accepted"] > 0
    assert code == 1, output[-4000:]
    assert "audit FAIL" in output
    # The call-log check finds it on its own: a zombie's complete accepted after a newer claim.
    checked = audit["call_log"]
    assert checked["passed"] is False and checked["counts"]["stale_accepted"] > 0, checked
    assert checked["by_fault"]["crash"]["stale_accepted"] > 0 and "call-log check FAIL" in output


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
        # No --out: the record lands where every command's does, results/<utc time>-locust in the cwd.
        while not (written := sorted(tmp_path.glob("results/*-locust/summary.json"))):
            assert time.monotonic() < deadline, "no record after stopping from the web UI"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        code, output = finished(proc, 30)
    assert len(written) == 1
    audit = read_run(written[0].parent, output)
    assert audit["passed"] is True and audit["audit"]["completed"] > 100
    assert audit["meta"]["settings"]["work"] == "exp:mean=1ms"
    assert code == 0, output[-4000:]


def distributed(tmp_path: Path, url: str, users: str, master_args: list[str],
                worker_args: list[str]) -> tuple[dict[str, Any], str]:
    """A crash_reap run by a master and two workers against `url`: the
    merged audit, once the master and both workers ended cleanly and it passed."""
    port = free_port()
    scenario = str(SCENARIOS / "crash_reap.py")
    master = locust(["-f", scenario, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                     "--expect-workers", "2", "--headless", "-u", users, "-r", users, "-t", "5s", "--server", url,
                     *master_args, "--out", str(tmp_path / "record"), *STORY["crash_reap"]], tmp_path)
    workers = [locust(["-f", scenario, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port),
                       *worker_args], tmp_path) for _ in range(2)]
    code, output = finished(master)
    for w in workers:
        w_code, w_output = finished(w, 30)
        assert w_code == 0, w_output[-3000:]
    audit = read_run(tmp_path / "record", output)
    assert code == 0, output[-4000:]
    assert audit["passed"] is True and audit["missing_processes"] == 0
    assert audit["run"]["role"] == "master" and audit["run"]["load_processes"] == 2
    assert audit["audit"]["zombie_sent"] > 0 and audit["audit"]["zombie_accepted"] == 0
    assert audit["flow"]["reaped"] > 0  # the master's pump
    # Every load process's call log, shipped with its books, checked on one clock (one machine).
    assert audit["call_log"]["passed"] is True and audit["call_log"]["one_clock"] is True
    assert len(list((tmp_path / "record" / "call_log").glob(f"{audit['run']['run_id']}-*.jsonl"))) == 3
    return audit, output


@pytest.mark.parametrize("server", ["redis"], indirect=True)
@pytest.mark.usefixtures("client")  # an empty server, as when the run had one of its own
def test_distributed_master_and_two_workers_merge_their_books(server: EmbeddedServer, tmp_path: Path) -> None:
    audit, _ = distributed(tmp_path, server.url, "10", [], [])
    assert audit["audit"]["completed"] > 0


@pytest.mark.parametrize("cluster", ["valkey-cluster"], indirect=True)
def test_distributed_run_over_a_cluster_spreads_queues_and_reports_each_master(cluster: EmbeddedCluster,
                                                                                tmp_path: Path) -> None:
    """A master and two workers against a cluster that already runs (its
    redis+cluster:// URL): the queues land one per master, every master
    serves completes, and the merged audit passes."""
    audit, output = distributed(tmp_path, cluster.url, "9", ["--queues", "3"], ["--server", cluster.url])
    assert "queues over the cluster's masters" in output and "per node (3 masters" in output
    nodes = audit["nodes"]
    assert {n["node"] for n in nodes} == {m.name for m in cluster.masters()}
    assert all(len(n["queues"]) == 1 and n["completed"] > 0 for n in nodes)
    assert sum(n["completed"] for n in nodes) == audit["audit"]["completed"]
    assert all(0 < n["server_main_util"] < 1.5 for n in nodes)


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


def test_engine_roles_over_locust_calls_name_each_request_and_keep_the_books(client: Any) -> None:
    """What a Locust user's task does, outside Locust: the engine's roles over
    LocustCalls on a held wire, each call one request event, the books kept."""
    from types import SimpleNamespace

    import pytest

    from echomq._instrument import verbs
    from echomq.errors import StaleTokenError
    from echomq._instrument import QueueKeys
    from echomq_bench.load.engine import Consumer, ConsumerPolicy, Producer, ProducerPolicy, Pump, PumpPolicy, Stop
    from echomq_bench.locust.calls import LocustCalls, unresolved_ops
    from echomq_bench.load.recorders import LedgerRecorder
    from echomq_bench.locust.books import Drained, Gate
    from echomq_bench.locust.wire import ConnectionFactory

    fired: list[dict[str, Any]] = []
    environment = SimpleNamespace(events=SimpleNamespace(request=SimpleNamespace(fire=lambda **kw: fired.append(kw))))
    kw = client.connection_pool.connection_kwargs
    factory = ConnectionFactory(f"redis://{kw['host']}:{kw['port']}")
    keys, other = QueueKeys(f"lc-{mint()}"), QueueKeys(f"lc-{mint()}")
    names = {k: q.name for q in (keys, other) for k in (q.pending, q.active)}
    books, gate = Books(), Gate()
    wire = factory.wire(factory.scripts())
    calls = LocustCalls(environment, wire, books, gate, names)
    recorder = LedgerRecorder(books.ledger, books.counters, books.completed)
    try:
        Producer(calls, [keys], ProducerPolicy(batch=2, total=2), recorder).run()
        consumer = Consumer(calls, [keys], ConsumerPolicy(fail_rate=1.0, max_attempts=2, idle_s=0.0), recorder)
        consumer.step()  # claim, then retry: scheduled
        consumer.step()  # the second job: retry, scheduled
        consumer.step()  # nothing pending: claim (empty)
        Pump(calls, [keys], PumpPolicy(reap=False, promote_limit=10), recorder).step()
        consumer.run(Stop(deadline=time.perf_counter() + 5, alive=lambda: books.counters["retry_dead"] < 2))
        with pytest.raises(StaleTokenError):
            calls.call(verbs.complete(keys, mint(), 1))
    finally:
        wire.close()
    requests = [(f["name"], type(f["exception"]).__name__ if f["exception"] else None) for f in fired]
    assert requests[:6] == [("enqueue", None), ("claim", None), ("retry (scheduled)", None), ("claim", None),
                            ("retry (scheduled)", None), ("claim (empty)", None)]
    assert requests[6] == ("promote", None) and ("retry (dead)", None) in requests
    assert requests[-1] == ("complete", "StaleTokenError")  # a lease holder's refusal is a failure
    assert all(f["request_type"] == "echomq" and f["response_time"] > 0 for f in fired)  # each call timed
    assert len(books.ledger.enqueued) == 2
    assert books.counters == {"retry_scheduled": 2, "promoted": 2, "retry_dead": 2}
    # What an unanswered call leaves for the audit, and a drained gate stops the next call.
    ids = [mint() for _ in range(3)]
    assert unresolved_ops([verbs.enqueue(keys, ids[0], b"x"), verbs.enqueue(other, ids[1], b"x"),
                           verbs.enqueue(keys, ids[2], b"x"), verbs.complete(keys, ids[0], 4)], names) == [
        ["enqueue", keys.name, [ids[0], ids[2]]], ["enqueue", other.name, [ids[1]]],
        ["complete", keys.name, ids[0], 4, False]]
    gate.drain(0.0)
    with pytest.raises(Drained):
        calls.call(verbs.claim(keys, 1000))


def test_a_zombies_complete_is_one_measured_request_on_the_users_client(client: Any) -> None:
    """The user's one client sends a zombie's complete through the same
    measured request as the engine's calls: refused is expected, accepted fails."""
    from types import SimpleNamespace

    from echomq._instrument import QueueKeys, verbs
    from echomq_bench.locust.calls import LocustCalls
    from echomq_bench.locust.books import Gate
    from echomq_bench.locust.wire import ConnectionFactory, QueueWire

    fired: list[dict[str, Any]] = []
    environment = SimpleNamespace(events=SimpleNamespace(request=SimpleNamespace(fire=lambda **kw: fired.append(kw))))
    kw = client.connection_pool.connection_kwargs
    factory = ConnectionFactory(f"redis://{kw['host']}:{kw['port']}")
    keys = QueueKeys(f"lz-{mint()}")
    books, gate = Books(), Gate()
    wire = factory.wire(factory.scripts())
    calls = LocustCalls(environment, wire, books, gate, {keys.pending: keys.name, keys.active: keys.name})
    q = QueueWire(keys.name, wire.scripts, 60_000)
    job = mint()
    try:
        calls.call(verbs.enqueue(keys, job, b"x"))
        _, _, token = calls.call(verbs.claim(keys, 60_000))
        # Sent with the live token, as a zombie would be if the fence let it through.
        assert calls.zombie_complete(q, job, token) is True
        assert calls.zombie_complete(q, job, token) is False  # the row is gone: refused
    finally:
        wire.close()
    requests = [(f["name"], type(f["exception"]).__name__ if f["exception"] else None) for f in fired]
    assert requests == [("enqueue", None), ("claim", None), ("complete (zombie)", "ZombieAccepted"),
                        ("complete (zombie refused)", None)]
    assert all(f["request_type"] == "echomq" and f["response_time"] > 0 for f in fired)
    assert (books.ledger.zombie_sent, books.ledger.zombie_accepted, books.ledger.refused) == (2, [job], [(job, token)])
    assert books.completed == {keys.name: 1} and not books.unresolved and not gate.busy


def test_a_held_wire_loads_the_scripts_again_and_resends_only_what_noscript_refused(client: Any) -> None:
    """After SCRIPT FLUSH a Locust wire loads the scripts on its own connection
    (the client's reload) and resends the calls answered NOSCRIPT alone: a
    complete that ran in the first send is not sent twice."""
    from echomq import StaleTokenError
    from echomq._instrument import QueueKeys, discover, verbs
    from echomq_bench.locust.wire import ConnectionFactory

    kw = client.connection_pool.connection_kwargs
    factory = ConnectionFactory(f"redis://{kw['host']}:{kw['port']}")
    scripts = factory.scripts()
    wire = factory.wire(scripts)
    keys = QueueKeys(f"lw-{mint()}")
    first, second = mint(), mint()
    try:
        for job in (first, second):
            assert wire.call(verbs.enqueue(keys, job, b"x").evalsha(scripts.sha("enqueue"))) == b"enqueued"
        client.script_flush()
        _, _, token = wire.call(verbs.claim(keys, 60_000).evalsha(scripts.sha("claim")))
        client.script_flush()
        client.script_load(discover()["complete"].text)
        done, claimed = wire.pipeline([verbs.complete(keys, first, token).evalsha(scripts.sha("complete")),
                                       verbs.claim(keys, 60_000).evalsha(scripts.sha("claim"))])
        assert done == b"ok"  # had the complete been resent, it would read EMQSTALE
        assert claimed[0] == second.encode() and claimed[2] == 1
        assert all(client.script_exists(*[scripts.sha(v) for v in scripts.sources]))
        with pytest.raises(StaleTokenError):
            wire.call(verbs.complete(keys, first, token).evalsha(scripts.sha("complete")))
    finally:
        wire.close()
    assert client.exists(keys.job(first)) == 0 and client.zcard(keys.pending) == 0


# -- the options as Locust's own parser reads or refuses them; no run reaches a server ----


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
    ("--lease", "0", "must be from 1ms"),
    ("--rate", "fast", "'fast' is not a number"),
])
def test_bad_option_exits_2_naming_it(option: str, value: str, said: str, tmp_path: Path) -> None:
    code, output = finished(locust(["-f", str(SCENARIOS / "claim_complete.py"), "--headless", "-t", "1s",
                                    option, value], tmp_path))
    assert code == 2
    assert f"argument {option}" in output and said in output


def test_the_old_spellings_are_refused_as_unknown(tmp_path: Path) -> None:
    """--lease-ms and --enqueue-rate are gone: argparse refuses them as it refuses any unknown flag."""
    for option, value in (("--lease-ms", "300"), ("--enqueue-rate", "50")):
        code, output = finished(locust(["-f", str(SCENARIOS / "claim_complete.py"), "--headless", "-t", "1s",
                                        option, value], tmp_path))
        assert code == 2
        assert f"unrecognized arguments: {option}" in output


def test_the_options_parse_as_given(tmp_path: Path) -> None:
    # Locust's own parser, in a child: importing locust here would monkey-patch this test process.
    code = ("from locust.argument_parser import LocustArgumentParser\n"
            "from echomq_bench.locust.options import DEFAULTS, add_options\n"
            "p = LocustArgumentParser()\n"
            "add_options(p, DEFAULTS)\n"
            "given = p.parse_args(['--lease', '300ms', '--rate', '50'])\n"
            "default = p.parse_args([])\n"
            "print(given.lease, given.enqueue_rate, default.lease, default.enqueue_rate)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env(),
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["300ms", "50.0", "30s", "0.0"]
