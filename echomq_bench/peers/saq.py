"""SAQ (simple async queue) on Redis: asyncio Queue and Worker.

Enqueue: `Queue.enqueue` with 50 calls in flight (SAQ has no bulk enqueue;
each is one script call that writes the job and pushes its id). Drain: one
`Worker` per consumer process, each in-flight slot taking one job per
BLMOVE, then finishing it with a MULTI/EXEC that writes its status. Every
job has ttl=-1, SAQ's way of keeping nothing once it is done.

`default` keeps SAQ's concurrency of 10; `throughput` runs 100, SAQ's one
throughput knob (it documents no batching). SAQ's upkeep timers (stats,
sweep, schedule) run at their defaults, with one exception: each consumer
sweeps once before its Worker starts. SAQ's sweep takes a 60 s lock, so
that first sweep (of an empty active list) is the run's only one. Left to
the Worker's own start-up, the sweep can meet a job another slot has just
moved to active and not yet marked active, abort it as "swept" and leave
its row behind in state "aborting" (a race reported upstream); a run under
60 s would then measure SAQ's start-up rather than its steady drain.

The worker stops when the runner says every job has run (SAQ's burst mode
needs a dequeue timeout, which would change how it takes jobs).
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

from echomq_bench.peers import jobs
from echomq_bench.peers.base import (MODES, PAYLOAD, PYTHON_CHILD, Enqueue, Gate, Leftovers, count_keys,
                                     enqueue_in_flight, produce_async, require)

__all__ = ["Saq"]

ENQUEUE_IN_FLIGHT = 50
CONCURRENCY = {"default": 10, "throughput": 100}
TTL_DISABLED = -1
# On stop, SAQ cancels its tasks after this grace; with none, a job that has run but not yet
# been finished (its MULTI/EXEC) is cancelled and stays active. Its blocked dequeues wait it out.
SHUTDOWN_GRACE_S = 1
# Every job has run when the runner says stop, but a slot may still be writing
# its finish. SAQ's stop waits the grace for all its tasks, slots blocked in
# BLMOVE included, then cancels them all, a finish in flight too; so the
# consumer first waits, this long at most, until no slot holds a job.
SETTLE_TIMEOUT_S = 10


@asynccontextmanager
async def _producing(url: str, queue: str) -> AsyncIterator[Enqueue]:
    q = require("saq", "saq").Queue.from_url(url, name=queue)
    await q.connect()
    try:
        yield lambda n, progress: enqueue_in_flight(
            n, ENQUEUE_IN_FLIGHT, lambda: q.enqueue("noop", payload=PAYLOAD, ttl=TTL_DISABLED), progress)
    finally:
        await q.disconnect()


class Saq:
    name = "saq"
    distribution = "saq"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = f"Queue.enqueue, {ENQUEUE_IN_FLIGHT} calls in flight (one script call each)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.concurrency = CONCURRENCY[mode]
        self.drain_mode = f"Worker(concurrency={self.concurrency}), one BLMOVE per job, MULTI/EXEC to finish"

    def check(self) -> None:
        require("saq", "saq")

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "ttl": TTL_DISABLED,
                "shutdown_grace_period_s": SHUTDOWN_GRACE_S, "enqueue_in_flight": ENQUEUE_IN_FLIGHT,
                "serializer": "json (default)", "consumers": consumers, "in_flight_per_consumer": self.concurrency}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        return produce_async(lambda: _producing(url, queue), n, gate, progress)

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        asyncio.run(self._consume(url, queue, gate))

    async def _consume(self, url: str, queue: str, gate: Gate) -> None:
        saq = require("saq", "saq")
        q = saq.Queue.from_url(url, name=queue)
        worker = saq.Worker(q, functions=[("noop", jobs.saq_job)], concurrency=self.concurrency,
                            shutdown_grace_period_s=SHUTDOWN_GRACE_S)
        await q.connect()
        await q.sweep()
        gate.ready()
        run = asyncio.ensure_future(worker.start())
        await asyncio.to_thread(gate.stop.wait)
        await _settled(worker)
        await worker.stop()
        await run
        gate.done(at=jobs.finished_at())
        await q.disconnect()

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        base = f"saq:{queue}:"
        detail = {"queued": int(client.llen(base + "queued")), "active": int(client.llen(base + "active")),
                  "incomplete": int(client.zcard(base + "incomplete"))}
        rows = count_keys(client, f"saq:job:{queue}:*")
        detail["job_rows"] = rows
        # Every unfinished job is in `incomplete`, queued or active alike.
        return Leftovers(pending=detail["incomplete"], kept=0, rows=rows, detail=detail)


async def _settled(worker: Any) -> None:
    """Until no slot of the worker holds a job (its finish written), or SETTLE_TIMEOUT_S."""
    deadline = asyncio.get_running_loop().time() + SETTLE_TIMEOUT_S
    while worker.job_task_contexts and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
