"""echomq as a peer: the six scripts of this repository, two ways of draining,
both on the load engine (echomq_bench.load.engine).

`echomq` drains one job at a time per consumer: the claim script, then the
complete script, one call each (the calls `Queue.claim` and `Queue.complete`
send): what a plain worker loop does. `echomq-pipe` sends the same two
scripts as raw EVALSHA in pipelines of `batch` claims then as many
completes, the way a worker that wants throughput would (BullMQ and arq keep
several jobs in flight per process too). Both enqueue with the enqueue
script as raw EVALSHA, pipelined in batches, after every script is loaded.
"""

from __future__ import annotations

from typing import Any, Callable

import redis

from echomq.keys import QueueKeys
from echomq_bench.load.calls import RedisCalls
from echomq_bench.load.engine import Consumer, ConsumerPolicy, Producer, ProducerPolicy
from echomq_bench.peers import jobs
from echomq_bench.peers.base import PAYLOAD, Gate, Leftovers, count_keys

__all__ = ["EchoMQ", "EchoMQPipelined"]

LEASE_MS = 30_000
ENQUEUE_BATCH = 1000
CLAIM_BATCH = 100


def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=False)


class EchoMQ:
    name = "echomq"
    distribution = "echomq-bench"
    enqueue_mode = f"enqueue script, raw EVALSHA pipelined {ENQUEUE_BATCH} per round trip"
    drain_mode = "claim script then complete script (as Queue sends them), one job at a time per consumer"
    claim_batch = 1

    def check(self) -> None:
        """echomq is this package: always there."""

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"lease_ms": LEASE_MS, "enqueue_batch": ENQUEUE_BATCH, "client": "redis-py, hiredis parser",
                "consumers": consumers, "in_flight_per_consumer": 1}

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
        # Every job was enqueued before the drain: a round that finds the queue empty means done.
        policy = ConsumerPolicy(lease_ms=LEASE_MS, handle=jobs.run_job, claim_batch=self.claim_batch,
                                until_empty=True)
        consumer = Consumer(RedisCalls(client), [QueueKeys(queue)], policy, strict=True)
        gate.ready()
        consumer.run()
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


class EchoMQPipelined(EchoMQ):
    name = "echomq-pipe"
    claim_batch = CLAIM_BATCH
    drain_mode = (f"claim script x{CLAIM_BATCH} in one pipeline, then one complete per job claimed in a "
                  "second pipeline (raw EVALSHA)")

    def settings(self, consumers: int) -> dict[str, Any]:
        out = super().settings(consumers)
        out.update(claim_batch=CLAIM_BATCH, in_flight_per_consumer=CLAIM_BATCH)
        return out
