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
loaded again and those calls sent once more (`echomq.scripts.send_reloading`,
the client's one reload). Whatever befalls the resend,
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

from functools import partial
from typing import Any, Sequence

import redis

from .errors import EchoMQError, OutOfMemoryError, RepliesLostError, ServerUnavailableError
from .outcome import send_all_once, send_once
from .queue import Job, Queue, job_of_reply
from .wire import REPLIES, reply_error, wire_errors
from .scripts import Client, Command, Scripts, send_reloading
from .verbs import ScriptCall

__all__ = ["send", "send_calls", "send_one", "as_error", "job_of"]


def as_error(reply: Any) -> Any:
    """A pipelined reply with redis-py's error objects turned into the echomq tree."""
    if isinstance(reply, redis.exceptions.OutOfMemoryError):
        return OutOfMemoryError(f"OOM server is out of memory: {reply}")
    if isinstance(reply, REPLIES):  # LOADING among them: a refusal, though redis-py makes it a ConnectionError
        return reply_error(reply)
    if isinstance(reply, redis.exceptions.RedisError):
        # A cluster pipeline's own failure in a call's place: its connection, or
        # its redirects and TRYAGAIN waits run out (ClusterError). No reply came.
        return ServerUnavailableError(f"cluster unavailable for this call: {type(reply).__name__}: {reply}")
    return reply


def send(queue: Queue, calls: Sequence[ScriptCall], *, deadline: float | None = None) -> list[Any]:
    """One round trip: per call its reply, or the exception its error reply
    maps to. No connection: ServerUnavailableError, nothing ran. A
    connection lost after the calls went out: RepliesLostError (a
    ServerUnavailableError) with the replies read before; the calls whose
    replies were lost may or may not have run. A call answered NOSCRIPT whose
    resend could not go out holds the error that stopped it: it ran nothing.
    With a `deadline` (a time.monotonic() instant), a reply not read by then
    is lost as after a timeout (on a redis.Redis; a cluster pipeline keeps
    its own timeouts)."""
    return send_calls(queue.client, queue.scripts, calls, deadline=deadline)


def send_calls(client: Client, scripts: Scripts, calls: Sequence[ScriptCall], *,
               deadline: float | None = None) -> list[Any]:
    """`send` over a client and its loaded scripts, for callers that hold no Queue."""
    if not calls:
        return []
    commands = [call.evalsha(scripts.sha(call.verb)) for call in calls]

    def load() -> None:
        with wire_errors(client):
            scripts.load(client)

    cluster = isinstance(client, redis.RedisCluster)
    try:
        replies = send_reloading(partial(_send, client, deadline=deadline), load, commands,
                                 resend=partial(_resent_on_cluster, client) if cluster else None)
    except RepliesLostError as exc:
        raise RepliesLostError(str(exc), [as_error(r) for r in exc.replies], exc.lost) from exc.__cause__
    return [as_error(r) for r in replies]


def send_one(client: Client, scripts: Scripts, call: ScriptCall) -> Any:
    """One call, sent once whatever the client's retry settings
    (`echomq.outcome.send_once`): its reply; an error reply raised in the
    echomq tree; a reply lost after the call went out, RepliesLostError."""
    with wire_errors(client):
        return send_once(client, scripts.sha(call.verb), call, lambda: scripts.load(client))


def _send(client: Client, commands: Sequence[Command], deadline: float | None = None) -> list[Any]:
    if isinstance(client, redis.RedisCluster):
        pipe = client.pipeline(transaction=False)  # type: ignore[no-untyped-call]
        for command in commands:
            pipe.execute_command(*command)
        with wire_errors(client):
            return list(pipe.execute(raise_on_error=False))
    with wire_errors(client):
        return send_all_once(client, commands, deadline=deadline)


def _resent_on_cluster(client: Client, commands: Sequence[Command]) -> list[Any]:
    """The resend of calls answered NOSCRIPT on a cluster: ClusterPipeline may
    have written them (and resent them) before it failed, so a failure
    reports them lost."""
    try:
        return _send(client, commands)
    except EchoMQError as exc:
        raise RepliesLostError(f"{exc}; resending {len(commands)} pipelined calls answered NOSCRIPT failed, "
                               "those calls may have run", [None] * len(commands),
                               tuple(range(len(commands)))) from exc


def job_of(reply: Any) -> Job | None:
    """The Job a claim reply hands out; None when the queue was empty.
    An error reply is raised, not returned."""
    if isinstance(reply, (EchoMQError, redis.exceptions.RedisError)):
        raise reply
    return job_of_reply(reply)
