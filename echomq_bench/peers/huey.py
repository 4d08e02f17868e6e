"""Huey with `RedisHuey`: results off, thread workers.

Enqueue: calling the task once per job, each one LPUSH of a pickled
message (Huey has no bulk enqueue). Drain: one consumer per process, whose
worker threads each take one message per BRPOP (Huey's blocking read).
With results=False nothing is written once a task ran; there is no ack:
a message taken is gone from the server.

`default` keeps Huey's one worker thread. Huey documents no batching;
its one throughput knob is the number of workers, so `throughput` runs 100
worker threads, the jobs in flight the other queues get.

Huey's consumer has no burst mode: it stops when the runner says every job
has run.
"""

from __future__ import annotations

from typing import Any, Callable

from echomq_bench.peers import jobs
from echomq_bench.peers.base import MODES, PAYLOAD, PYTHON_CHILD, Gate, Leftovers, require

__all__ = ["Huey"]

WORKERS = {"default": 1, "throughput": 100}
PROGRESS_EVERY = 1000


def _task(url: str, queue: str) -> Any:
    huey = require("huey", "huey")
    app = huey.RedisHuey(queue, url=url, results=False)
    return app.task(name="noop")(jobs.run_job)


class Huey:
    name = "huey"
    distribution = "huey"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = "calling the task once per job (one LPUSH each)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.workers = WORKERS[mode]
        self.drain_mode = f"Consumer(workers={self.workers}, worker_type=thread), one BRPOP per job"

    def check(self) -> None:
        require("huey", "huey")

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"storage": "RedisHuey, blocking", "results": False, "workers": self.workers,
                "worker_type": "thread", "serializer": "pickle (default)", "consumers": consumers,
                "in_flight_per_consumer": self.workers}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        task = _task(url, queue)
        task.huey.storage.conn.ping()
        gate.ready()
        for sent in range(1, n + 1):
            task(PAYLOAD)
            if sent % PROGRESS_EVERY == 0:
                progress(sent)
        progress(n)
        gate.done()
        return n

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        task = _task(url, queue)
        consumer = task.huey.create_consumer(workers=self.workers, worker_type="thread")
        task.huey.storage.conn.ping()
        gate.ready()
        consumer.start()
        gate.stop.wait()
        consumer.stop(graceful=True)
        gate.done(at=jobs.finished_at())

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        detail = {"queued": int(client.llen(f"huey.redis.{queue}")),
                  "scheduled": int(client.zcard(f"huey.schedule.{queue}")),
                  "results": int(client.hlen(f"huey.results.{queue}"))}
        # The message in the queue's list is the job's record: there is no row apart from it.
        pending = detail["queued"] + detail["scheduled"]
        return Leftovers(pending=pending, kept=detail["results"], rows=pending, detail=detail)
