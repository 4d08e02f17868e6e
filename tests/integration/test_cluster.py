"""Redis Cluster and Valkey Cluster on real nodes: the local launcher, the queue
through redis-py's cluster client, the queue-name chooser, and a failover."""

from __future__ import annotations

import contextlib
import io
import json
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq import Queue, StaleTokenError, mint
from echomq_bench.conformance.stories import run_check
from echomq_bench.cli import main
from echomq_bench.servers import (
    EmbeddedCluster,
    EmbeddedServer,
    UrlCluster,
    format_placements,
    queue_slot,
    spread_queues,
)
from echomq_bench.faults.failover import run_failover
from echomq_bench.records.kinds.faults import AuditEntry
from echomq_bench.servers import Server, ServerStartError, parse_server_spec, start
from echomq_bench.servers.spec import CLUSTER_WORDS
from echomq_bench.conformance.stories import STORIES
from tests.helpers import ROOT, alive, evalsha_calls, wait_past

BUILDS = list(CLUSTER_WORDS)


# --------------------------------------------------------------------------
# The launcher


@pytest.mark.parametrize("build", BUILDS)
def test_cluster_with_replicas_is_ready_then_leaves_nothing(build: str) -> None:
    c = start(f"t={build} --replicas 1")
    assert isinstance(c, EmbeddedCluster)
    try:
        pids = [n.pid for n in c.nodes]
        dirs = [s.dir for s in c.servers]
        assert len(pids) == 6 and all(p is not None and alive(p) for p in pids)
        views = c.states()
        assert len(views) == 6
        for view in views.values():
            masters = sorted((s.slots, s.addr) for s in view if s.role == "master")
            assert [slots for slots, _ in masters] == [((0, 5460),), ((5461, 10922),), ((10923, 16383),)]
            replicas = [s for s in view if s.role == "replica"]
            ids = {s.node_id for s in view if s.role == "master"}
            assert len(replicas) == 3 and {s.master_id for s in replicas} == ids
        for node in c.nodes:
            with node.client() as nc:
                assert nc.cluster("info")["cluster_state"] == "ok"
        assert [m.name for m in c.masters()] == [n.name for n in c.nodes[:3]]
        assert c.version().split()[0] == build.removesuffix("-cluster")
    finally:
        c.stop()
    assert not any(alive(p) for p in pids if p is not None)
    assert not any(d.exists() for d in dirs)
    c.stop()  # twice is fine


@pytest.mark.parametrize("build", BUILDS)
def test_clusters_are_servers_whose_credentials_log_in(build: str) -> None:
    password = "cl-" + secrets.token_hex(6)
    c = start(f"locked={build} --masters 1 --requirepass {password}")
    try:
        remote = start(c.connection_url())
        assert isinstance(c, EmbeddedCluster) and isinstance(remote, UrlCluster)
        for kind in (c, remote):
            assert isinstance(kind, Server)
            assert (kind.host, kind.port, kind.pid) == ("127.0.0.1", c.nodes[0].port, None)
            kwargs = kind.connection_kwargs()
            assert (kwargs["host"], kwargs["port"], kwargs["password"]) == ("127.0.0.1", c.nodes[0].port, password)
            with redis.Redis(**kwargs) as direct:
                assert direct.cluster("info")["cluster_state"] == "ok"
            assert kind.client().ping() is True
            assert kind.version().split()[0] == build.removesuffix("-cluster")
            for shown in (repr(kind), kind.describe(), kind.display_url):
                assert password not in shown, shown
        assert password not in c.url and password in remote.url  # a URL server's own URL carries it
        assert remote.display_url == f"redis+cluster://:***@127.0.0.1:{c.nodes[0].port}"
        for node in remote.nodes:
            assert node.connection_kwargs()["password"] == password
            with node.client() as nc:
                assert nc.ping() is True
        # Without the accessor's password the node refuses: the check can fail.
        with pytest.raises(redis.AuthenticationError), redis.Redis(
                host="127.0.0.1", port=c.nodes[0].port, retry=Retry(NoBackoff(), 0)) as anon:
            anon.ping()
    finally:
        c.stop()


CRASHING_PARENT = textwrap.dedent(
    """
    import json, time
    from echomq_bench.servers import start

    cluster = start("redis-cluster")
    print(json.dumps([[n.pid, str(n.server.dir)] for n in cluster.nodes]), flush=True)
    time.sleep(60)
    """
)


def test_sigkill_of_the_process_that_started_a_cluster_leaves_nothing() -> None:
    parent = subprocess.Popen([sys.executable, "-c", CRASHING_PARENT], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        nodes = json.loads(parent.stdout.readline())
        assert len(nodes) == 3 and all(alive(pid) and Path(path).is_dir() for pid, path in nodes)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(pid) or Path(path).exists() for pid, path in nodes):
            time.sleep(0.05)
        assert not any(alive(pid) or Path(path).exists() for pid, path in nodes)
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


# --------------------------------------------------------------------------
# The queue through the cluster client


def test_queues_spread_over_masters_and_every_verb_runs_on_its_node(cluster: EmbeddedCluster) -> None:
    client = cluster.client()
    tag = secrets.token_hex(2)
    placements = spread_queues(client, 6, prefix=f"s{tag}-")
    masters = [m.name for m in cluster.masters()]
    assert [p.node for p in placements] == masters * 2
    assert all(queue_slot(p.queue) == p.slot for p in placements)
    assert "per node: " in format_placements(placements)
    before = {m.name: m.client().info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
              for m in cluster.masters()}
    for p in placements:
        q = Queue(client, p.queue, max_attempts=2)
        first, second = mint(), mint()
        assert q.enqueue(first, b"a") == "enqueued" and q.enqueue(second, b"b") == "enqueued"
        assert q.browse(limit=5) == [second, first] and q.pending_size() == 2
        job = q.claim(lease_ms=30_000)
        assert job is not None and job.id == first and job.token == 1
        assert q.complete(job.id, job.token) == "ok"
        with pytest.raises(StaleTokenError):
            q.complete(job.id, job.token)
        job = q.claim(lease_ms=1)
        assert job is not None and job.id == second
        wait_past(client, client.zscore(q.keys.active, job.id))
        assert q.reap() == 1
        job = q.claim(lease_ms=30_000)
        assert job is not None and job.token == 2
        assert q.retry(job.id, job.token, "boom", delay_ms=0) == "dead"
        assert q.browse(limit=5, state="dead") == [second] and q.promote() == 0
        # The keys live on the master that owns the queue's slot, and only there.
        owner = next(m for m in cluster.masters() if m.name == p.node)
        with owner.client() as oc:
            assert oc.exists(q.keys.dead, q.keys.job(second)) == 2
        for other in cluster.masters():
            if other.name != p.node:
                with other.client() as xc, pytest.raises(redis.exceptions.MovedError):
                    xc.exists(q.keys.dead)
    after = {m.name: m.client().info("commandstats")["cmdstat_evalsha"]["calls"] for m in cluster.masters()}
    # Two queues per master, ten scripted calls per queue (the refused complete counts).
    assert {name: after[name] - before[name] for name in after} == {name: 20 for name in after}


def test_check_passes_on_the_cluster(cluster: EmbeddedCluster) -> None:
    lines = list(run_check(cluster.client()))
    assert [line.tag for line in lines if not line.ok] == []
    assert len(lines) == len(STORIES)


def test_cli_check_on_a_running_cluster_url(cluster: EmbeddedCluster) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check", "--server", f"here={cluster.url}"])
    assert code == 0, out.getvalue()
    with cluster.nodes[0].client() as node:
        allocator = node.info("memory")["mem_allocator"]
    # A running server names its build as it reports it: version, allocator, the binary it runs.
    build = f"{cluster.version()}, malloc {allocator}, {shutil.which(str(cluster.spec.binary))}"
    assert f"== here: {build} ==" in out.getvalue()
    assert out.getvalue().rstrip().endswith(f"PASS {len(STORIES)}/{len(STORIES)}")


def test_url_cluster_finds_every_node(cluster: EmbeddedCluster) -> None:
    remote = start(cluster.url)
    assert isinstance(remote, UrlCluster)
    assert isinstance(remote, Server) and isinstance(cluster, Server)
    assert remote.connection_url() == cluster.connection_url() == cluster.url  # no password to carry
    assert sorted(n.name for n in remote.nodes) == sorted(n.name for n in cluster.nodes)
    assert all(n.pid is None for n in remote.nodes)
    assert [m.name for m in remote.masters()] == [m.name for m in cluster.masters()]
    q = Queue(remote.client(), f"u{secrets.token_hex(3)}")
    q.enqueue(mint(), b"x")
    job = q.claim(lease_ms=1000)
    assert job is not None and q.complete(job.id, job.token) == "ok"
    remote.stop()  # does nothing to a cluster it did not start
    assert all(n.running for n in cluster.nodes)


@pytest.mark.parametrize("server", ["redis"], indirect=True)
def test_url_cluster_pointing_at_a_plain_server_says_so(server: EmbeddedServer) -> None:
    with pytest.raises(ServerStartError, match=f"without cluster mode; use redis://127.0.0.1:{server.port}"):
        start(f"redis+cluster://127.0.0.1:{server.port}")


# --------------------------------------------------------------------------
# Failover


@pytest.mark.parametrize("build", BUILDS)
def test_failover_replica_takes_over_and_the_audit_accounts_for_every_job(build: str) -> None:
    """A failure here with `lost` or `in two places` above 0 is a finding,
    not a flaky test: asynchronous replication lost acknowledged writes."""
    result = run_failover(parse_server_spec(build), queues=3, rate=200, before_s=1.0, after_s=1.0)
    assert result.new_master != result.victim
    assert result.kill_to_resumed_s is not None and result.kill_to_resumed_s > 0
    # The worker that only claims and completes, whose client nothing else refreshes, is served again:
    # its queue lives on the killed master, so an answer to a claim sent after the kill came from the
    # promoted replica. Whether any claim failed first is timing: the cluster client may hold one
    # claim in its own retries through the whole failover.
    assert result.kill_to_claim_only_s is not None and result.kill_to_claim_only_s > 0
    report = AuditEntry.from_record(result.audit)
    assert (report.enqueued or 0) > 100 and (report.completed or 0) > 100
    assert report.passed, result.audit
    # The call-log check, apart from the audit, with the jobs the failover touched counted under it.
    checked = result.history
    assert checked["passed"] is True, checked
    assert checked["counts"]["ok"] > 100 and checked["by_fault"]["failover"]["ok"] > 0, checked
    assert result.passed


def test_master_clients_reach_each_master_alone(cluster: EmbeddedCluster) -> None:
    from echomq_bench.servers import master_clients
    from echomq_bench.measurement.serverstats import sample

    expected = [m.name for m in cluster.masters()]
    for target in (cluster, cluster.client()):
        clients = master_clients(target)
        assert list(clients) == expected
        for addr, c in clients.items():
            assert sample(c).main_cpu_s > 0
            assert c.cluster("myid").decode() in {s.node_id for s in cluster.masters()[0].state() if s.addr == addr}


def test_locust_cluster_wire_routes_by_slot_and_follows_moved(cluster: EmbeddedCluster) -> None:
    """The scenarios' cluster wire: each queue's verbs reach its master; a
    stale slot map (as after a failover) gets MOVED, re-reads and succeeds."""
    from echomq._instrument import verbs
    from echomq_bench.locust.cluster_wire import ClusterRouter
    from echomq_bench.locust.wire import QueueWire

    router = ClusterRouter(cluster.url)
    scripts = router.scripts()
    wire = router.wire(scripts)
    names = [p.queue for p in spread_queues(cluster, 3, "wire")]
    queues = [QueueWire(n, scripts, 30_000) for n in names]
    try:
        for q in queues:
            ids = [mint() for _ in range(3)]
            enqueues = [verbs.enqueue(q.keys, i, b"x").evalsha(scripts.sha("enqueue")) for i in ids]
            assert wire.pipeline(enqueues) == [b"enqueued"] * 3
        assert len(wire.wires) == 3  # one held connection per master
        masters = sorted({p.node for p in spread_queues(cluster, 3, "wire")})
        right = {q.name: router.node_for(q.keys.pending) for q in queues}
        for q in queues:  # poison the map: every queue points at another master
            router._slots[q.name] = next(n for n in masters if n != right[q.name])
        claim = verbs.claim(queues[0].keys, 30_000).evalsha(scripts.sha("claim"))
        job_id, _, token = wire.call(claim)  # MOVED, re-read, sent again
        assert router._slots[queues[0].name] == right[queues[0].name]
        assert wire.call(queues[0].complete(job_id.decode(), int(token))) == b"ok"
        for q in queues[1:]:
            router._slots[q.name] = next(n for n in masters if n != right[q.name])
        assert wire.pipeline([("ZCARD", q.keys.pending) for q in queues]) == [2, 3, 3]
        assert {q.name: router.node_for(q.keys.pending) for q in queues} == right
    finally:
        wire.close()
        router.client.close()


# --------------------------------------------------------------------------
# The capacity driver over a cluster


def test_capacity_over_a_cluster_counts_every_cycle_on_its_node(cluster: EmbeddedCluster) -> None:
    from echomq_bench.load.bulk import drop_queue
    from echomq_bench.capacity.runner import run_capacity
    from echomq_bench.capacity.settings import CapacitySettings
    from echomq_bench.capacity.cluster import ClusterCapacityResult
    from echomq._instrument import QueueKeys

    masters = {m.name: m for m in cluster.masters()}
    before = {name: evalsha_calls(m.client()) for name, m in masters.items()}
    settings = CapacitySettings(duration_s=0.4, warmup_s=0.1, connections=2, pipeline=16, backlog=30_000,
                                ledger=True, keep_keys=True)
    r = run_capacity(cluster, settings)
    assert isinstance(r, ClusterCapacityResult)
    try:
        # One queue per master by default, each on a different master, a row for every master.
        assert len(r.placements) == 3 and {p.node for p in r.placements} == set(masters)
        assert [n.node for n in r.nodes] == list(masters) and not r.unloaded
        for n in r.nodes:
            assert n.queues == tuple(p.queue for p in r.placements if p.node == n.node)
            assert n.result.cycles > 0
        assert r.cycles == sum(n.result.cycles for n in r.nodes)
        assert r.cycles_per_s == pytest.approx(sum(n.result.cycles_per_s for n in r.nodes))
        assert r.server_utilization == max(n.result.server_utilization for n in r.nodes)
        # The busiest master is named exactly when the run was server-bound.
        assert (r.bound_node in masters) == (r.bound == "server") and (r.bound_node is None) == (r.bound != "server")
        assert r.audit is not None and r.audit["passed"], r.audit
        # The driver's completes per queue equal what the server completed: its sets, read here.
        assert r.accounting_passed and len(r.accounting) == 3
        client = cluster.client()
        for row in r.accounting:
            k = QueueKeys(row["queue"])
            assert client.zcard(k.active) == 0
            assert client.zcard(k.pending) == row["filled"] - row["driver_completed"]
            assert row["driver_completed"] == row["server_completed"] > 0
        assert sum(row["filled"] for row in r.accounting) == 30_000
        # Each master ran exactly its own workers' scripts: one EVALSHA per claim and per complete.
        for n in r.nodes:
            c = n.result.counts
            assert c["completed"] == sum(row["driver_completed"] for row in r.accounting if row["node"] == n.node)
            assert evalsha_calls(masters[n.node].client()) - before[n.node] == c["claims"] + c["completed"]
        entry = r.entry()
        assert [e.node for e in entry.nodes] == list(masters)
        assert entry.ceiling_claims_per_s is None and "redis-benchmark" in str(entry.ceiling_note)
        assert "share this machine's" in str(entry.pinning) and "cores" in str(entry.cores_note)
    finally:
        for name, m in masters.items():
            with m.client() as c:
                for queue in [p.queue for p in r.placements if p.node == name]:
                    drop_queue(c, queue)


def test_capacity_cli_on_a_cluster_splits_the_rate_feeds_each_queue_and_writes_node_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import csv

    from echomq_bench.report import record_text

    out = tmp_path / "cap"
    code = main(["capacity", "--server", "redis-cluster", "--duration", "300ms", "--warmup", "100ms",
                 "--rate", "6000", "--connections", "2", "--queues", "4", "--feed", "produce", "--out", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    printed = captured.out
    entry = json.loads((out / "summary.json").read_text())["builds"]["redis-cluster"]
    # What it prints is the record through the report's renderer: a row per master and the total,
    # what bound the run, the cores it shared and the per-queue accounting's verdict.
    assert printed == record_text(out) + f"\nresults: {out}\n"
    assert max(len(line) for line in printed.splitlines()) <= 100
    flat = " ".join(printed.split())
    for n in entry["nodes"]:
        row = next(line.split() for line in printed.splitlines() if line.startswith(n["node"] + " "))
        assert row[:3] == [n["node"], str(len(n["queues"])), f"{n['cycles_per_s']:,.0f}"]
    total = next(line.split() for line in printed.splitlines() if line.startswith("total "))
    assert total[:3] == ["total", "4", f"{entry['cycles_per_s']:,.0f}"]
    assert f"Bound: {entry['bound']}" in flat and entry["busiest_node"] in flat
    done = sum(row["driver_completed"] for row in entry["accounting"])
    assert (f"Accounting: PASS (per queue, driver completes == server completes; 4 queues, {done:,} completes "
            "in all).") in flat
    assert f"Cores: {entry['cores_note']}" in flat and "share this machine's" in flat
    assert f"Ceiling: {entry['ceiling_note']}." in flat
    # The placement is shown before the run (stderr, beside the progress), and again with the tables.
    placed = captured.err.index("per node: ")
    assert placed < captured.err.index("filling")
    per_master = ", ".join(f"{n['node']} {len(n['queues'])}" for n in sorted(entry["nodes"], key=lambda n: n["node"]))
    assert f"queues per master: {per_master}" in flat
    assert entry["queues"] == 4 and len(entry["placements"]) == 4 and len(entry["nodes"]) == 3
    assert entry["cycles_per_s"] == pytest.approx(sum(n["cycles_per_s"] for n in entry["nodes"]))
    assert entry["accounting_passed"] and entry["ceiling_claims_per_s"] is None
    # Producers fed every queue, and each queue's completes match what the server saw enqueued and done.
    assert len(entry["accounting"]) == 4
    for row in entry["accounting"]:
        assert row["enqueued"] > 0 and row["driver_completed"] == row["server_completed"] > 0
    # The rate is split by queues: a master with two of the four queues gets half of it, and an open
    # loop never claims ahead of its schedule (one claim per connection may be due at the start).
    for n in entry["nodes"]:
        share = 6000 * len(n["queues"]) / 4
        assert 0 < n["counts"]["claims"] <= share * 0.4 + 2
    rows = list(csv.DictReader((out / "capacity.csv").open()))
    assert {row["node"] for row in rows} == {n["node"] for n in entry["nodes"]} | {"all"}
    meta = json.loads((out / "meta.json").read_text())
    assert len(meta["clusters"]["redis-cluster"]["placements"]) == 4


def test_url_cluster_that_does_not_answer_is_refused() -> None:
    from echomq_bench.servers import free_port

    with pytest.raises(ServerStartError, match="does not answer"):
        start(f"redis+cluster://127.0.0.1:{free_port()}")
