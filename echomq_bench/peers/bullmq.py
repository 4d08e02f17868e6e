"""`bullmq-py`: BullMQ through its Python port (`bullmq`), asyncio Queue and Worker.

Enqueue: `Queue.addBulk` in chunks (one MULTI/EXEC pipeline of addStandardJob
scripts per chunk), every job with removeOnComplete=True so a finished job
leaves nothing, as echomq's complete does. Drain: one `Worker` per consumer
process; `default` keeps BullMQ's concurrency of 1, `throughput` runs 100
jobs in flight, the knob BullMQ documents for I/O-bound work. Every other
option is the package default (lockDuration 30 s, stalledInterval 30 s,
drainDelay 5 s, the events stream capped near 10,000).

BullMQ has no burst mode: a consumer stops when its worker has found the
wait list empty (`worker.drained`) and holds no job, a local check that
sends the server nothing; every job was enqueued before the drain began.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from echomq_bench.peers import jobs
from echomq_bench.peers.base import MODES, PAYLOAD, PYTHON_CHILD, THROUGHPUT, Gate, Leftovers, count_keys, require

__all__ = ["BullMQ", "bullmq_leftovers", "CONCURRENCY"]

ADD_BATCH = 1000
# Worker concurrency per mode: BullMQ's default, and its documented knob for many jobs in flight.
CONCURRENCY = {"default": 1, "throughput": 100}
PREFIX = "bull"
WATCH_S = 0.002
CLOSE_TIMEOUT_S = 3.0
# Lists and sets of unfinished jobs; "completed" holds kept finished ones.
PENDING_LISTS = ("wait", "active", "paused")
PENDING_ZSETS = ("prioritized", "delayed", "waiting-children", "failed")


async def _load_scripts(owner: Any) -> None:
    """SCRIPT LOAD every BullMQ script before the clock starts.

    redis-py loads a script on its first NOSCRIPT, and with `concurrency`
    calls in flight each of them gets NOSCRIPT and loads (and the server
    compiles) the same script again: a cold-start cost that a long-running
    deployment pays once. echomq's Queue loads its scripts at construction;
    this gives BullMQ the same warm start.
    """
    conn = owner.redisConnection
    for script in conn.commands.values():
        await conn.conn.script_load(script.script)


class BullMQ:
    name = "bullmq-py"
    distribution = "bullmq"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = f"Queue.addBulk, {ADD_BATCH} jobs per call (one MULTI/EXEC of addStandardJob scripts)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.concurrency = CONCURRENCY[mode]
        self.drain_mode = (f"Worker(concurrency={self.concurrency}) per consumer: moveToActive, then "
                           "moveToFinished per job" + (" (the default)" if mode != THROUGHPUT else ""))

    def check(self) -> None:
        require("bullmq", "bullmq")

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"removeOnComplete": True, "concurrency": self.concurrency, "add_batch": ADD_BATCH,
                "lockDuration_ms": 30_000, "stalledInterval_ms": 30_000, "drainDelay_s": 5,
                "consumers": consumers, "in_flight_per_consumer": self.concurrency}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        return asyncio.run(self._produce(url, queue, n, gate, progress))

    async def _produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        bullmq = require("bullmq", "bullmq")
        q = bullmq.Queue(queue, {"connection": url, "prefix": PREFIX,
                                 "defaultJobOptions": {"removeOnComplete": True}})
        await _load_scripts(q)
        gate.ready()
        sent = 0
        while sent < n:
            size = min(ADD_BATCH, n - sent)
            await q.addBulk([{"name": "noop", "data": PAYLOAD} for _ in range(size)])
            sent += size
            progress(sent)
        gate.done()
        await q.close()
        return sent

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        # Not asyncio.run: on the way out it cancels and awaits every task,
        # and a worker left behind by _consume (see there) never finishes.
        loop = asyncio.new_event_loop()
        loop.run_until_complete(self._consume(url, queue, gate))

    async def _consume(self, url: str, queue: str, gate: Gate) -> None:
        bullmq = require("bullmq", "bullmq")
        worker = bullmq.Worker(queue, jobs.bullmq_job, {
            "connection": url, "prefix": PREFIX, "concurrency": self.concurrency,
            "autorun": False, "removeOnComplete": True,
        })
        await _load_scripts(worker)
        gate.ready()
        run = asyncio.ensure_future(worker.run())
        # A BullMQ worker never stops by itself; watch its own state.
        while not (worker.drained and not worker.jobs) and not run.done():
            await asyncio.sleep(WATCH_S)
        if run.done():
            run.result()  # the worker's loop died: raise what killed it
        gate.done()
        # worker.close() can wait forever for a BZPOPMIN it cancelled (seen
        # in about one consumer in four with bullmq 3.4.4 and redis-py 8.1; the package
        # has an open fix for its idle close path). Every job is finished by
        # now, so a worker that has not closed in time is left behind when
        # this process exits; the server only sees its connection drop.
        await asyncio.wait({asyncio.ensure_future(worker.close())}, timeout=CLOSE_TIMEOUT_S)

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        return bullmq_leftovers(client, queue)


def bullmq_leftovers(client: Any, queue: str) -> Leftovers:
    """BullMQ's keys, the same from Node and from Python."""
    base = f"{PREFIX}:{queue}:"
    detail = {name: int(client.llen(base + name)) for name in PENDING_LISTS}
    detail.update({name: int(client.zcard(base + name)) for name in PENDING_ZSETS})
    completed = int(client.zcard(base + "completed"))
    # Job hashes are bull:<queue>:<numeric id>; locks and logs hang off them.
    rows = sum(1 for key in client.scan_iter(match=base + "*", count=1000)
               if key.decode().removeprefix(base).isdigit())
    detail.update(completed=completed, job_rows=rows, locks=count_keys(client, base + "*:lock"))
    pending = sum(detail[n] for n in (*PENDING_LISTS, *PENDING_ZSETS))
    return Leftovers(pending=pending, kept=completed, rows=rows, detail=detail)
