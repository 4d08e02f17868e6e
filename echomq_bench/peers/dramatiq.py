"""Dramatiq with its Redis broker, no results middleware.

Enqueue: `Actor.send` once per job, each one call of the broker's Lua
`dispatch` script (Dramatiq has no bulk send; a group sends one by one).
Drain: one `Worker` per consumer process. Its consumer thread fetches up to
`prefetch` messages per call of the same script, hands them to the worker
threads, and acks each one after it ran (another script call). Every other
middleware is Dramatiq's default (age and time limits, retries, callbacks,
pipelines, shutdown notifications), as is the heartbeat and maintenance
the broker runs itself.

`default` keeps Dramatiq's 8 worker threads and its prefetch of twice that.
`throughput` keeps the threads and prefetches 100 messages per fetch
(`dramatiq_queue_prefetch`, the setting Dramatiq documents for it).

Dramatiq's worker has no burst mode: it stops when the runner says every
job has run.
"""

from __future__ import annotations

from typing import Any, Callable

from echomq_bench.peers import jobs
from echomq_bench.peers.base import MODES, PAYLOAD, PYTHON_CHILD, Gate, Leftovers, count_keys, require

__all__ = ["Dramatiq"]

NAMESPACE = "dramatiq"
THREADS = 8
PROGRESS_EVERY = 1000
PREFETCH = {"default": THREADS * 2, "throughput": 100}


def _actor(url: str, queue: str) -> Any:
    dramatiq = require("dramatiq", "dramatiq")
    redis_broker = require("dramatiq.brokers.redis", "dramatiq")
    broker = redis_broker.RedisBroker(url=url, namespace=NAMESPACE)
    return dramatiq.actor(jobs.run_job, actor_name="noop", queue_name=queue, broker=broker, max_retries=0)


class Dramatiq:
    name = "dramatiq"
    distribution = "dramatiq"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = "Actor.send once per job (one dispatch script call each)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.prefetch = PREFETCH[mode]
        self.drain_mode = (f"Worker(worker_threads={THREADS}), prefetch {self.prefetch} per fetch script call, "
                           "ack script per job")

    def check(self) -> None:
        require("dramatiq", "dramatiq")

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"worker_threads": THREADS, "queue_prefetch": self.prefetch, "results_middleware": False,
                "max_retries": 0, "serializer": "json (default)", "consumers": consumers,
                "in_flight_per_consumer": self.prefetch}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        actor = _actor(url, queue)
        actor.broker.client.ping()
        gate.ready()
        for sent in range(1, n + 1):
            actor.send(PAYLOAD)
            if sent % PROGRESS_EVERY == 0:
                progress(sent)
        progress(n)
        gate.done()
        actor.broker.close()
        return n

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        dramatiq = require("dramatiq", "dramatiq")
        actor = _actor(url, queue)
        worker = dramatiq.Worker(actor.broker, worker_threads=THREADS)
        worker.queue_prefetch = self.prefetch  # read when start() makes the consumer threads
        actor.broker.client.ping()
        gate.ready()
        worker.start()
        gate.stop.wait()
        worker.stop()  # waits for the acks of the jobs in hand
        gate.done(at=jobs.finished_at())
        actor.broker.close()

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        base = f"{NAMESPACE}:{queue}"
        acks = sum(int(client.scard(k)) for k in client.scan_iter(match=f"{NAMESPACE}:__acks__.*", count=1000))
        detail = {"queued": int(client.llen(base)), "unacked": acks, "delayed": int(client.llen(base + ".DQ")),
                  "dead": int(client.zcard(base + ".XQ")), "message_rows": int(client.hlen(base + ".msgs"))}
        detail["dead_rows"] = count_keys(client, base + ".XQ.msgs")
        return Leftovers(pending=detail["queued"] + acks + detail["delayed"], kept=detail["dead"],
                         rows=detail["message_rows"], detail=detail)
