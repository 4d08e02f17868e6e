"""Every verb and every transition, on each build."""

from __future__ import annotations

import pytest
import redis

import echomq
from echomq import Job, Queue, StaleTokenError, mint
from tests.helpers import server_ms, wait_past


def wait_until_all_due(client: redis.Redis, key: str) -> None:
    """Wait on the server's clock until every score in `key` (leases' deadlines
    or run-ats) is due: until it reads the highest."""
    latest = client.zrange(key, -1, -1, withscores=True)
    assert latest, f"{key} holds nothing to wait for"
    wait_past(client, latest[0][1])


def test_enqueue_writes_a_pending_row(queue: Queue, client: redis.Redis) -> None:
    jid = mint()
    assert queue.enqueue(jid, "héllo") == "enqueued"
    assert client.hgetall(queue.keys.job(jid)) == {
        b"state": b"pending", b"attempts": b"0", b"payload": "héllo".encode()}
    assert client.zscore(queue.keys.pending, jid) == 0
    assert queue.pending_size() == 1


def test_duplicate_leaves_the_row_untouched(queue: Queue, client: redis.Redis) -> None:
    jid = mint()
    queue.enqueue(jid, b"one")
    job = queue.claim(lease_ms=10_000)
    assert queue.enqueue(jid, b"two") == "duplicate"
    assert client.hgetall(queue.keys.job(jid))[b"state"] == b"active"
    assert client.hget(queue.keys.job(jid), "payload") == b"one"
    assert queue.pending_size() == 0 and job is not None and job.id == jid


def test_claim_is_fifo_with_a_server_clock_lease(queue: Queue, client: redis.Redis) -> None:
    ids = [mint() for _ in range(3)]
    for jid in reversed(ids):  # insertion order must not matter, only id order
        queue.enqueue(jid, jid.encode())
    before = server_ms(client)
    jobs = [queue.claim(lease_ms=5_000) for _ in range(3)]
    after = server_ms(client)
    assert [j.id for j in jobs] == ids  # type: ignore[union-attr]
    assert all(j.token == 1 and j.payload == j.id.encode() for j in jobs)  # type: ignore[union-attr]
    for jid in ids:
        assert before + 5_000 <= client.zscore(queue.keys.active, jid) <= after + 5_000
        assert client.hget(queue.keys.job(jid), "state") == b"active"
    assert queue.claim(lease_ms=5_000) is None


def test_complete_deletes_everything(queue: Queue, client: redis.Redis) -> None:
    jid = mint()
    queue.enqueue(jid, b"x")
    job = queue.claim(lease_ms=5_000)
    assert job == Job(jid, b"x", 1)
    assert queue.complete(job.id, job.token) == "ok"
    assert client.keys(queue.keys.base.replace("{", "\\{").replace("}", "\\}") + "*") == []


def test_complete_is_fenced(queue: Queue, client: redis.Redis) -> None:
    jid = mint()
    queue.enqueue(jid, b"x")
    with pytest.raises(StaleTokenError):  # pending, never claimed
        queue.complete(jid, 1)
    job = queue.claim(lease_ms=5_000)
    with pytest.raises(StaleTokenError):
        queue.complete(jid, job.token + 1)  # type: ignore[union-attr]
    assert queue.complete(jid, job.token) == "ok"  # type: ignore[union-attr]
    with pytest.raises(StaleTokenError):  # twice
        queue.complete(jid, job.token)  # type: ignore[union-attr]


def test_retry_schedules_then_promote_returns_it(queue: Queue, client: redis.Redis) -> None:
    jid = mint()
    queue.enqueue(jid, b"x")
    job = queue.claim(lease_ms=5_000)
    before = server_ms(client)
    assert queue.retry(jid, job.token, "flaky", delay_ms=30) == "scheduled"  # type: ignore[union-attr]
    run_at = client.zscore(queue.keys.schedule, jid)
    assert before + 30 <= run_at <= server_ms(client) + 30
    row = client.hgetall(queue.keys.job(jid))
    assert row[b"state"] == b"scheduled" and row[b"last_error"] == b"flaky"
    assert client.zscore(queue.keys.active, jid) is None
    assert queue.promote(limit=10) == 0
    wait_until_all_due(client, queue.keys.schedule)
    assert queue.promote(limit=10) == 1
    assert client.hget(queue.keys.job(jid), "state") == b"pending"
    assert client.zscore(queue.keys.pending, jid) == 0
    again = queue.claim(lease_ms=5_000)
    assert again is not None and again.token == 2


def test_retry_at_max_attempts_goes_dead(queue: Queue, client: redis.Redis) -> None:
    jid = mint()
    queue.enqueue(jid, b"x")
    queue.retry(jid, queue.claim(lease_ms=5_000).token, "one", delay_ms=0)  # type: ignore[union-attr]
    queue.promote(limit=10)
    job = queue.claim(lease_ms=5_000)
    assert queue.retry(jid, job.token, "two", delay_ms=0) == "dead"  # type: ignore[union-attr]
    row = client.hgetall(queue.keys.job(jid))
    assert row[b"state"] == b"dead" and row[b"last_error"] == b"two" and row[b"attempts"] == b"2"
    assert client.zscore(queue.keys.dead, jid) == 0
    assert queue.browse(limit=5, state="dead") == [jid]
    with pytest.raises(StaleTokenError):
        queue.retry(jid, job.token, "three", delay_ms=0)  # type: ignore[union-attr]


def test_retry_is_fenced_and_changes_nothing_when_stale(queue: Queue, client: redis.Redis) -> None:
    jid = mint()
    queue.enqueue(jid, b"x")
    job = queue.claim(lease_ms=5_000)
    before = client.hgetall(queue.keys.job(jid))
    with pytest.raises(StaleTokenError):
        queue.retry(jid, job.token + 1, "nope", delay_ms=0)  # type: ignore[union-attr]
    assert client.hgetall(queue.keys.job(jid)) == before


def test_promote_respects_its_batch(queue: Queue, client: redis.Redis) -> None:
    ids = [mint() for _ in range(5)]
    for jid in ids:
        queue.enqueue(jid, b"x")
    for _ in ids:
        job = queue.claim(lease_ms=5_000)
        queue.retry(job.id, job.token, "e", delay_ms=0)  # type: ignore[union-attr]
    assert queue.promote(limit=2) == 2
    assert queue.promote(limit=100) == 3
    assert queue.promote(limit=100) == 0
    assert queue.pending_size() == 5


def test_reap_returns_expired_leases_and_kills_at_max(queue: Queue, client: redis.Redis) -> None:
    first, second = mint(), mint()
    queue.enqueue(first, b"x")
    queue.enqueue(second, b"x")
    # first: attempt 1 expires -> pending.  second: at max (2) expires -> dead.
    job = queue.claim(lease_ms=5_000)
    queue.retry(job.id, job.token, "e", delay_ms=0)  # type: ignore[union-attr]
    queue.promote(limit=10)
    a = queue.claim(lease_ms=10)  # first again, token 2 == max
    b = queue.claim(lease_ms=10)  # second, token 1
    assert (a.id, a.token, b.id, b.token) == (first, 2, second, 1)  # type: ignore[union-attr]
    wait_until_all_due(client, queue.keys.active)
    assert queue.reap() == 2
    assert client.hgetall(queue.keys.job(first))[b"state"] == b"dead"
    assert client.hget(queue.keys.job(first), "last_error") == b"lease expired"
    assert client.hget(queue.keys.job(second), "state") == b"pending"
    assert queue.browse(limit=5) == [second]
    assert queue.reap() == 0


def test_reap_never_exceeds_its_cap(queue: Queue, client: redis.Redis) -> None:
    pipe = client.pipeline(transaction=False)
    for _ in range(250):
        jid = mint()
        call = echomq.verbs.enqueue(queue.keys, jid, b"")
        queue.scripts[call.verb](keys=call.keys, args=call.args, client=pipe)
    pipe.execute()
    for _ in range(250):
        queue.claim(lease_ms=1)
    wait_until_all_due(client, queue.keys.active)
    assert [queue.reap(), queue.reap(limit=30), queue.reap(), queue.reap()] == [100, 30, 100, 20]
    assert queue.pending_size() == 250


def test_browse_is_newest_first_by_lex_range(queue: Queue) -> None:
    ids = [mint() for _ in range(12)]
    for jid in ids:
        queue.enqueue(jid, b"")
    assert queue.browse(limit=5) == ids[::-1][:5]
    assert queue.browse(limit=100) == ids[::-1]
    assert queue.browse(limit=5, state="dead") == []


def test_zombie_complete_after_reclaim_is_refused(queue: Queue, client: redis.Redis) -> None:
    jid = mint()
    queue.enqueue(jid, b"x")
    zombie = queue.claim(lease_ms=5)
    wait_until_all_due(client, queue.keys.active)
    assert queue.reap() == 1
    holder = queue.claim(lease_ms=5_000)
    with pytest.raises(StaleTokenError):
        queue.complete(jid, zombie.token)  # type: ignore[union-attr]
    with pytest.raises(StaleTokenError):
        queue.retry(jid, zombie.token, "late", delay_ms=0)  # type: ignore[union-attr]
    assert queue.complete(jid, holder.token) == "ok"  # type: ignore[union-attr]
