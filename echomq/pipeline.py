"""Many verb calls of one queue in one round trip.

The calls are `echomq.verbs.ScriptCall`s, built by the same functions
`Queue` uses, so a pipeline spells no KEYS or ARGV of its own. They go out
as EVALSHA (a redis-py Script on a pipeline would add a SCRIPT EXISTS round
trip to every execute), and each reply comes back as the value the script
answered or the `EchoMQError` its error reply maps to, in order.

A call is never resent after it may have run: a complete resent after it
landed would turn its success into EMQSTALE. On a redis.Redis the calls go
out in one write on a connection of the client's own pool and each reply
is read once (`echomq.outcome.send_all_once`), outside the Retry that
redis-py's `Pipeline.execute` runs in: that Retry resends the whole
pipeline after a ConnectionError or TimeoutError, though the server may
have run it. When the connection fails after the write began, the replies
read before come back inside `RepliesLostError` and the rest are marked
lost.

The one resend is of calls answered NOSCRIPT (the scripts were flushed, or
the server restarted without them), which ran nothing: the scripts are
loaded again and those calls sent once more. Whatever befalls the resend,
the replies of the first send stand: a complete that landed beside a
NOSCRIPT claim is still "ok". A call is reported never sent only when it
surely was not: when the reload fails, or no connection can be had for
the resend, nothing of it went out, so each of its calls holds that error
(a ServerUnavailableError when the server is out of reach) and the others
their replies, returned as usual. When the resend's connection fails after
its write began, its calls may have run: RepliesLostError, with every
reply read in either send and the resent calls not heard from as lost.

On a RedisCluster the calls go through redis-py's ClusterPipeline, as the
load engine's calls may span queues on several nodes: it follows MOVED and
ASK and reads the slot map again after a failure, and it resends a
pipeline whose connection failed, as its cluster retries say. The
once-only rule above is for redis.Redis. A resend that fails there cannot
tell whether it was written, so its calls are reported lost.
"""

from __future__ import annotations

from typing import Any, Sequence

import redis

from .errors import EchoMQError, OutOfMemoryError, RepliesLostError, ServerUnavailableError
from .outcome import ReplyLost, send_all_once
from .queue import Job, Queue, job_of_reply
from .wire import describe, reply_error, wire_errors
from .scripts import Client, Scripts, evalsha
from .verbs import ScriptCall

__all__ = ["send", "send_calls", "as_error", "job_of"]


def as_error(reply: Any) -> Any:
    """A pipelined reply with redis-py's error objects turned into the echomq tree."""
    if isinstance(reply, redis.exceptions.OutOfMemoryError):
        return OutOfMemoryError(f"OOM server is out of memory: {reply}")
    if isinstance(reply, redis.exceptions.ResponseError):
        return reply_error(reply)
    if isinstance(reply, redis.exceptions.RedisError):
        # A cluster pipeline's own failure in a call's place: its connection, or
        # its redirects and TRYAGAIN waits run out (ClusterError). No reply came.
        return ServerUnavailableError(f"cluster unavailable for this call: {type(reply).__name__}: {reply}")
    return reply


def send(queue: Queue, calls: Sequence[ScriptCall]) -> list[Any]:
    """One round trip: per call its reply, or the exception its error reply
    maps to. No connection: ServerUnavailableError, nothing ran. A
    connection lost after the calls went out: RepliesLostError (a
    ServerUnavailableError) with the replies read before; the calls whose
    replies were lost may or may not have run. A call answered NOSCRIPT whose
    resend could not go out holds the error that stopped it: it ran nothing."""
    return send_calls(queue.client, queue.scripts, calls)


def send_calls(client: Client, scripts: Scripts, calls: Sequence[ScriptCall]) -> list[Any]:
    """`send` over a client and its loaded scripts, for callers that hold no Queue."""
    if not calls:
        return []
    replies = _send(client, scripts, calls)
    missing = [i for i, r in enumerate(replies) if isinstance(r, redis.exceptions.NoScriptError)]
    if missing:
        _resend(client, scripts, calls, replies, missing)
    return [as_error(r) for r in replies]


def _resend(client: Client, scripts: Scripts, calls: Sequence[ScriptCall], replies: list[Any],
            missing: list[int]) -> None:
    """The calls at `missing` (answered NOSCRIPT: they ran nothing) sent again
    after a reload, their replies put in place in `replies`. The first send's
    replies are kept whatever fails here, as they say what already ran."""
    try:
        with wire_errors(client):
            scripts.load(client)
    except EchoMQError as exc:  # out of reach, or a load refused: the resend never went out
        for i in missing:
            replies[i] = exc
        return
    try:
        again = _send(client, scripts, [calls[i] for i in missing])
    except RepliesLostError as exc:  # written, then the connection failed: place the resend's
        for i, reply in zip(missing, exc.replies):
            replies[i] = reply
        raise RepliesLostError(str(exc), [as_error(r) for r in replies],
                               tuple(missing[i] for i in exc.lost)) from exc.__cause__
    except EchoMQError as exc:
        if isinstance(client, redis.RedisCluster):
            # ClusterPipeline may have written the calls (and resent them) before it failed.
            for i in missing:
                replies[i] = None
            raise RepliesLostError(
                f"{exc}; resending {len(missing)} pipelined calls answered NOSCRIPT failed, "
                "those calls may have run", [as_error(r) for r in replies], tuple(missing)) from exc
        # send_all_once raises anything but ReplyLost only before its write (no connection).
        for i in missing:
            replies[i] = exc
        return
    for i, reply in zip(missing, again):
        replies[i] = reply


def _send(client: Client, scripts: Scripts, calls: Sequence[ScriptCall]) -> list[Any]:
    if isinstance(client, redis.RedisCluster):
        pipe = client.pipeline(transaction=False)  # type: ignore[no-untyped-call]
        for call in calls:
            evalsha(pipe, scripts.sha(call.verb), call.keys, call.args)
        with wire_errors(client):
            return list(pipe.execute(raise_on_error=False))
    commands = [call.evalsha(scripts.sha(call.verb)) for call in calls]
    with wire_errors(client):
        try:
            return send_all_once(client, commands)
        except ReplyLost as lost:
            heard = len(lost.replies)
            raise RepliesLostError(
                f"server {describe(client)} unavailable: the connection failed after {len(calls)} pipelined "
                f"calls went out ({lost}); {len(calls) - heard} replies lost, those calls may have run",
                [as_error(r) for r in lost.replies] + [None] * (len(calls) - heard),
                tuple(range(heard, len(calls)))) from lost.__cause__


def job_of(reply: Any) -> Job | None:
    """The Job a claim reply hands out; None when the queue was empty.
    An error reply is raised, not returned."""
    if isinstance(reply, (EchoMQError, redis.exceptions.RedisError)):
        raise reply
    return job_of_reply(reply)
