"""echomq as a peer: the six scripts of this repository, two ways of draining.

`echomq` drains with the client's own verbs, `Queue.claim` then
`Queue.complete`, one job at a time per consumer: what a plain worker loop
does. `echomq-pipe` sends the same two scripts as raw EVALSHA in pipelines
of `batch` claims then as many completes, the way a worker that wants
throughput would (BullMQ and arq keep several jobs in flight per process
too). Both enqueue with the enqueue script as raw EVALSHA, pipelined in
batches, after `Queue` has loaded every script.
"""

from __future__ import annotations

from typing import Any, Callable

import redis

from echomq.ids import Minter
from echomq.keys import QueueKeys
from echomq.queue import Queue
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
    drain_mode = "Queue.claim then Queue.complete, one job at a time per consumer"

    def check(self) -> None:
        """echomq is this package: always there."""

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"lease_ms": LEASE_MS, "enqueue_batch": ENQUEUE_BATCH, "client": "redis-py, hiredis parser",
                "consumers": consumers, "in_flight_per_consumer": 1}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        client = _client(url)
        q = Queue(client, queue)
        sha = q.scripts.sha("enqueue")
        minter = Minter()
        payload = PAYLOAD.encode("ascii")
        k = q.keys
        gate.ready()
        accepted = 0
        sent = 0
        while sent < n:
            size = min(ENQUEUE_BATCH, n - sent)
            pipe = client.pipeline(transaction=False)
            for _ in range(size):
                job_id = minter.mint("JOB")
                pipe.evalsha(sha, 2, k.pending, k.job(job_id), job_id, payload)
            accepted += sum(1 for r in pipe.execute() if r == b"enqueued")
            sent += size
            progress(sent)
        gate.done()
        client.close()
        return accepted

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        client = _client(url)
        q = Queue(client, queue)
        gate.ready()
        while True:
            job = q.claim(lease_ms=LEASE_MS)
            if job is None:
                break  # every job was enqueued before the drain: empty means done
            jobs.run_job(job.payload)
            q.complete(job.id, job.token)
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
    drain_mode = (f"claim script x{CLAIM_BATCH} in one pipeline, then one complete per job claimed in a "
                  "second pipeline (raw EVALSHA)")

    def settings(self, consumers: int) -> dict[str, Any]:
        out = super().settings(consumers)
        out.update(claim_batch=CLAIM_BATCH, in_flight_per_consumer=CLAIM_BATCH)
        return out

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        client = _client(url)
        q = Queue(client, queue)
        k = q.keys
        claim, complete = q.scripts.sha("claim"), q.scripts.sha("complete")
        gate.ready()
        while True:
            pipe = client.pipeline(transaction=False)
            for _ in range(CLAIM_BATCH):
                pipe.evalsha(claim, 2, k.pending, k.active, k.job_prefix, LEASE_MS)
            claimed = [r for r in pipe.execute() if r]
            if not claimed:
                break
            pipe = client.pipeline(transaction=False)
            for job_id, payload, token in claimed:
                jobs.run_job(payload)
                text = job_id.decode("ascii")
                pipe.evalsha(complete, 2, k.active, k.job(text), text, int(token))
            pipe.execute()
        gate.done()
        client.close()
