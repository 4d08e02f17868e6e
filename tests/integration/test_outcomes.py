"""The client tells the truth when a reply is lost: through the fault proxy,
on a plain redis.Redis with redis-py's default retry settings on.

A complete that landed is reported completed or OutcomeUnknownError, never
stale; a complete whose lease was lost is still reported stale."""

from __future__ import annotations

import secrets
import threading
import time

import pytest
import redis

from echomq import Job, OutcomeUnknownError, Queue, StaleTokenError, mint
from echomq._instrument import verbs
from echomq_bench.faults.proxy import FaultProxy
from tests.helpers import wait_past


@pytest.fixture
def name() -> str:
    return f"out-{secrets.token_hex(3)}"


def _worker(proxy: FaultProxy, name: str, timeout: float | None = None) -> Queue:
    # The defaults: redis-py resends a command whose connection dropped or timed out.
    return Queue(redis.Redis(port=proxy.port, socket_timeout=timeout), name, max_attempts=3)


def _claimed(q: Queue, lease_ms: int = 30_000) -> Job:
    q.enqueue(mint(), b"payload")
    job = q.claim(lease_ms)
    assert job is not None
    return job


def test_a_resend_under_the_defaults_would_report_a_landed_complete_stale(proxy: FaultProxy, client: redis.Redis,
                                                                           name: str) -> None:
    """The hazard itself, without Queue's guard: the script called the usual way."""
    q = _worker(proxy, name)
    job = _claimed(q)
    proxy.drop_next_reply()
    with pytest.raises(redis.exceptions.ResponseError, match="^EMQSTALE"):
        call = verbs.complete(q.keys, job.id, job.token)
        q.scripts["complete"](keys=call.keys, args=call.args, client=q.client)
    assert client.exists(q.keys.job(job.id)) == 0  # it had landed


def test_a_landed_complete_whose_reply_was_lost_is_reported_completed(proxy: FaultProxy, client: redis.Redis,
                                                                       name: str) -> None:
    q = _worker(proxy, name)
    job = _claimed(q)
    proxy.drop_next_reply()
    assert q.complete(job.id, job.token) == "ok"
    assert proxy.counts["replies_dropped"] == 1
    assert client.exists(q.keys.job(job.id)) == 0 and client.zscore(q.keys.active, job.id) is None


def test_a_landed_complete_past_its_lease_is_outcome_unknown_never_stale(proxy: FaultProxy, client: redis.Redis,
                                                                          name: str) -> None:
    q = _worker(proxy, name)
    job = _claimed(q, lease_ms=50)
    # The lease runs out, but nobody reaps it: the complete still lands. One ms past the score,
    # a whole ms, so the client's own record of the lease (timed from before it sent the claim) ran out too.
    wait_past(client, client.zscore(q.keys.active, job.id) + 1)
    proxy.drop_next_reply()
    with pytest.raises(OutcomeUnknownError, match="our lease may have expired"):
        q.complete(job.id, job.token)
    assert client.exists(q.keys.job(job.id)) == 0


def test_a_complete_lost_on_the_way_is_sent_again_and_lands_once(proxy: FaultProxy, client: redis.Redis,
                                                                  name: str) -> None:
    q = _worker(proxy, name)
    job = _claimed(q)
    proxy.latency(300)  # the complete is still inside the proxy when the reset comes

    def reset() -> None:
        proxy.reset()
        proxy.clear()
    threading.Timer(0.1, reset).start()
    assert q.complete(job.id, job.token) == "ok"
    assert proxy.counts["resets"] >= 1
    assert client.exists(q.keys.job(job.id)) == 0


def test_a_stale_complete_is_still_stale_when_its_reply_is_lost(proxy: FaultProxy, client: redis.Redis,
                                                                 name: str) -> None:
    q, other = _worker(proxy, name), Queue(client, name, max_attempts=3)
    job = _claimed(q, lease_ms=50)
    wait_past(client, client.zscore(q.keys.active, job.id))
    assert other.reap() == 1
    again = other.claim(30_000)
    assert again is not None and (again.id, again.token) == (job.id, job.token + 1)
    proxy.drop_next_reply()
    with pytest.raises(StaleTokenError, match=f"^EMQSTALE token {job.token} does not hold the lease on {job.id}"):
        q.complete(job.id, job.token)
    with pytest.raises(StaleTokenError):  # and without a fault, as ever
        q.complete(job.id, job.token)
    assert other.complete(again.id, again.token) == "ok"


def test_a_landed_retry_whose_reply_was_lost_is_reported_scheduled(proxy: FaultProxy, client: redis.Redis,
                                                                    name: str) -> None:
    q = _worker(proxy, name)
    job = _claimed(q)
    proxy.drop_next_reply()
    assert q.retry(job.id, job.token, "boom", delay_ms=60_000) == "scheduled"
    assert client.hmget(q.keys.job(job.id), "state", "attempts") == [b"scheduled", b"1"]


def test_a_claim_whose_reply_was_lost_is_outcome_unknown_and_not_resent(proxy: FaultProxy, client: redis.Redis,
                                                                         name: str) -> None:
    q = _worker(proxy, name)
    first, second = mint(), mint()
    q.enqueue(first, b"a")
    q.enqueue(second, b"b")
    proxy.drop_next_reply()
    with pytest.raises(OutcomeUnknownError, match="returns to pending once its lease of 30000 ms expires"):
        q.claim(30_000)
    # One job leased to nobody, the other still pending: no second claim was sent.
    assert [m.decode() for m in client.zrange(q.keys.active, 0, -1)] == [first]
    assert [m.decode() for m in client.zrange(q.keys.pending, 0, -1)] == [second]


def test_a_partition_makes_the_complete_outcome_unknown_then_it_lands(proxy: FaultProxy, client: redis.Redis,
                                                                       name: str) -> None:
    q = _worker(proxy, name, timeout=0.3)
    job = _claimed(q)
    proxy.blackhole()  # until healed: the row cannot be read either
    with pytest.raises(OutcomeUnknownError, match="could not be asked what happened"):
        q.complete(job.id, job.token)
    assert client.exists(q.keys.job(job.id)) == 1
    proxy.heal()
    deadline = time.monotonic() + 3  # what was sent into the partition arrives once it heals
    while client.exists(q.keys.job(job.id)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert client.exists(q.keys.job(job.id)) == 0
