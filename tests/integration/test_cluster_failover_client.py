"""A process that only claims and completes, on redis-py's cluster client,
serves again after its master is killed and a replica takes the slots.

Queue.claim, complete and retry go to the node of the cached slot map
themselves (sent once, never through RedisCluster's resends), so nothing
but their own failures can tell the client that the map is out of date.
When no node can give a new map, the call still raises its own failure."""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections import Counter

import pytest

from echomq import Job, OutcomeUnknownError, Queue, ServerUnavailableError, mint
from echomq.outcome import Identity
from echomq_bench.servers import ClusterNotReadyError, EmbeddedCluster, start
from echomq_bench.servers.spec import CLUSTER_WORDS

BUILDS = list(CLUSTER_WORDS)
JOBS = 4
PROMOTION_TIMEOUT_S = 60
# Once every node agrees on the new master, the first claim may still meet
# the old map; its failure re-reads the map, and the next one is served.
ATTEMPTS_ONCE_READY = 3
PAUSE_S = 0.05


def _ready(cluster: EmbeddedCluster, masters: int) -> bool:
    try:
        cluster.wait_ready(PAUSE_S, expect_masters=masters)
    except ClusterNotReadyError:
        return False
    return True


def _claim(queue: Queue, failures: Counter[str]) -> Job | None:
    try:
        return queue.claim(lease_ms=30_000)
    except (ServerUnavailableError, OutcomeUnknownError) as exc:
        failures[type(exc).__name__] += 1
        return None


@pytest.mark.parametrize("build", BUILDS)
def test_a_claim_only_process_claims_again_after_its_master_is_killed(build: str) -> None:
    cluster = start(f"t={build} --replicas 1 --cluster-node-timeout 1000")
    assert isinstance(cluster, EmbeddedCluster)
    try:
        name = f"fo-claim-{secrets.token_hex(3)}"
        producer = Queue(cluster.client(), name)
        ids = [mint() for _ in range(JOBS)]
        for job_id in ids:
            assert producer.enqueue(job_id, b"work") == "enqueued"
        # The worker's own client: after the kill it makes no call but claim and complete.
        worker = Queue(cluster.client(socket_timeout=1, socket_connect_timeout=1), name)
        job = worker.claim(lease_ms=30_000)
        assert job is not None and worker.complete(job.id, job.token) == "ok"
        done = {job.id}
        owner = worker.client.get_node_from_key(worker.keys.pending).name  # type: ignore[attr-defined]
        victim = next(n for n in cluster.nodes if n.name == owner)
        masters = len(cluster.masters())
        with victim.client() as vc:  # the replica holds every job before its master dies
            assert vc.wait(1, 5000) == 1
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)

        failures: Counter[str] = Counter()
        claimed = None
        deadline = time.monotonic() + PROMOTION_TIMEOUT_S
        while claimed is None and not _ready(cluster, masters):
            assert time.monotonic() < deadline, f"no replica took over within {PROMOTION_TIMEOUT_S} s"
            claimed = _claim(worker, failures)
        assert failures["ServerUnavailableError"] > 0, failures  # the outage was seen
        attempts = 0
        while claimed is None and attempts < ATTEMPTS_ONCE_READY:
            attempts += 1
            claimed = _claim(worker, failures)
            if claimed is None:
                time.sleep(PAUSE_S)
        assert claimed is not None, (f"the cluster is ready on a new master, and {attempts} claims after it "
                                     f"still failed: {dict(failures)}")

        new_owner = worker.client.get_node_from_key(worker.keys.pending).name  # type: ignore[attr-defined]
        assert new_owner != owner
        new_master = next(n for n in cluster.nodes if n.name == new_owner)
        with new_master.client() as nc:
            assert worker.identity == Identity.of(nc.info())  # its leases name the master that granted them
        while claimed is not None:
            assert worker.complete(claimed.id, claimed.token) == "ok"
            done.add(claimed.id)
            claimed = worker.claim(lease_ms=30_000)
        assert done == set(ids)
    finally:
        cluster.stop()


@pytest.mark.parametrize("build", BUILDS)
def test_when_no_node_answers_the_map_stays_and_the_call_reports_its_own_failure(build: str) -> None:
    cluster = start(f"t={build} --masters 1")
    assert isinstance(cluster, EmbeddedCluster)
    try:
        queue = Queue(cluster.client(socket_timeout=1, socket_connect_timeout=1), f"gone-{secrets.token_hex(3)}")
        job_id = mint()
        assert queue.enqueue(job_id, b"work") == "enqueued"
        job = queue.claim(lease_ms=30_000)
        assert job is not None
        node = queue.client.get_node_from_key(queue.keys.pending)  # type: ignore[attr-defined]
        cluster.stop()
        # The map cannot be read again from any node: each call raises the failure it had, in the tree.
        with pytest.raises(ServerUnavailableError):
            queue.claim(lease_ms=30_000)
        with pytest.raises(ServerUnavailableError):
            queue.complete(job.id, job.token)
        assert queue.client.get_node_from_key(queue.keys.pending).name == node.name  # type: ignore[attr-defined]
    finally:
        cluster.stop()
