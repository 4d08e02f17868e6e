"""A worker that only claims and completes, beside the failover's load.

On a cluster, Queue.claim and Queue.complete go to the node of the client's
slot map themselves, past RedisCluster's own command path, which is the one
that reads the map again after a failure. The probe's Queue has a cluster
client of its own and, once made, makes no other call through it: after the
kill it serves again only because those calls read the map again themselves
(`echomq.outcome.refresh_slots`). Its queue is its own, on the master that is
killed, filled before the load starts, so the audit and the call-log check
never see its jobs.
"""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import redis

from echomq import EchoMQError, Queue, mint
from echomq_bench.faults.clusterload import LEASE_MS, cluster_client
from echomq_bench.load.engine import now
from echomq_bench.servers import EmbeddedCluster

__all__ = ["ClaimProbe", "PROBE_EVERY_S", "probe_jobs"]

PROBE_EVERY_S = 0.05  # between claims: the resolution of the time it served again
FAILOVER_ALLOWANCE_S = 10.0  # claiming the fill allows for besides the load, for the failover itself
WAIT_S = 10.0  # at most, at stop, for a probe that has not been answered since the kill


def probe_jobs(load_s: float) -> int:
    """Jobs enough for a probe that claims one every PROBE_EVERY_S for `load_s` and the failover."""
    return int((load_s + FAILOVER_ALLOWANCE_S) / PROBE_EVERY_S) + 1


class ClaimProbe:
    """Claims from `queue` every PROBE_EVERY_S and completes what it gets,
    from entering it until `stop` (or leaving it); `answered_at` is when the first claim sent
    after the kill was answered (a job, or an empty queue: a master that
    owns the slot answered either way), `failed_claims` how many failed
    before it."""

    def __init__(self, cluster: EmbeddedCluster, queue: str, jobs: int) -> None:
        # Queue takes a RedisCluster as it takes a Redis; its annotation names only the latter.
        fill = Queue(cast(Any, cluster_client(cluster)), queue)
        for _ in range(jobs):
            fill.enqueue(mint(), b"probe")
        fill.client.close()
        self.queue = Queue(cast(Any, cluster_client(cluster)), queue)
        self.kill_at: float | None = None
        self.answered_at: float | None = None
        self.failed_claims = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claim-only", daemon=True)

    def __enter__(self) -> ClaimProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop(wait_s=0)

    def killed(self, at: float) -> None:
        self.kill_at = at

    def stop(self, wait_s: float = WAIT_S) -> None:
        """Stop once a claim was answered since the kill, or `wait_s` passed; once."""
        if self._stop.is_set():
            return
        deadline = now() + wait_s
        while self.kill_at is not None and self.answered_at is None and now() < deadline:
            time.sleep(PROBE_EVERY_S)
        self._stop.set()
        self._thread.join()
        self.queue.client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = now()
            kill_at = self.kill_at
            try:
                job = self.queue.claim(LEASE_MS)
            except (EchoMQError, redis.RedisError, redis.exceptions.RedisClusterException):
                if kill_at is not None and self.answered_at is None:
                    self.failed_claims += 1
            else:
                if kill_at is not None and sent > kill_at and self.answered_at is None:
                    self.answered_at = now()
                if job is not None:
                    self._complete(job.id, job.token)
            self._stop.wait(PROBE_EVERY_S)

    def _complete(self, job_id: str, token: int) -> None:
        try:
            self.queue.complete(job_id, token)
        except (EchoMQError, redis.RedisError, redis.exceptions.RedisClusterException):
            pass  # its lease expires; the probe's figure is its claims
