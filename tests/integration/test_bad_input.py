"""Every refusal: a clear error naming the problem, and no key changed,
whether the call comes through Queue or as a raw EVALSHA; and a server that
is not there, named in a clear error."""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from functools import partial
from typing import Callable

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq import InvalidArgumentError, Queue, ServerUnavailableError, WrongKindError, mint
from echomq._instrument import QueueKeys, ScriptCall, verbs
from tests.helpers import server_ms, snapshot, wait_past

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


BAD_NUMBERS = [0, -1, 1.5, "1e3", " 10", True, None, 2**31]  # a digit string is a number: see test_args.py


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


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1.0", "0x1", True, None, 2**53 + 1])
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


def foreign_prefixes(k: QueueKeys) -> list[str]:
    """Row prefixes that are not the queue's own: another queue's, tags one
    byte shorter or longer, the own base with 'job:' misspelt or followed by
    more, and prefixes outside emq:* altogether."""
    tag = k.name
    return [QueueKeys("elsewhere").job_prefix, f"emq:{{{tag[:-1]}}}:job:", f"emq:{{{tag}x}}:job:",
            k.base + "job", k.base + "jobs:", k.base + "JOB:", k.job_prefix + "x", "x" + k.job_prefix,
            k.job_prefix + k.job_prefix, k.job_prefix.upper(), "other:job:", "job:", ""]


@pytest.fixture
def due_queue(queue: Queue, client: redis.Redis) -> Queue:
    """A queue where claim, promote and reap would each move a job right now:
    pending jobs, a retry due and a lease expired."""
    for _ in range(4):
        queue.enqueue(mint(), b"payload")
    job = queue.claim(lease_ms=60_000)
    assert job is not None and queue.retry(job.id, job.token, "e", delay_ms=0) == "scheduled"
    assert queue.claim(lease_ms=1) is not None
    wait_past(client, server_ms(client) + 1)
    k, now = queue.keys, server_ms(client)
    assert (client.zcard(k.pending), client.zcount(k.schedule, "-inf", now), client.zcount(k.active, "-inf", now)) \
        == (2, 1, 1)
    return queue


def test_foreign_job_prefix_on_the_wire_changes_nothing(due_queue: Queue, client: redis.Redis) -> None:
    q, k = due_queue, due_queue.keys
    calls = {"claim": (verbs.claim(k, 60_000), k.pending), "promote": (verbs.promote(k, 100), k.schedule),
             "reap": (verbs.reap(k, 100, 2), k.active)}
    for verb, (call, first_key) in calls.items():
        for prefix in foreign_prefixes(k):
            forged = replace(call, args=(prefix, *call.args[1:]))
            message = wire(client, raw(client, q, forged), "EMQARG")
            assert message == f"EMQARG job key prefix must be {k.job_prefix}, the rows of {first_key}", (verb, prefix)
        # The prefix is ARGV[1]: its refusal comes before a bad integer's.
        forged = replace(call, args=("other:job:", *("0" for _ in call.args[1:])))
        assert wire(client, raw(client, q, forged), "EMQARG").startswith("EMQARG job key prefix must be ")
        # KEYS[1] that is not this verb's set leaves the prefix no queue to belong to.
        odd = replace(call, keys=(k.job_prefix, *call.keys[1:]), args=(k.job_prefix, *call.args[1:]))
        assert wire(client, raw(client, q, odd), "EMQARG") == \
            f"EMQARG job key prefix has no queue to belong to: {k.job_prefix} does not end in {first_key[len(k.base):]}"
    # The queue's own prefix passes, and each verb moves the job it was refused.
    assert (q.promote(limit=100), q.reap(limit=100)) == (1, 1)
    assert q.claim(lease_ms=60_000) is not None and q.pending_size() == 3


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


def test_decode_responses_client_is_refused(server: object) -> None:
    with pytest.raises(InvalidArgumentError, match="decode_responses"):
        Queue(server.client(decode_responses=True), "jobs")  # type: ignore[attr-defined]


# Every integer argument of every verb, its slot and its message: intArg
# spells the message once, so each verb must answer in exactly these words.
ARG_MESSAGES = {
    "lease_ms": "EMQARG lease_ms must be an integer from 1 to 2147483647",
    "limit": "EMQARG limit must be an integer from 1 to 100000",
    "max_attempts": "EMQARG max_attempts must be an integer from 1 to 2147483647",
    "token": "EMQARG token must be an integer from 1 to 2^53",
    "delay_ms": "EMQARG delay_ms must be an integer from 0 to 2147483647",
}
OUT_OF_RANGE = {"lease_ms": ["0", "2147483648"], "limit": ["0", "100001"], "max_attempts": ["0", "2147483648"],
                "token": ["0", "9007199254740993", "99999999999999999"], "delay_ms": ["-1", "2147483648"]}


def wire_calls(q: Queue, jid: str) -> dict[tuple[str, str], Callable[[str], object]]:
    """(verb, argument) -> a raw EVALSHA with that argument replaced, every other one valid."""
    c, k, s = q.client, q.keys, q.scripts

    def send(call: verbs.ScriptCall) -> object:
        # verbs builds the call as data and checks nothing: the script must refuse.
        return c.execute_command(*call.evalsha(s.sha(call.verb)))

    def retry(tok: str = "1", delay: str = "0", mx: str = "2") -> object:
        return send(verbs.retry(k, jid, tok, "e", delay, mx))  # type: ignore[arg-type]

    def reap(limit: str = "100", mx: str = "2") -> object:
        return send(verbs.reap(k, limit, mx))  # type: ignore[arg-type]

    return {
        ("claim", "lease_ms"): lambda v: send(verbs.claim(k, v)),  # type: ignore[arg-type]
        ("promote", "limit"): lambda v: send(verbs.promote(k, v)),  # type: ignore[arg-type]
        ("reap", "limit"): lambda v: reap(limit=v),
        ("reap", "max_attempts"): lambda v: reap(mx=v),
        ("complete", "token"): lambda v: send(verbs.complete(k, jid, v)),  # type: ignore[arg-type]
        ("retry", "token"): lambda v: retry(tok=v),
        ("retry", "delay_ms"): lambda v: retry(delay=v),
        ("retry", "max_attempts"): lambda v: retry(mx=v),
    }


def test_every_emqarg_message_on_the_wire(busy_queue: Queue, client: redis.Redis) -> None:
    jid = busy_queue.browse(limit=1)[0]
    calls = wire_calls(busy_queue, jid)
    assert {arg for _verb, arg in calls} == set(ARG_MESSAGES)
    for (verb, arg), call in calls.items():
        for bad in OUT_OF_RANGE[arg] + ["x", "1.5", ""]:
            message = wire(client, partial(call, bad), "EMQARG")
            assert message == ARG_MESSAGES[arg], (verb, arg, bad, message)


def test_range_bounds_themselves_are_accepted(busy_queue: Queue, client: redis.Redis) -> None:
    """The edges of each range pass the script's check (what happens next is
    the verb's business: here a fence or an empty set, never EMQARG)."""
    jid = busy_queue.browse(limit=1)[0]
    calls = wire_calls(busy_queue, jid)
    edges = {"lease_ms": ["1", "2147483647"], "limit": ["1", "100000"], "max_attempts": ["1", "2147483647"],
             "token": ["1", "9007199254740992"], "delay_ms": ["0", "2147483647"]}
    for (verb, arg), call in calls.items():
        for good in edges[arg]:
            try:
                call(good)
            except redis.exceptions.ResponseError as exc:
                assert not str(exc).startswith("EMQARG"), (verb, arg, good, exc)


def stale_cases(q: Queue) -> list[tuple[str, int]]:
    """(id, token) pairs that do not hold a lease: the row is active under
    another token, the job was given back by retry, the job never existed."""
    claimed = q.claim(lease_ms=60_000)
    assert claimed is not None
    given_back = q.claim(lease_ms=60_000)
    assert given_back is not None
    assert q.retry(given_back.id, given_back.token, "e", delay_ms=60_000) == "scheduled"
    return [(claimed.id, claimed.token + 1), (claimed.id, claimed.token - 1 or 2),
            (given_back.id, given_back.token), (mint(), 1)]


def test_stale_fence_on_complete_and_retry_changes_nothing(queue: Queue, client: redis.Redis) -> None:
    from echomq import StaleTokenError

    for _ in range(3):
        queue.enqueue(mint(), b"p")
    k, s = queue.keys, queue.scripts
    for jid, token in stale_cases(queue):
        for call in (partial(queue.complete, jid, token), partial(queue.retry, jid, token, "e", delay_ms=0)):
            message = refused(client, call, StaleTokenError, "EMQSTALE")
            assert f"token {token} " in message and jid in message
        wire(client, partial(client.evalsha, s.sha("complete"), 2, k.active, k.job(jid), jid, token), "EMQSTALE")
        wire(client, partial(client.evalsha, s.sha("retry"), 4, k.active, k.schedule, k.dead, k.job(jid),
                             jid, token, "e", 0, 2), "EMQSTALE")


# -- a server that is not there: a clear error naming where, in bounded time -----------------


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
