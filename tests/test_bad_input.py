"""Every refusal: a clear error naming the problem, and no key changed,
whether the call comes through Queue or as a raw EVALSHA."""

from __future__ import annotations

import socket
import time
from typing import Callable

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from conftest import snapshot
from echomq import InvalidArgumentError, Queue, ServerUnavailableError, WrongKindError, mint, verbs
from echomq.verbs import ScriptCall

BAD_IDS = ["", "JOB", "JOB0Nvmd8aV5i", "JOB0Nvmd8aV5iyy", "JOB0Nvmd8aV5i!", "JOB0Nvmd8aV5i{",
           "JOB0Nvmd8aV5i}", "JOB0Nvmd8aV5i:", "JOB0Nvmd8aV5i ", "JOB0Nvmd8aV5é", "job0Nvmd8aV5iy",
           "JOBzzzzzzzzzzz"]
NOT_STRINGS = [None, 42, b"JOB0Nvmd8aV5iy", ["JOB0Nvmd8aV5iy"]]
BAD_WIRE_INTS = ["0", "-1", "1.5", "abc", "", "1e3", " 5", "0x10"]


@pytest.fixture
def busy_queue(queue: Queue) -> Queue:
    """A queue with something in every set, so a stray write would show."""
    ids = [mint() for _ in range(4)]
    for jid in ids:
        queue.enqueue(jid, b"payload")
    job = queue.claim(lease_ms=60_000)
    queue.retry(job.id, job.token, "e", delay_ms=60_000)  # type: ignore[union-attr]
    queue.claim(lease_ms=60_000)
    return queue


def refused(client: redis.Redis, call: Callable[[], object], exc: type[Exception], code: str) -> str:
    before = snapshot(client)
    started = time.monotonic()
    with pytest.raises(exc) as info:
        call()
    assert time.monotonic() - started < 2
    assert getattr(info.value, "code", None) == code, info.value
    assert snapshot(client) == before
    return str(info.value)


def wire(client: redis.Redis, call: Callable[[], object], code: str) -> str:
    before = snapshot(client)
    with pytest.raises(redis.exceptions.ResponseError) as info:
        call()
    assert str(info.value).split(" ", 1)[0] == code, info.value
    assert snapshot(client) == before
    return str(info.value)


def raw(client: redis.Redis, q: Queue, call: ScriptCall) -> Callable[[], object]:
    """The call as a raw EVALSHA, past every check of Queue's."""
    return lambda: client.execute_command(*call.evalsha(q.scripts.sha(call.verb)))


def test_wrong_kind(busy_queue: Queue, client: redis.Redis) -> None:
    q, k = busy_queue, busy_queue.keys
    ord_id = mint("ORD")
    for call in (lambda: q.enqueue(ord_id, b""), lambda: q.complete(ord_id, 1),
                 lambda: q.retry(ord_id, 1, "e", 0)):
        assert "ORD" in refused(client, call, WrongKindError, "EMQKIND")
    wire(client, raw(client, q, verbs.enqueue(k, ord_id, b"")), "EMQKIND")
    wire(client, raw(client, q, verbs.complete(k, ord_id, 1)), "EMQKIND")
    wire(client, raw(client, q, verbs.retry(k, ord_id, 1, "e", 0, 2)), "EMQKIND")


@pytest.mark.parametrize("bad", BAD_IDS + NOT_STRINGS)
def test_malformed_id_through_queue(busy_queue: Queue, client: redis.Redis, bad: object) -> None:
    q = busy_queue
    for call in (lambda: q.enqueue(bad, b""), lambda: q.complete(bad, 1),  # type: ignore[arg-type]
                 lambda: q.retry(bad, 1, "e", 0)):  # type: ignore[arg-type]
        assert "id" in refused(client, call, InvalidArgumentError, "EMQID")


@pytest.mark.parametrize("bad", BAD_IDS)
def test_malformed_id_on_the_wire(busy_queue: Queue, client: redis.Redis, bad: str) -> None:
    q, k = busy_queue, busy_queue.keys
    wire(client, raw(client, q, verbs.enqueue(k, bad, b"x")), "EMQID")
    wire(client, raw(client, q, verbs.complete(k, bad, 1)), "EMQID")
    wire(client, raw(client, q, verbs.retry(k, bad, 1, "e", 0, 2)), "EMQID")


@pytest.mark.parametrize("name", ["", "a" * 65, "a b", "a{b}", "q:1", "é", 7, None])
def test_bad_queue_name(client: redis.Redis, name: object) -> None:
    message = refused(client, lambda: Queue(client, name), InvalidArgumentError, "EMQARG")  # type: ignore[arg-type]
    assert "queue name" in message


BAD_NUMBERS = [0, -1, 1.5, "10", True, None, 2**31]


@pytest.mark.parametrize("bad", BAD_NUMBERS)
def test_bad_lease_delay_limit(busy_queue: Queue, client: redis.Redis, bad: object) -> None:
    q = busy_queue
    jid = q.browse(limit=1)[0]
    assert "lease_ms" in refused(client, lambda: q.claim(lease_ms=bad), InvalidArgumentError, "EMQARG")  # type: ignore[arg-type]
    assert "limit" in refused(client, lambda: q.reap(limit=bad), InvalidArgumentError, "EMQARG")  # type: ignore[arg-type]
    assert "limit" in refused(client, lambda: q.promote(limit=bad), InvalidArgumentError, "EMQARG")  # type: ignore[arg-type]
    assert "limit" in refused(client, lambda: q.browse(limit=bad), InvalidArgumentError, "EMQARG")  # type: ignore[arg-type]
    if bad != 0:  # a delay of 0 is legal
        assert "delay_ms" in refused(client, lambda: q.retry(jid, 1, "e", delay_ms=bad),  # type: ignore[arg-type]
                                     InvalidArgumentError, "EMQARG")


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1", True, None, 2**53 + 1])
def test_bad_token(busy_queue: Queue, client: redis.Redis, bad: object) -> None:
    q = busy_queue
    jid = q.browse(limit=1)[0]
    assert "token" in refused(client, lambda: q.complete(jid, bad), InvalidArgumentError, "EMQARG")  # type: ignore[arg-type]
    assert "token" in refused(client, lambda: q.retry(jid, bad, "e", 0), InvalidArgumentError, "EMQARG")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", BAD_WIRE_INTS)
def test_bad_numbers_on_the_wire(busy_queue: Queue, client: redis.Redis, bad: str) -> None:
    q, k = busy_queue, busy_queue.keys
    jid = busy_queue.browse(limit=1)[0]
    assert "lease_ms" in wire(client, raw(client, q, verbs.claim(k, bad)), "EMQARG")  # type: ignore[arg-type]
    assert "limit" in wire(client, raw(client, q, verbs.reap(k, bad, 2)), "EMQARG")  # type: ignore[arg-type]
    assert "max_attempts" in wire(client, raw(client, q, verbs.reap(k, 100, bad)), "EMQARG")  # type: ignore[arg-type]
    assert "limit" in wire(client, raw(client, q, verbs.promote(k, bad)), "EMQARG")  # type: ignore[arg-type]
    assert "token" in wire(client, raw(client, q, verbs.complete(k, jid, bad)), "EMQARG")  # type: ignore[arg-type]
    retry = lambda tok, delay, mx: raw(client, q, verbs.retry(k, jid, tok, "e", delay, mx))()  # noqa: E731
    assert "token" in wire(client, lambda: retry(bad, 0, 2), "EMQARG")
    assert "max_attempts" in wire(client, lambda: retry(1, 0, bad), "EMQARG")
    if bad != "0":
        assert "delay_ms" in wire(client, lambda: retry(1, bad, 2), "EMQARG")


def test_limits_above_range_on_the_wire(busy_queue: Queue, client: redis.Redis) -> None:
    q, k = busy_queue, busy_queue.keys
    jid = busy_queue.browse(limit=1)[0]
    too_long = 2**31
    wire(client, raw(client, q, verbs.claim(k, too_long)), "EMQARG")
    wire(client, raw(client, q, verbs.promote(k, 100001)), "EMQARG")
    wire(client, raw(client, q, verbs.retry(k, jid, 1, "e", too_long, 2)), "EMQARG")
    wire(client, raw(client, q, verbs.reap(k, 100, too_long)), "EMQARG")
    wire(client, raw(client, q, verbs.reap(k, 100001, 2)), "EMQARG")
    wire(client, raw(client, q, verbs.complete(k, jid, 2**53 + 2)), "EMQARG")


@pytest.mark.parametrize("payload", [None, 5, {"a": 1}, ["x"], 1.5])
def test_non_bytes_payload(busy_queue: Queue, client: redis.Redis, payload: object) -> None:
    assert "payload" in refused(client, lambda: busy_queue.enqueue(mint(), payload),  # type: ignore[arg-type]
                                InvalidArgumentError, "EMQARG")


def test_oversized_payload_is_refused_never_truncated(client: redis.Redis) -> None:
    q = Queue(client, "capped", max_payload_bytes=1024)
    assert q.enqueue(mint(), b"x" * 1024) == "enqueued"
    message = refused(client, lambda: q.enqueue(mint(), b"x" * 1025), InvalidArgumentError, "EMQARG")
    assert "1025" in message and "1024" in message
    default = Queue(client, "default")
    refused(client, lambda: default.enqueue(mint(), b"x" * ((1 << 20) + 1)), InvalidArgumentError, "EMQARG")


def test_unreachable_server_is_a_clear_error_in_bounded_time() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # No retries: this checks that the refusal itself is prompt and clear, not
    # how long redis-py's default backoff waits before giving up.
    dead = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    started = time.monotonic()
    with pytest.raises(ServerUnavailableError) as info:
        Queue(dead, "jobs")
    assert f"127.0.0.1:{port}" in str(info.value)
    assert time.monotonic() - started < 5


def test_decode_responses_client_is_refused(server: object) -> None:
    with pytest.raises(InvalidArgumentError, match="decode_responses"):
        Queue(server.client(decode_responses=True), "jobs")  # type: ignore[attr-defined]
