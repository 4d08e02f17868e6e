"""RQ as a peer: `Queue.enqueue_many` to add, a `SimpleWorker` in burst mode to drain.

SimpleWorker runs each job in its own process, with no fork per job (RQ's
default Worker forks a work horse for every job, which would measure fork()
rather than the queue). Every job has result_ttl=0, RQ's way of keeping
nothing once a job succeeds: the job hash is deleted and no result is
written. The rest is RQ's default: pickle serializer, job timeout 180 s,
worker TTL 420 s, heartbeats and registries as the worker keeps them. The
worker logs at WARNING so that no log line per job is formatted.

RQ has no high-throughput setting: a worker process runs one job at a time
and dequeues one per round trip (RQ's WorkerPool adds processes, which the
suite holds equal), so `throughput` runs exactly as `default` does.
"""

from __future__ import annotations

from typing import Any, Callable

from echomq_bench.peers import jobs
from echomq_bench.peers.base import MODES, PAYLOAD, PYTHON_CHILD, Gate, Leftovers, count_keys, require

__all__ = ["RQ"]

ENQUEUE_BATCH = 1000
REGISTRIES = ("wip", "failed", "deferred", "scheduled", "canceled")


class RQ:
    name = "rq"
    distribution = "rq"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = f"Queue.enqueue_many, {ENQUEUE_BATCH} jobs per call (one MULTI/EXEC pipeline)"
    drain_mode = "SimpleWorker.work(burst=True) per consumer, one job at a time, no fork"

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def check(self) -> None:
        require("rq", "rq")

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"worker": "SimpleWorker", "throughput_setting": "none in RQ",
                "burst": True, "result_ttl": 0, "enqueue_batch": ENQUEUE_BATCH,
                "serializer": "pickle (default)", "logging_level": "WARNING",
                "consumers": consumers, "in_flight_per_consumer": 1}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        rq = require("rq", "rq")
        import redis

        conn = redis.Redis.from_url(url)
        q = rq.Queue(queue, connection=conn)
        conn.ping()
        gate.ready()
        sent = 0
        while sent < n:
            size = min(ENQUEUE_BATCH, n - sent)
            q.enqueue_many([rq.Queue.prepare_data(jobs.rq_job, (PAYLOAD,), result_ttl=0) for _ in range(size)])
            sent += size
            progress(sent)
        gate.done()
        conn.close()
        return sent

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        rq = require("rq", "rq")
        import redis

        conn = redis.Redis.from_url(url)
        worker = rq.SimpleWorker([rq.Queue(queue, connection=conn)], connection=conn)
        conn.ping()
        gate.ready()
        worker.work(burst=True, logging_level="WARNING")
        gate.done()
        conn.close()

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        detail = {"queued": int(client.llen(f"rq:queue:{queue}"))}
        detail.update({name: int(client.zcard(f"rq:{name}:{queue}")) for name in REGISTRIES})
        finished = int(client.zcard(f"rq:finished:{queue}"))
        results = count_keys(client, "rq:results:*")
        rows = count_keys(client, "rq:job:*")
        detail.update(finished=finished, results=results, job_rows=rows)
        return Leftovers(pending=sum(detail[k] for k in ("queued", *REGISTRIES)),
                         kept=finished + results, rows=rows, detail=detail)
