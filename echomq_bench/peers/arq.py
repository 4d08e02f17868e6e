"""arq as a peer: `ArqRedis.enqueue_job` to add, an arq `Worker` with burst=True to drain.

arq has no bulk enqueue; its way to add many jobs is many `enqueue_job`
calls in flight at once (each a WATCH / EXISTS / MULTI / PSETEX / ZADD /
EXEC transaction on its own pooled connection). The worker keeps
`max_jobs` jobs in flight and polls the queue sorted set; keep_result=0 so
no result key is written. `default` keeps arq's max_jobs=10 and poll_delay
of 0.5 s: the worker sleeps the rest of that interval after each poll, so
with no-op jobs the sleep, not the queue, sets the drain rate. `throughput`
runs 100 jobs in flight and polls every 10 ms.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

from echomq_bench.peers import jobs
from echomq_bench.peers.base import (ARQ_HINT, MODES, PAYLOAD, PYTHON_CHILD, Enqueue, Gate, Leftovers, count_keys,
                                     enqueue_in_flight, produce_async, require)

__all__ = ["Arq"]

ENQUEUE_IN_FLIGHT = 50
# (max_jobs, poll_delay in s) per mode: arq's defaults, then many jobs in flight and a short poll.
WORKER = {"default": (10, 0.5), "throughput": (100, 0.01)}
FUNCTION = "noop"


def _queue_key(queue: str) -> str:
    return f"arq:queue:{queue}"


@asynccontextmanager
async def _producing(url: str, queue: str) -> AsyncIterator[Enqueue]:
    arq = require("arq", "arq", ARQ_HINT)
    pool = await arq.create_pool(arq.connections.RedisSettings.from_dsn(url), default_queue_name=_queue_key(queue))
    await pool.ping()
    try:
        yield lambda n, progress: enqueue_in_flight(n, ENQUEUE_IN_FLIGHT, lambda: pool.enqueue_job(FUNCTION, PAYLOAD),
                                                    progress)
    finally:
        await pool.aclose()


class Arq:
    name = "arq"
    distribution = "arq"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = f"ArqRedis.enqueue_job, {ENQUEUE_IN_FLIGHT} calls in flight (one transaction each)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.max_jobs, self.poll_delay_s = WORKER[mode]
        self.drain_mode = f"Worker(burst=True, max_jobs={self.max_jobs}, poll_delay={self.poll_delay_s} s) per consumer"

    def check(self) -> None:
        require("arq", "arq", ARQ_HINT)

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"burst": True, "keep_result": 0, "max_jobs": self.max_jobs, "poll_delay_s": self.poll_delay_s,
                "queue_read_limit": max(self.max_jobs * 5, 100), "enqueue_in_flight": ENQUEUE_IN_FLIGHT,
                "serializer": "pickle (default)", "consumers": consumers, "in_flight_per_consumer": self.max_jobs}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        return produce_async(lambda: _producing(url, queue), n, gate, progress)

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        asyncio.run(self._consume(url, queue, gate))

    async def _consume(self, url: str, queue: str, gate: Gate) -> None:
        arq = require("arq", "arq", ARQ_HINT)
        pool = await arq.create_pool(arq.connections.RedisSettings.from_dsn(url),
                                     default_queue_name=_queue_key(queue))
        worker = arq.Worker(
            functions=[arq.worker.func(jobs.arq_job, name=FUNCTION, keep_result=0)],
            queue_name=_queue_key(queue), redis_pool=pool, burst=True, keep_result=0,
            max_jobs=self.max_jobs, poll_delay=self.poll_delay_s, handle_signals=False,
        )
        await pool.ping()
        gate.ready()
        await worker.async_run()
        gate.done()
        await worker.close()

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        detail = {
            "queued": int(client.zcard(_queue_key(queue))),
            "in_progress": count_keys(client, "arq:in-progress:*"),
            "retry": count_keys(client, "arq:retry:*"),
        }
        results = count_keys(client, "arq:result:*")
        rows = count_keys(client, "arq:job:*")
        detail.update(results=results, job_rows=rows)
        return Leftovers(pending=detail["queued"] + detail["in_progress"], kept=results, rows=rows,
                         detail=detail)
