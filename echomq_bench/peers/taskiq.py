"""taskiq with taskiq-redis's `RedisStreamBroker`, no result backend.

taskiq-redis has three brokers: PubSub (every worker gets every message),
ListQueue (LPUSH and BRPOP: a message taken is gone, so a worker that dies
loses the jobs it held) and Stream, the one its documentation names fit for
when data durability is required, because it acknowledges: a message read
through the consumer group stays pending until acked, and an idle one is
reclaimed (XAUTOCLAIM) by another worker. That is the broker here.

Enqueue: `kiq` with 50 calls in flight, as for arq and SAQ (taskiq has no
bulk send; each is one XADD of a JSON message). Drain: one `Receiver` per
consumer process, the loop `taskiq worker` runs in each of its processes,
with the worker's defaults otherwise: params validated, the ack sent once
the result is "saved" (`when_saved`). Its broker reads up to `xread_count`
(100) entries per XREADGROUP; after each batch it runs its reclaim pass, a
SCRIPT EXISTS and one MULTI/EXEC of a lock SET, XAUTOCLAIM and the lock's
release script. No result backend is set, so taskiq's dummy backend stores
nothing.

One departure from the package as shipped: taskiq-redis acks with XACK
alone, which leaves every entry in the stream for good (its one bound,
`maxlen`, trims the oldest entries on XADD, read or not, so it would drop
jobs queued behind a backlog). The broker here acks with XACK and XDEL in
one pipeline, one round trip as before, so that nothing is kept once a job
is done.

`default` runs taskiq's worker defaults: 100 async tasks, no prefetch.
`throughput` adds a prefetch of 100, the setting taskiq's CLI documents for
high message rates with a broker that acknowledges; the 100 tasks stay.

The receiver has no burst mode: it stops when the runner says every job has
run, setting the event `taskiq worker` sets on SIGTERM; it then waits for
the tasks in hand, acks included, and cancels its blocking read, again if
redis-py lost the first cancel (see `_stop`).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable

import redis.asyncio

from echomq_bench.peers import jobs
from echomq_bench.peers.base import (MODES, PAYLOAD, PYTHON_CHILD, Enqueue, Gate, Leftovers, enqueue_in_flight,
                                     produce_async, require, version_of)

__all__ = ["Taskiq"]

BROKER_DISTRIBUTION = "taskiq-redis"
ENQUEUE_IN_FLIGHT = 50
# (max async tasks, max prefetch) per mode: the worker's defaults, then a prefetch as large as the tasks.
RECEIVER = {"default": (100, 0), "throughput": (100, 100)}
# RedisStreamBroker's own defaults, named for the report.
XREAD_COUNT = 100
# How long the receiver may take to stop before its read is cancelled once more.
RECANCEL_S = 0.2
GROUP = "taskiq"
TASK = "noop"


async def _noop(payload: str) -> None:
    # An async task: a sync one would run in the receiver's thread pool.
    jobs.run_job(payload)


def _ack_and_delete(broker: Any, id: str, queue_name: str) -> Callable[[], Awaitable[None]]:
    """The broker's ack for one entry: XACK, then XDEL, in one pipeline on its pool."""
    async def ack() -> None:
        async with redis.asyncio.Redis(connection_pool=broker.connection_pool) as conn:
            pipe = conn.pipeline(transaction=False)
            pipe.xack(queue_name, broker.consumer_group_name, id)
            pipe.xdel(queue_name, id)
            await pipe.execute()

    return ack


def _broker(url: str, queue: str) -> Any:
    """A stream broker on this queue whose ack also deletes the entry, with the no-op task registered."""
    stream_broker = require("taskiq_redis", BROKER_DISTRIBUTION).RedisStreamBroker

    async def listen(self: Any) -> AsyncIterator[Any]:
        # taskiq-redis's own listen, noting the task that reads it: see `_stop`.
        self.reader = asyncio.current_task()
        async for message in stream_broker.listen(self):
            yield message
            self.reader = asyncio.current_task()

    # The stream broker with its ack replaced and its listen wrapped; every other method is taskiq-redis's own.
    broker_class = type("DeleteOnAckBroker", (stream_broker,), {"_ack_generator": _ack_and_delete, "listen": listen})
    broker = broker_class(url, queue_name=queue, consumer_group_name=GROUP, xread_count=XREAD_COUNT)
    broker.task(task_name=TASK)(_noop)
    return broker


async def _stop(listening: asyncio.Task[None], finish: asyncio.Event, broker: Any) -> None:
    """Wait for the receiver to stop once `finish` is set.

    On finish the receiver cancels the read it has in flight, a blocking
    XREADGROUP, and waits for it. redis-py's asyncio client can lose a cancel
    that meets the reply of a blocking command, and that read then loops on
    forever; so while the receiver has not stopped, the read is cancelled
    again. Finish comes only once every job has run: no read then returns one.
    """
    finishing = asyncio.ensure_future(finish.wait())
    await asyncio.wait({listening, finishing}, return_when=asyncio.FIRST_COMPLETED)
    finishing.cancel()
    while not listening.done():
        await asyncio.wait({listening}, timeout=RECANCEL_S)
        reader = getattr(broker, "reader", None)
        if not listening.done() and reader is not None and not reader.done():
            reader.cancel()
    await listening


@asynccontextmanager
async def _producing(url: str, queue: str) -> AsyncIterator[Enqueue]:
    broker = _broker(url, queue)
    # A client's startup creates the consumer group, at the stream's end: before the first job.
    await broker.startup()
    # The runner reads used_memory before and after the enqueue. Each of the 50 connections the
    # pool opens holds a query buffer larger than 50 stream entries, so both readings are taken
    # with none open: the pool is emptied before the clock starts and closed before it stops
    # (the producer says done once the broker has shut down).
    await broker.connection_pool.disconnect()
    task = broker.find_task(TASK)
    try:
        yield lambda n, progress: enqueue_in_flight(n, ENQUEUE_IN_FLIGHT, lambda: task.kiq(PAYLOAD), progress)
    finally:
        await broker.shutdown()


class Taskiq:
    name = "taskiq"
    distribution = "taskiq"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = f"task.kiq, {ENQUEUE_IN_FLIGHT} calls in flight (one XADD each)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.max_async_tasks, self.max_prefetch = RECEIVER[mode]
        self.drain_mode = (f"Receiver(max_async_tasks={self.max_async_tasks}, max_prefetch={self.max_prefetch}), "
                           f"XREADGROUP of up to {XREAD_COUNT}, XACK and XDEL in one pipeline per job")

    def check(self) -> None:
        require("taskiq", "taskiq")
        require("taskiq_redis", BROKER_DISTRIBUTION)

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"broker": f"{BROKER_DISTRIBUTION} {version_of(BROKER_DISTRIBUTION)} RedisStreamBroker, "
                          "its ack deleting the entry", "xread_count": XREAD_COUNT,
                "max_async_tasks": self.max_async_tasks, "max_prefetch": self.max_prefetch,
                "ack_type": "when_saved (default)", "result_backend": None,
                "enqueue_in_flight": ENQUEUE_IN_FLIGHT, "serializer": "json (default)", "consumers": consumers,
                "in_flight_per_consumer": self.max_async_tasks}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        return produce_async(lambda: _producing(url, queue), n, gate, progress, done_after_close=True)

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        asyncio.run(self._consume(url, queue, gate))

    async def _consume(self, url: str, queue: str, gate: Gate) -> None:
        receiver_mod = require("taskiq.receiver", "taskiq")
        broker = _broker(url, queue)
        broker.is_worker_process = True
        await broker.startup()
        finish = asyncio.Event()
        loop = asyncio.get_running_loop()

        def finish_on_stop() -> None:
            gate.stop.wait()
            loop.call_soon_threadsafe(finish.set)

        with ThreadPoolExecutor() as pool:
            receiver = receiver_mod.Receiver(broker=broker, executor=pool, run_startup=False,
                                             max_async_tasks=self.max_async_tasks, max_prefetch=self.max_prefetch)
            gate.ready()
            threading.Thread(target=finish_on_stop, daemon=True).start()
            await _stop(asyncio.ensure_future(receiver.listen(finish)), finish, broker)
        gate.done(at=jobs.finished_at())
        await broker.shutdown()

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        # The stream is the queue: an entry is the job's record, deleted by its ack, so every
        # entry left is a job not done (waiting, or read and not acked).
        groups = client.xinfo_groups(queue) if client.exists(queue) else []
        detail = {"stream": int(client.xlen(queue)),
                  "unacked": sum(int(g["pending"]) for g in groups if g["name"] in (GROUP, GROUP.encode()))}
        return Leftovers(pending=detail["stream"], kept=0, rows=detail["stream"], detail=detail)
