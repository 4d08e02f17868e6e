"""The calls protocol the load engine's roles are written against, and its
redis-py implementation.

A role never touches a client: it builds `echomq.verbs.ScriptCall`s and hands
them to a `Calls`:

    call(c)            one script call; the reply, or an exception from the
                       echomq.errors tree (ServerUnavailableError when no
                       reply came: the call may or may not have run)
    pipeline([c, ...]) one round trip; a list with, per call, its reply or
                       the exception its error reply maps to, in order. A
                       connection lost mid-pipeline raises
                       ServerUnavailableError for the whole of it.
    command(*args)     a plain command (ZCARD for a backlog check)

`RedisCalls` implements it over a redis-py client (a RedisCluster included).
Locust's measured wire implements the same three methods
(`echomq_bench.locust.calls`); the capacity driver runs the engine's
pipelined transport instead (`echomq_bench.load.pipelined`).

This module never resends a call after it may have run: a claim resent
after a lost reply would lease a second job, and a complete that timed out
may have landed, so resending it would turn its success into EMQSTALE. A
call and a pipeline both go out once whatever the client's retry settings,
through the client's own senders (`echomq.pipeline`); a reply lost after
the call went out is `RepliesLostError`, a ServerUnavailableError. The one
resend is the client's, of calls answered NOSCRIPT, which ran nothing
(`echomq._instrument.send_reloading`): after a restart without persistence, or a
SCRIPT FLUSH, the scripts are loaded again and those calls sent once more.
On a RedisCluster a pipeline goes through redis-py's ClusterPipeline, which
follows redirects and resends as its cluster retries say.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, Sequence

import redis

from echomq import EchoMQError, InvalidArgumentError
from echomq._instrument import Client, ScriptCall, Scripts, pipeline, wire_errors

__all__ = ["Calls", "RedisCalls", "is_error"]


class Calls(Protocol):
    def call(self, call: ScriptCall) -> Any: ...

    def pipeline(self, calls: Sequence[ScriptCall]) -> list[Any]: ...

    def command(self, *args: Any) -> Any: ...


class RedisCalls:
    """Calls over one redis-py client. The scripts load when this is made, so
    no timed call pays for a NOSCRIPT round trip."""

    def __init__(self, client: Client, lua_dir: Path | str | None = None) -> None:
        if client.get_encoder().decode_responses:
            raise InvalidArgumentError("RedisCalls needs a client with decode_responses=False: payloads are bytes")
        self.client = client
        with wire_errors(client):
            self.scripts = Scripts(client, lua_dir)

    def call(self, call: ScriptCall) -> Any:
        return pipeline.send_one(self.client, self.scripts, call)

    def pipeline(self, calls: Sequence[ScriptCall]) -> list[Any]:
        return pipeline.send_calls(self.client, self.scripts, calls)

    def command(self, *args: Any) -> Any:
        with wire_errors(self.client):
            # redis-py leaves execute_command unannotated.
            return self.client.execute_command(*args)  # type: ignore[no-untyped-call]


def is_error(reply: Any) -> bool:
    return isinstance(reply, (EchoMQError, redis.exceptions.RedisError))
