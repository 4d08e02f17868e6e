"""streaQ on Redis Streams: its async Worker, in burst mode.

Enqueue: `Worker.enqueue_many`, 1000 tasks per call, the batch streaQ
documents for adding many at once: one pipeline of its `publish_task`
function (FCALL: SET NX of the pickled task row, XADD of the task id to
the stream). Drain: one Worker per consumer process, reading the stream
through a consumer group as many entries at a time as its buffer has room
for (the `read_streams` function: XAUTOCLAIM of entries idle past
`idle_timeout`, then XREADGROUP). Per job, one pipeline takes it (GET of
the row, INCR of its try count, SREM of its abort flag, and the
`refresh_timeout` function: XPENDING, XCLAIM, SADD to the running set),
and one MULTI/EXEC finishes it (XACK, XDEL, PUBLISH of the outcome to the
task's channel, SREM from the running set and of the abort flag, DEL of
the row and try count, and the `update_dependents` function). An entry
stays unacked in the group until that finish, so the jobs of a worker that
dies are reclaimed by another.
Every task has ttl=0, streaQ's way of storing no result: once finished,
nothing of the job is left.

`default` keeps streaQ's concurrency of 16 and its prefetch (as many again
waiting in the worker's buffer). `throughput` runs concurrency 100, the
prefetch following it, and sets `coredis.Config.optimized`, as streaQ's own
benchmark does: coredis then skips its runtime argument checks. That
benchmark also runs uvloop; it is left out, as every other asyncio queue
here runs on the standard loop.

The worker runs in burst mode (the CLI's `--burst`, the Worker's `burst`
attribute): it stops once the stream is empty and its own tasks are
finished, and its clock stops there. Its timers run at their defaults:
every 0.5 s a pipeline that moves due delayed tasks and reads the abort set
and the cron schedule, and at start (then every 54 s) a health key and the
running entries' claims. streaQ loads its Lua library with FUNCTION LOAD,
so it needs Redis 7 or later, or Valkey: not the redis6.2 build.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

from echomq_bench.peers import jobs
from echomq_bench.peers.base import (MODES, PAYLOAD, PYTHON_CHILD, Enqueue, Gate, Leftovers, count_keys, produce_async,
                                     require)

__all__ = ["Streaq"]

ENQUEUE_BATCH = 1000
# (concurrency, coredis optimized) per mode; the prefetch is streaQ's default: as many as the concurrency.
WORKER = {"default": (16, False), "throughput": (100, True)}
FUNCTION = "noop"
RESULT_TTL = 0
# streaQ's only priority unless others are named: the stream and delayed-set keys end in it.
PRIORITY = "normal"
GROUP = "workers"


async def _noop(payload: str) -> None:
    # An async task: a sync one would run in a worker thread, which no other asyncio queue here pays for.
    jobs.run_job(payload)


def _worker(url: str, queue: str, concurrency: int, optimized: bool,
            lifespan: Callable[[], Any] | None = None) -> tuple[Any, Any]:
    """A streaQ Worker on this queue and its registered no-op task."""
    streaq = require("streaq", "streaq")
    if optimized:
        require("coredis", "streaq").Config.optimized = True
    kwargs = {"lifespan": lifespan} if lifespan is not None else {}
    worker = streaq.Worker(redis_url=url, queue_name=queue, concurrency=concurrency, **kwargs)
    task = worker.task(name=FUNCTION, ttl=RESULT_TTL)(_noop)
    return worker, task


@asynccontextmanager
async def _producing(url: str, queue: str, concurrency: int, optimized: bool) -> AsyncIterator[Enqueue]:
    worker, task = _worker(url, queue, concurrency, optimized)

    async def enqueue(n: int, progress: Callable[[int], None]) -> int:
        sent = 0
        while sent < n:
            size = min(ENQUEUE_BATCH, n - sent)
            await worker.enqueue_many([task.enqueue(PAYLOAD) for _ in range(size)])
            sent += size
            progress(sent)
        # enqueue_many returns nothing per task; the runner counts what the server holds.
        return n

    # Entering the worker connects and loads streaQ's function library: setup, before the clock.
    async with worker:
        yield enqueue


class Streaq:
    name = "streaq"
    distribution = "streaq"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = f"Worker.enqueue_many, {ENQUEUE_BATCH} per call (one pipeline of publish_task FCALLs)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.concurrency, self.optimized = WORKER[mode]
        extra = ", coredis optimized" if self.optimized else ""
        self.drain_mode = (f"Worker(concurrency={self.concurrency}, burst){extra}: stream reads of up to "
                           f"{2 * self.concurrency}, a pipeline to take and a MULTI/EXEC to finish each job")

    def check(self) -> None:
        require("streaq", "streaq")

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "prefetch": self.concurrency, "burst": True,
                "ttl": RESULT_TTL, "coredis_optimized": self.optimized, "enqueue_batch": ENQUEUE_BATCH,
                "serializer": "pickle (default)", "consumers": consumers,
                "in_flight_per_consumer": self.concurrency}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        return produce_async(lambda: _producing(url, queue, self.concurrency, self.optimized), n, gate, progress)

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        asyncio.run(self._consume(url, queue, gate))

    async def _consume(self, url: str, queue: str, gate: Gate) -> None:
        @asynccontextmanager
        async def lifespan() -> AsyncIterator[None]:
            # streaQ enters the lifespan once connected and its library is loaded, before it
            # reads the stream: the clock starts here, and stops when its tasks are all finished.
            await asyncio.to_thread(gate.ready)
            yield None
            gate.done()

        worker, _ = _worker(url, queue, self.concurrency, self.optimized, lifespan)
        worker.burst = True
        await worker.run_async()

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        base = f"streaq:{queue}:"
        stream = f"{base}queues:{PRIORITY}"
        # A finished job's entry is deleted (XDEL): every entry left is a job not yet finished.
        groups = client.xinfo_groups(stream) if client.exists(stream) else []
        detail = {"stream": int(client.xlen(stream)),
                  "unacked": sum(int(g["pending"]) for g in groups if g["name"] in (GROUP, GROUP.encode())),
                  "delayed": int(client.zcard(f"{base}queues:delayed:{PRIORITY}")),
                  "running": int(client.scard(f"{base}index:running")),
                  "task_rows": count_keys(client, f"{base}task:data:*"),
                  "try_counts": count_keys(client, f"{base}task:retry:*"),
                  "results": count_keys(client, f"{base}task:results:*"),
                  "results_index": int(client.zcard(f"{base}index:results"))}
        return Leftovers(pending=detail["stream"] + detail["delayed"],
                         kept=detail["results"] + detail["results_index"],
                         rows=detail["task_rows"] + detail["try_counts"], detail=detail)
