"""The client's argument checks and the scripts' accept exactly the same
values: for every value a caller might pass, the client accepts it if and
only if the script accepts what is sent for it (the normalised int when the
client accepts, redis-py's own rendering when a raw caller sends it)."""

from __future__ import annotations

import enum
import secrets
from typing import Any

import numpy as np
import pytest
import redis

from echomq import InvalidArgumentError, Queue, WorkerSettings, mint
from echomq._instrument import verbs
from echomq.args import INT31, INT53, MAX_LIMIT, check_int


class Level(enum.IntEnum):
    SEVEN = 7


class Loud(int):
    """An int subclass whose text is not its number."""

    def __repr__(self) -> str:
        return f"Loud({int(self)})"

    __str__ = __repr__


VALUES: list[Any] = [
    0, 1, 7, -1, True, False, None, 1.0, 1.5, float("nan"), 7.0,
    "7", "007", " 7", "7 ", "+7", "1e3", "", "٣", "0x7", b"7", b"07", "0000000000000007", "00000000000000007",
    Level.SEVEN, Loud(7), np.int64(7), np.float64(7.0),
]

# verb, the argument's name, its range, and a call that puts `wire` in that argument's place.
ARGUMENTS = [
    ("claim", "lease_ms", 1, INT31),
    ("complete", "token", 1, INT53),
    ("retry", "delay_ms", 0, INT31),
    ("reap", "limit", 1, MAX_LIMIT),
    ("reap", "max_attempts", 1, INT31),
]


def _call(q: Queue, verb: str, arg: str, wire: Any) -> verbs.ScriptCall:
    jid = mint()
    if verb == "claim":
        return verbs.claim(q.keys, wire)
    if verb == "complete":
        return verbs.complete(q.keys, jid, wire)
    if verb == "retry":
        return verbs.retry(q.keys, jid, 1, b"e", wire, 3)
    return verbs.reap(q.keys, wire, 3) if arg == "limit" else verbs.reap(q.keys, 1, wire)


def _script_accepts(q: Queue, client: redis.Redis, verb: str, arg: str, wire: Any) -> bool:
    """Whether the script takes `wire` for `arg`: any reply but EMQARG naming it.
    A value redis-py will not send at all (a bool, None) is refused before the script."""
    try:
        client.get_encoder().encode(wire)
    except redis.exceptions.DataError:
        return False
    call = _call(q, verb, arg, wire)
    try:
        client.execute_command(*call.evalsha(q.scripts.sha(verb)))
    except redis.exceptions.ResponseError as exc:
        if str(exc).startswith(f"EMQARG {arg} "):
            return False
        assert str(exc).startswith("EMQSTALE"), exc  # complete and retry of a job that is not there
    return True


@pytest.mark.parametrize(("verb", "arg", "lo", "hi"), ARGUMENTS)
def test_the_client_accepts_exactly_what_the_script_accepts(client: redis.Redis, verb: str, arg: str,
                                                             lo: int, hi: int) -> None:
    q = Queue(client, f"args-{secrets.token_hex(3)}")
    for value in [*VALUES, lo - 1, lo, hi, hi + 1, str(hi), str(hi + 1)]:
        try:
            sent: Any = check_int(arg, value, lo, hi)
        except InvalidArgumentError:
            accepted, sent = False, value
        else:
            accepted = True
            assert type(sent) is int, f"{value!r} would be sent as {sent!r}"
        assert _script_accepts(q, client, verb, arg, sent) is accepted, f"{arg} = {value!r}"


def test_an_int_enum_is_sent_as_its_number_which_its_repr_would_not_be(client: redis.Redis) -> None:
    q = Queue(client, f"args-{secrets.token_hex(3)}")
    assert not _script_accepts(q, client, "reap", "limit", repr(Level.SEVEN))
    for _ in range(3):
        q.enqueue(mint(), b"x")
    assert q.reap(limit=Level.SEVEN) == 0 and q.promote(limit=Loud(7)) == 0
    job = q.claim(lease_ms=np.int64(60_000))  # type: ignore[arg-type]
    assert job is not None
    assert q.retry(job.id, Level.SEVEN if job.token == 7 else Loud(job.token), "e", delay_ms=Level.SEVEN) \
        == "scheduled"


def test_worker_settings_keep_the_int_they_will_send() -> None:
    settings = WorkerSettings(lease_ms=Level.SEVEN, batch=Loud(7), reap_limit=np.int64(7))  # type: ignore[arg-type]
    assert all(type(getattr(settings, f)) is int for f in ("lease_ms", "batch", "reap_limit"))
    with pytest.raises(InvalidArgumentError, match="lease_ms must be an integer"):
        WorkerSettings(lease_ms=7.0)  # type: ignore[arg-type]
