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

This module never resends a call after it may have run: a complete that
timed out may have landed, and resending it would turn its success into
EMQSTALE. The one resend is of pipelined calls answered NOSCRIPT, which ran
nothing. A pipeline goes out once whatever the client's retry settings
(`echomq.pipeline`); a single `call` goes through a redis-py Script, so the
client's own Retry can still send it again after a connection error. A load
that must never resend one (the fault load) builds its clients with no
retries (`echomq_bench.faults.load`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, Sequence

import redis

from echomq.errors import EchoMQError, InvalidArgumentError
from echomq.pipeline import as_error, send_calls
from echomq.wire import wire_errors
from echomq.scripts import Client, Scripts
from echomq.verbs import ScriptCall

__all__ = ["Calls", "RedisCalls", "as_error", "is_error"]


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
        with wire_errors(self.client):
            return self.scripts[call.verb](keys=call.keys, args=call.args, client=self.client)

    def pipeline(self, calls: Sequence[ScriptCall]) -> list[Any]:
        # The client's own pipelined sender: after a restart without persistence
        # the scripts are gone, and a call answered NOSCRIPT, which ran nothing,
        # is sent again once they are loaded.
        return send_calls(self.client, self.scripts, calls)

    def command(self, *args: Any) -> Any:
        with wire_errors(self.client):
            # redis-py leaves execute_command unannotated.
            return self.client.execute_command(*args)  # type: ignore[no-untyped-call]


def is_error(reply: Any) -> bool:
    return isinstance(reply, (EchoMQError, redis.exceptions.RedisError))
