"""Many verb calls of one queue in one round trip.

The calls are `echomq.verbs.ScriptCall`s, built by the same functions
`Queue` uses, so a pipeline spells no KEYS or ARGV of its own. They go out
as EVALSHA (a redis-py Script on a pipeline would add a SCRIPT EXISTS round
trip to every execute), and each reply comes back as the value the script
answered or the `EchoMQError` its error reply maps to, in order.

A call is never resent after it may have run: a complete resent after it
landed would turn its success into EMQSTALE. The one resend is of calls
answered NOSCRIPT (the scripts were flushed, or the server restarted
without them), which ran nothing.
"""

from __future__ import annotations

from typing import Any, Sequence

import redis

from .errors import EchoMQError, OutOfMemoryError, from_reply
from .queue import Job, Queue, wire_errors
from .scripts import Client, Scripts, evalsha
from .verbs import ScriptCall

__all__ = ["send", "send_calls", "as_error", "job_of"]


def as_error(reply: Any) -> Any:
    """A pipelined reply with redis-py's error objects turned into the echomq tree."""
    if isinstance(reply, redis.exceptions.OutOfMemoryError):
        return OutOfMemoryError(f"OOM server is out of memory: {reply}")
    if isinstance(reply, redis.exceptions.ResponseError):
        return from_reply(str(reply)) or reply
    return reply


def send(queue: Queue, calls: Sequence[ScriptCall]) -> list[Any]:
    """One round trip: per call its reply, or the exception its error reply
    maps to. A connection lost mid-pipeline raises ServerUnavailableError
    for the whole of it: any of the calls may or may not have run."""
    return send_calls(queue.client, queue.scripts, calls)


def send_calls(client: Client, scripts: Scripts, calls: Sequence[ScriptCall]) -> list[Any]:
    """`send` over a client and its loaded scripts, for callers that hold no Queue."""
    if not calls:
        return []
    replies = _send(client, scripts, calls)
    missing = [i for i, r in enumerate(replies) if isinstance(r, redis.exceptions.NoScriptError)]
    if missing:
        with wire_errors(client):
            scripts.load(client)
        for i, reply in zip(missing, _send(client, scripts, [calls[i] for i in missing])):
            replies[i] = reply
    return [as_error(r) for r in replies]


def _send(client: Client, scripts: Scripts, calls: Sequence[ScriptCall]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for call in calls:
        evalsha(pipe, scripts.sha(call.verb), call.keys, call.args)
    with wire_errors(client):
        return list(pipe.execute(raise_on_error=False))


def job_of(reply: Any) -> Job | None:
    """The Job a claim reply hands out; None when the queue was empty.
    An error reply is raised, not returned."""
    if isinstance(reply, (EchoMQError, redis.exceptions.RedisError)):
        raise reply
    if not reply:
        return None
    job_id, payload, token = reply
    text = job_id.decode("ascii") if isinstance(job_id, bytes) else str(job_id)
    return Job(text, payload if payload is not None else b"", int(token))
