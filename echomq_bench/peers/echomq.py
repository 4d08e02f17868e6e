"""echomq as a peer: through its own Worker, and a raw reference loop.

`echomq` is what a user of the client runs: `echomq.Worker` in burst mode
so it stops once the queue is empty, enqueued through the client's
pipelined sender (`echomq.pipeline`), 1000 enqueues per round trip. In
`default` the Worker keeps its defaults (one job per round: its complete
and the next claim in one round trip); in `throughput` it holds 100 per
round, settled with the next 100 claims, the 100 jobs in flight per
process the other queues' throughput settings hold (BullMQ's concurrency
100, arq's max_jobs 100).
The handler is a no-op, so it runs on the Worker's own thread
(concurrency 1): threads would add client CPU and nothing else.

`echomq-raw` is not the client: the load engine (echomq_bench.load.engine)
sends the claim script as raw EVALSHA, 100 per pipeline, then one complete
per job claimed in a second pipeline. It shows what the server spends when
a hand-written loop strips the per-request overhead; it is a reference,
never the headline (compare the Worker's row against the other queues).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import redis

from echomq import Job, Queue, Worker, WorkerSettings, mint
from echomq._instrument import QueueKeys, pipeline, verbs
from echomq_bench.load.calls import RedisCalls
from echomq_bench.load.engine import Consumer, ConsumerPolicy, Producer, ProducerPolicy
from echomq_bench.peers import jobs
from echomq_bench.peers.base import DEFAULT, MODES, PAYLOAD, PYTHON_CHILD, THROUGHPUT, Gate, Leftovers, count_keys

__all__ = ["EchoMQ", "EchoMQRaw", "worker_mode"]

LEASE_MS = 30_000
ENQUEUE_BATCH = 1000
RAW_CLAIM_BATCH = 100


def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=False)


def _run_job(job: Job) -> None:
    jobs.run_job(job.payload)


def worker_mode(s: WorkerSettings) -> str:
    """The drain line the report prints for a Worker with these settings."""
    return (f"echomq.Worker(concurrency={s.concurrency}, batch={s.claim_batch}, burst={s.burst}): per round "
            f"one round trip, the round's completes and the next {s.claim_batch} claim(s)")


RAW_DRAIN = (f"RAW, not the client's Worker (a reference, never the headline): claim script x{RAW_CLAIM_BATCH} "
             "as raw EVALSHA in one pipeline, then one complete per job claimed in a second")
# Burst: every job was enqueued before the drain, so a round that claims nothing means done.
WORKER = {DEFAULT: WorkerSettings(burst=True, handle_signals=False),
          THROUGHPUT: WorkerSettings(batch=100, burst=True, handle_signals=False)}


class EchoMQ:
    name = "echomq"
    distribution = "echomq-bench"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = f"enqueue verb through echomq.pipeline, {ENQUEUE_BATCH} per round trip"

    def __init__(self, mode: str = DEFAULT) -> None:
        self.mode = mode
        self.worker_settings = WORKER[mode]
        self.drain_mode = worker_mode(self.worker_settings)

    def check(self) -> None:
        """echomq is this package: always there."""

    def settings(self, consumers: int) -> dict[str, Any]:
        worker = dataclasses.asdict(self.worker_settings)
        worker.update(batch=self.worker_settings.claim_batch)
        return {"worker": worker, "enqueue_batch": ENQUEUE_BATCH, "client": "redis-py, hiredis parser",
                "consumers": consumers, "in_flight_per_consumer": self.worker_settings.claim_batch}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        client = _client(url)
        q = Queue(client, queue)
        payload = PAYLOAD.encode("ascii")
        gate.ready()
        accepted = sent = 0
        while sent < n:
            calls = [verbs.enqueue(q.keys, mint(), payload) for _ in range(min(ENQUEUE_BATCH, n - sent))]
            accepted += sum(1 for reply in pipeline.send(q, calls) if reply == b"enqueued")
            sent += len(calls)
            progress(sent)
        gate.done()
        client.close()
        return accepted

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        client = _client(url)
        worker = Worker(Queue(client, queue), _run_job, self.worker_settings)
        gate.ready()
        worker.run()
        gate.done()
        client.close()

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        k = QueueKeys(queue)
        detail = {
            "pending": int(client.zcard(k.pending)),
            "active": int(client.zcard(k.active)),
            "schedule": int(client.zcard(k.schedule)),
            "dead": int(client.zcard(k.dead)),
        }
        rows = count_keys(client, k.job_prefix + "*")
        # Completion deletes the row: nothing finished is ever kept.
        return Leftovers(pending=sum(detail.values()), kept=0, rows=rows, detail={**detail, "job_rows": rows})


class EchoMQRaw(EchoMQ):
    """The raw reference loop on the load engine; not the client's Worker. One mode: it is a reference."""

    name = "echomq-raw"
    modes = (DEFAULT,)

    def __init__(self, mode: str = DEFAULT) -> None:
        super().__init__(mode)
        self.drain_mode = RAW_DRAIN  # the Worker's line would misname this loop
    enqueue_mode = f"RAW: enqueue script as raw EVALSHA on the load engine, {ENQUEUE_BATCH} per pipeline"

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"raw": True, "lease_ms": LEASE_MS, "claim_batch": RAW_CLAIM_BATCH, "enqueue_batch": ENQUEUE_BATCH,
                "client": "redis-py, hiredis parser", "consumers": consumers,
                "in_flight_per_consumer": RAW_CLAIM_BATCH}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        client = _client(url)
        policy = ProducerPolicy(batch=ENQUEUE_BATCH, total=n, payload=PAYLOAD.encode("ascii"))
        producer = Producer(RedisCalls(client), [QueueKeys(queue)], policy, strict=True)
        gate.ready()
        producer.run(on_step=lambda _: progress(producer.sent))
        gate.done()
        client.close()
        return producer.tally["enqueue", "enqueued"]

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        client = _client(url)
        policy = ConsumerPolicy(lease_ms=LEASE_MS, handle=jobs.run_job, claim_batch=RAW_CLAIM_BATCH,
                                until_empty=True)
        consumer = Consumer(RedisCalls(client), [QueueKeys(queue)], policy, strict=True)
        gate.ready()
        consumer.run()
        gate.done()
        client.close()
