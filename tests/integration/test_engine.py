"""The load engine against real servers: producer, consumers and pump drain
exactly what was enqueued, crashes come back through the lease, retries end
in dead after max_attempts, and the redis-py calls keep every reply apart."""

from __future__ import annotations

import random
import secrets
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq.errors import StaleTokenError
from echomq._instrument import QueueKeys, verbs
from echomq_bench.load.audit import audit
from echomq_bench.load.calls import RedisCalls
from echomq_bench.load.engine import (
    ConsumerPolicy, Consumer, Event, Producer, ProducerPolicy, Pump, PumpPolicy, Stop, start_thread,
)
from echomq_bench.load.recorders import LedgerRecorder
from echomq_bench.measurement.workdist import parse_dist
from tests.helpers import server_ms, wait_past, wait_until


def _keys() -> QueueKeys:
    return QueueKeys(f"eng-{secrets.token_hex(3)}")


def test_producer_consumers_and_pump_drain_every_job_through_crashes(client: redis.Redis) -> None:
    n = 300
    keys = _keys()
    recorder = LedgerRecorder()
    crashed: list[Event] = []

    def hear(event: Event) -> None:
        recorder(event)
        if event.verb == "crash":
            crashed.append(event)

    calls = RedisCalls(client)
    producer = Producer(calls, [keys], ProducerPolicy(batch=20, total=n), hear)
    policy = ConsumerPolicy(lease_ms=150, work=parse_dist("const:1ms"), crash_rate=0.2, max_attempts=20,
                            idle_s=0.002)
    consumers = [Consumer(calls, [keys], policy, hear, random.Random(seed)) for seed in (1, 2)]
    pump = Pump(calls, [keys], PumpPolicy(interval_s=0.02, max_attempts=20), hear)
    stop = Stop()
    producer.run()
    assert producer.finished and producer.sent == n
    threads = [start_thread(role, stop) for role in (*consumers, pump)]
    try:
        assert wait_until(lambda: len(recorder.ledger.accepted) == n, 30), recorder.ledger.accepted
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    report = audit(client, [keys.name], recorder.ledger)
    assert report.passed, report.format()
    assert (report.enqueued, report.completed, report.lost, report.in_two_places) == (n, n, 0, 0)
    assert report.pending == report.active == report.scheduled == report.dead == 0
    completed = sum(c.tally["complete", "accepted"] for c in consumers)
    claimed = sum(c.tally["claim", "claimed"] for c in consumers)
    assert completed == n and len(crashed) > 0
    # Every crash was claimed again after its lease ran out, and nothing else was.
    assert claimed == n + len(crashed)
    assert pump.tally["reap", "ok"] > 0 and not recorder.errors


def test_retry_policy_sends_each_job_to_dead_after_max_attempts(client: redis.Redis) -> None:
    n, attempts = 25, 3
    keys = _keys()
    calls = RedisCalls(client)
    Producer(calls, [keys], ProducerPolicy(total=n)).run()
    consumer = Consumer(calls, [keys], ConsumerPolicy(fail_rate=1.0, max_attempts=attempts, retry_delay_ms=0,
                                                      idle_s=0.002), rng=random.Random(7))
    pump = Pump(calls, [keys], PumpPolicy(interval_s=0.01, max_attempts=attempts))
    stop = Stop()
    threads = [start_thread(role, stop) for role in (consumer, pump)]
    try:
        assert wait_until(lambda: client.zcard(keys.dead) == n, 20)
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    assert consumer.tally["claim", "claimed"] == n * attempts
    assert consumer.tally["retry", "scheduled"] == n * (attempts - 1)
    assert consumer.tally["retry", "dead"] == n
    assert consumer.tally["complete", "accepted"] == 0
    assert pump.tally["promote", "ok"] > 0
    assert client.zcard(keys.pending) == client.zcard(keys.active) == client.zcard(keys.schedule) == 0


def test_batched_consumer_drains_until_empty_and_stops(client: redis.Redis) -> None:
    keys = _keys()
    calls = RedisCalls(client)
    producer = Producer(calls, [keys], ProducerPolicy(batch=100, total=250, payload=b"p"))
    producer.run()
    seen: list[bytes] = []
    consumer = Consumer(calls, [keys], ConsumerPolicy(claim_batch=40, until_empty=True, handle=seen.append))
    consumer.run(Stop(deadline=time.perf_counter() + 20))
    assert consumer.finished
    assert producer.tally["enqueue", "enqueued"] == 250
    assert consumer.tally["complete", "accepted"] == 250 and seen == [b"p"] * 250
    assert client.zcard(keys.pending) == client.zcard(keys.active) == 0


def test_pipelined_replies_stay_apart_and_a_lost_script_is_reloaded(client: redis.Redis) -> None:
    keys = _keys()
    calls = RedisCalls(client)
    client.script_flush()
    replies = calls.pipeline([verbs.enqueue(keys, "JOB00000000001", b"a"), verbs.enqueue(keys, "JOB00000000001", b"b"),
                              verbs.claim(keys, 60_000)])
    assert replies[:2] == [b"enqueued", b"duplicate"]
    job_id, payload, token = replies[2]
    assert (job_id, payload, token) == (b"JOB00000000001", b"a", 1)
    done, stale = calls.pipeline([verbs.complete(keys, "JOB00000000001", 1), verbs.complete(keys, "JOB00000000001", 1)])
    assert done == b"ok" and isinstance(stale, StaleTokenError)


def test_producer_paces_to_its_rate_over_every_queue(client: redis.Redis) -> None:
    queues = [_keys(), _keys(), _keys()]
    producer = Producer(RedisCalls(client), queues, ProducerPolicy(rate=200.0, total=60))
    t0 = time.perf_counter()
    producer.run()
    elapsed = time.perf_counter() - t0
    assert 0.28 <= elapsed < 3.0, elapsed  # 60 jobs at 200/s: the first is due after 5 ms, the last after 300
    assert [client.zcard(q.pending) for q in queues] == [20, 20, 20]


def test_a_lost_server_is_unanswered_and_a_strict_role_raises_it() -> None:
    import pytest

    from echomq.errors import ServerUnavailableError
    from echomq_bench.servers import start

    srv = start("redis")
    # No client-side retries: the engine never resends, and redis-py's default backoff would take seconds.
    c = srv.client(socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))  # type: ignore[attr-defined]
    calls = RedisCalls(c)
    srv.stop()
    heard: list[Event] = []
    lenient = Producer(calls, [_keys()], ProducerPolicy(total=3, backoff_s=0.0), heard.append)
    lenient.run()
    assert [(e.verb, e.outcome) for e in heard] == [("enqueue", "unanswered")] * 3
    assert all(isinstance(e.error, ServerUnavailableError) for e in heard)
    strict = Consumer(calls, [_keys()], ConsumerPolicy(backoff_s=0.0), strict=True)
    with pytest.raises(ServerUnavailableError):
        strict.run(Stop(deadline=time.perf_counter() + 5))
    assert strict.tally == {("claim", "unanswered"): 1}


def test_consumer_claims_open_loop_at_its_rate(client: redis.Redis) -> None:
    keys = _keys()
    Producer(RedisCalls(client), [keys], ProducerPolicy(batch=50, total=200)).run()
    consumer = Consumer(RedisCalls(client), [keys], ConsumerPolicy(rate=100.0, claim_batch=2))
    t0 = time.perf_counter()
    consumer.run(Stop(deadline=t0 + 0.5))
    # Rounds of 2 at 100 claims/s: one round due every 20 ms, the first after 20 ms; a fast server
    # would otherwise drain all 200 in a few milliseconds.
    claimed = consumer.tally["claim", "claimed"]
    assert 20 <= claimed <= 52, claimed
    assert consumer.tally["complete", "accepted"] == claimed
    assert client.zcard(keys.pending) == 200 - claimed


def test_a_policy_subclass_sets_each_retry_delay_by_attempt(client: redis.Redis) -> None:
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Backoff(ConsumerPolicy):
        asked: list[int] = field(default_factory=list)

        def retry_delay(self, attempt: int, rng: random.Random) -> int:
            self.asked.append(attempt)
            return 60_000 if attempt == 2 else 0

    keys = _keys()
    calls = RedisCalls(client)
    Producer(calls, [keys], ProducerPolicy(total=5)).run()
    policy = Backoff(fail_rate=1.0, max_attempts=5, until_empty=True)
    pump = Pump(calls, [keys], PumpPolicy(reap=False))
    consumer = Consumer(calls, [keys], policy)
    for _ in range(2):  # attempt 1 retries at once and is promoted; attempt 2 waits a minute
        consumer.run(Stop(deadline=time.perf_counter() + 10))
        consumer.finished = False
        pump.step()
    assert policy.asked == [1] * 5 + [2] * 5
    assert client.zcard(keys.schedule) == 5 and client.zcard(keys.pending) == 0
    assert pump.tally["promote", "ok"] == 2 and ("reap", "ok") not in pump.tally


def test_pump_drains_a_queue_in_rounds_of_its_limit(client: redis.Redis) -> None:
    keys = _keys()
    calls = RedisCalls(client)
    Producer(calls, [keys], ProducerPolicy(batch=100, total=250)).run()
    # Claim every job with a 1 ms lease and walk away: all 250 leases expire.
    Consumer(calls, [keys], ConsumerPolicy(lease_ms=1, crash_rate=1.0, claim_batch=50, until_empty=True)).run(
        Stop(deadline=time.perf_counter() + 10))
    wait_past(client, server_ms(client) + 1)
    one_round = Pump(calls, [keys], PumpPolicy(reap_limit=100, promote=False))
    assert one_round.step() == 100
    drained = Pump(calls, [keys], PumpPolicy(reap_limit=100, promote=False, drain_rounds=5))
    assert drained.step() == 150 and drained.tally["reap", "ok"] == 2
    assert client.zcard(keys.pending) == 250 and client.zcard(keys.active) == 0


def test_a_capped_backlog_top_up_goes_on_without_waiting(client: redis.Redis) -> None:
    keys = _keys()
    calls = RedisCalls(client)
    producer = Producer(calls, [keys], ProducerPolicy(backlog=400, refill_max=50, refill_s=0.5))
    t0 = time.perf_counter()
    while client.zcard(keys.pending) < 400 and time.perf_counter() - t0 < 5:
        assert producer.step() == 50  # never more than refill_max per round trip
    # Eight capped top-ups in a row: none waited out refill_s.
    assert client.zcard(keys.pending) == 400 and time.perf_counter() - t0 < 0.5
