"""Damage never strands a job, on every build installed here.

A job row goes missing (eviction under a policy other than noeviction, an
operator's DEL), holds another type, or carries an attempts no script wrote;
a queue key holds another type. Every script reads what it depends on before
its first write: a damaged job goes to the dead set with last_error naming
the damage and the rest of its batch moves as usual; a key of the wrong type
refuses the call, which then changes no key. After each case every job that
was intact is in exactly one set, in the state that set means.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Callable

import pytest
import redis

from echomq import Queue, StaleTokenError, mint
from echomq.errors import KeyspaceDamageError, ServerReplyError
from echomq_bench.servers import EmbeddedServer
from tests.helpers import server_ms, snapshot, wait_past

SETS = ("pending", "active", "schedule", "dead")


@pytest.fixture
def q(any_build: EmbeddedServer) -> Iterator[Queue]:
    client = any_build.client()
    client.flushall()
    yield Queue(client, "dmg", max_attempts=5)
    client.close()


def where(q: Queue, job_id: str) -> list[str]:
    """The sets the id is in: exactly one for a job that is not done."""
    return [name for name in SETS if q.client.zscore(getattr(q.keys, name), job_id) is not None]


def state(q: Queue, job_id: str) -> bytes | None:
    return q.client.hget(q.keys.job(job_id), "state")


def expired_leases(q: Queue, n: int) -> list[str]:
    ids = [mint() for _ in range(n)]
    for job_id in ids:
        q.enqueue(job_id, b"p")
    for _ in ids:
        assert q.claim(1) is not None
    wait_past(q.client, server_ms(q.client) + 1)
    return ids


DAMAGE: dict[str, tuple[Callable[[redis.Redis, str], Any], str]] = {
    "missing": (lambda c, key: c.delete(key), "row missing"),
    "string": (lambda c, key: (c.delete(key), c.set(key, "x")), "row is not a hash"),
    "unreadable attempts": (lambda c, key: c.hset(key, "attempts", "many"), "attempts is not plain digits up to 2^53"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_one_damaged_row_in_a_reap_batch_strands_no_other_job(q: Queue, damage: str) -> None:
    ids = expired_leases(q, 5)
    spoil, why = DAMAGE[damage]
    spoil(q.client, q.keys.job(ids[2]))
    assert q.reap(100) == 5
    for job_id in ids[:2] + ids[3:]:
        assert (where(q, job_id), state(q, job_id)) == (["pending"], b"pending")
    assert where(q, ids[2]) == ["dead"]
    if damage != "string":   # a key of another type is left as it was found
        assert q.client.hget(q.keys.job(ids[2]), "last_error") == f"damaged: {why} at reap".encode()
        assert state(q, ids[2]) == b"dead"
    else:
        assert q.client.get(q.keys.job(ids[2])) == b"x"
    # The four come back to claims; the buried one never does.
    claimed = {job.id for job in iter(lambda: q.claim(60_000), None)}
    assert claimed == set(ids) - {ids[2]}


@pytest.mark.parametrize("damage", DAMAGE)
def test_claim_buries_a_damaged_job_and_hands_out_the_next(q: Queue, damage: str) -> None:
    first, second = mint(), mint()
    q.enqueue(first, b"one")
    q.enqueue(second, b"two")
    spoil, why = DAMAGE[damage]
    spoil(q.client, q.keys.job(first))
    job = q.claim(60_000)
    assert job is not None and (job.id, job.payload, job.token) == (second, b"two", 1)
    assert where(q, first) == ["dead"] and where(q, second) == ["active"]
    if damage != "string":
        assert q.client.hget(q.keys.job(first), "last_error") == f"damaged: {why} at claim".encode()
    assert q.claim(60_000) is None   # nothing is handed out with an empty payload


def test_a_pending_row_without_its_payload_is_never_handed_out(q: Queue) -> None:
    job_id = mint()
    q.enqueue(job_id, b"p")
    q.client.hdel(q.keys.job(job_id), "payload")
    assert q.claim(60_000) is None
    assert where(q, job_id) == ["dead"]
    assert q.client.hget(q.keys.job(job_id), "last_error") == b"damaged: payload missing at claim"


@pytest.mark.parametrize("damage", ["missing", "string"])
def test_promote_buries_a_damaged_retry_and_moves_the_rest(q: Queue, damage: str) -> None:
    ids = [mint() for _ in range(3)]
    for job_id in ids:
        q.enqueue(job_id, b"p")
    for _ in ids:
        job = q.claim(60_000)
        assert job is not None and q.retry(job.id, job.token, "e", 0) == "scheduled"
    spoil, why = DAMAGE[damage]
    spoil(q.client, q.keys.job(ids[0]))
    assert q.promote(100) == 3
    assert where(q, ids[0]) == ["dead"]
    assert [where(q, j) for j in ids[1:]] == [["pending"], ["pending"]]
    if damage != "string":
        assert q.client.hget(q.keys.job(ids[0]), "last_error") == f"damaged: {why} at promote".encode()


def test_a_spoiled_row_that_promote_cannot_tell_is_buried_by_claim(q: Queue) -> None:
    # Promote checks only what its one write finds (a missing row, another type);
    # the attempts inside a whole row is read by claim, which buries it there.
    job_id = mint()
    q.enqueue(job_id, b"p")
    job = q.claim(60_000)
    assert job is not None and q.retry(job.id, job.token, "e", 0) == "scheduled"
    q.client.hset(q.keys.job(job_id), "attempts", "many")
    assert q.promote(100) == 1 and where(q, job_id) == ["pending"]
    assert q.claim(60_000) is None and where(q, job_id) == ["dead"]
    why = q.client.hget(q.keys.job(job_id), "last_error")
    assert why == b"damaged: attempts is not plain digits up to 2^53 at claim"


def test_a_row_in_the_wrong_state_for_its_set_is_damage(q: Queue) -> None:
    ids = expired_leases(q, 2)
    q.client.hset(q.keys.job(ids[0]), "state", "scheduled")   # in active, yet says scheduled
    assert q.reap(100) == 2
    assert where(q, ids[0]) == ["dead"] and where(q, ids[1]) == ["pending"]
    assert q.client.hget(q.keys.job(ids[0]), "last_error") == b"damaged: row state is scheduled, not active at reap"


def _every_verb(q: Queue, job_id: str, token: int) -> dict[str, Callable[[], Any]]:
    return {"enqueue": lambda: q.enqueue(mint(), b"p"), "claim": lambda: q.claim(60_000),
            "complete": lambda: q.complete(job_id, token), "retry": lambda: q.retry(job_id, token, "e", 0),
            "promote": lambda: q.promote(100), "reap": lambda: q.reap(100)}


@pytest.mark.parametrize("slot", SETS)
def test_a_set_of_the_wrong_type_refuses_every_verb_that_writes_it_and_changes_nothing(q: Queue, slot: str) -> None:
    # One job in each of the other sets, so a refused call has something it could have stranded.
    waiting, held = mint(), mint()
    q.enqueue(waiting, b"w")
    q.enqueue(held, b"h")
    job = q.claim(60_000)
    assert job is not None and job.id == waiting
    key = getattr(q.keys, slot)
    q.client.delete(key)
    q.client.set(key, "not a set")
    for verb, call in _every_verb(q, job.id, job.token).items():
        before = snapshot(q.client)
        try:
            call()
        except KeyspaceDamageError as exc:
            assert exc.code == "EMQDAMAGE" and key in str(exc), (verb, str(exc))
            assert snapshot(q.client) == before, f"{verb} refused yet changed the keyspace"
        except StaleTokenError:   # complete ran first (active intact), so retry's token is stale
            assert verb == "retry" and snapshot(q.client) == before
        else:
            # A verb that does not touch the damaged set works, and strands nothing.
            for job_id in (waiting, held):
                assert len([s for s in SETS if s != slot and q.client.zscore(getattr(q.keys, s), job_id)
                            is not None]) <= 1, (verb, job_id)
    assert q.client.get(key) == b"not a set"


def test_a_row_key_of_another_type_refuses_enqueue_complete_and_retry(q: Queue) -> None:
    job_id = mint()
    q.client.set(q.keys.job(job_id), "x")
    before = snapshot(q.client)
    for call in (lambda: q.enqueue(job_id, b"p"), lambda: q.complete(job_id, 1),
                 lambda: q.retry(job_id, 1, "e", 0)):
        with pytest.raises(KeyspaceDamageError, match=r"^EMQDAMAGE emq:\{dmg\}:job:JOB\w+ is (a string, )?not a hash"):
            call()
        assert snapshot(q.client) == before


def test_an_error_reply_no_code_names_is_in_the_tree(q: Queue, any_build: EmbeddedServer) -> None:
    # A user without HMGET: claim's read of the row is refused, which is no damage: the id goes back.
    admin = any_build.client()
    job_id = mint()
    q.enqueue(job_id, b"p")
    admin.execute_command("ACL", "SETUSER", "nohmget", "reset", "on", ">pw", "~*", "+@all", "-hmget")
    try:
        limited = Queue(any_build.client(username="nohmget", password="pw"), "dmg", max_attempts=5)
        with pytest.raises(ServerReplyError) as caught:
            limited.claim(60_000)
        refused = r"can't run this command|permissions to run the 'hmget'"   # 6.2 / 7 and later
        assert caught.value.code == "EMQREPLY" and re.search(refused, str(caught.value))
        assert where(q, job_id) == ["pending"] and state(q, job_id) == b"pending"
    finally:
        admin.execute_command("ACL", "DELUSER", "nohmget")
        admin.close()


def test_a_server_that_may_evict_rows_is_named_by_queue_and_check(
        any_build: EmbeddedServer, capsys: pytest.CaptureFixture[str]) -> None:
    import warnings

    from echomq import EvictionWarning
    from echomq_bench.commands.check import _say_servers

    client = any_build.client()
    with warnings.catch_warnings():
        warnings.simplefilter("error", EvictionWarning)
        Queue(client, "quiet")   # noeviction, the servers' default: nothing to say
    client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with pytest.warns(EvictionWarning, match="maxmemory-policy allkeys-lru, accepted: it may evict"):
            Queue(client, "loud", accept_eviction="allkeys-lru")
        _say_servers([any_build])(any_build.name, "?", None)
        printed = capsys.readouterr().out.splitlines()
        assert printed[1].startswith("settings: maxmemory-policy allkeys-lru, appendonly no, save ''")
        assert printed[2].startswith("WARNING: maxmemory-policy allkeys-lru may evict job rows")
    finally:
        client.config_set("maxmemory-policy", "noeviction")
        client.close()



def test_a_full_server_refuses_new_jobs_and_drains_the_rest(q: Queue) -> None:
    # A script meets maxmemory only at its first write, and only when that write
    # is one that may grow memory: enqueue's ZADD. Every other verb's first write
    # removes (ZPOPMIN, ZREM, ZREMRANGEBYRANK), so a full server still drains.
    # Those writes go through pcall to tell a key of another type; an OOM must
    # come through as OOM, not as damage.
    from echomq.errors import OutOfMemoryError

    first, second, third = mint(), mint(), mint()
    for job_id in (first, second, third):
        q.enqueue(job_id, b"p")
    expiring = q.claim(1)
    assert expiring is not None and expiring.id == first
    wait_past(q.client, server_ms(q.client) + 1)
    q.client.config_set("maxmemory-policy", "noeviction")
    q.client.config_set("maxmemory", 1)
    try:
        before = snapshot(q.client)
        with pytest.raises(OutOfMemoryError) as caught:
            q.enqueue(mint(), b"p")
        assert caught.value.code == "OOM"
        assert snapshot(q.client) == before, "enqueue refused for memory yet changed the keyspace"
        assert q.reap(100) == 1 and where(q, first) == ["pending"]
        done = q.claim(60_000)
        assert done is not None and done.id == first and q.complete(done.id, done.token) == "ok"
        failing = q.claim(60_000)
        assert failing is not None and failing.id == second
        # A delay of 0 is due at once: promote reads the server's clock no earlier than retry did.
        assert q.retry(failing.id, failing.token, "e", 0) == "scheduled"
        assert q.promote(100) == 1
        assert (where(q, first), where(q, second), where(q, third)) == ([], ["pending"], ["pending"])
    finally:
        q.client.config_set("maxmemory", 0)
