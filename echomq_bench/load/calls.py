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

No call is ever resent after it may have run: a complete that timed out may
have landed, and resending it would turn its success into EMQSTALE. The one
resend is of pipelined calls answered NOSCRIPT, which ran nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, Sequence

import redis

from echomq.errors import EchoMQError, InvalidArgumentError, OutOfMemoryError, from_reply
from echomq.queue import wire_errors
from echomq.scripts import Client, Scripts, evalsha
from echomq.verbs import ScriptCall

__all__ = ["Calls", "RedisCalls", "as_error", "is_error"]


class Calls(Protocol):
    def call(self, call: ScriptCall) -> Any: ...

    def pipeline(self, calls: Sequence[ScriptCall]) -> list[Any]: ...

    def command(self, *args: Any) -> Any: ...


def as_error(reply: Any) -> Any:
    """A pipelined reply with redis-py's error objects turned into the echomq tree."""
    if isinstance(reply, redis.exceptions.OutOfMemoryError):
        return OutOfMemoryError(f"OOM server is out of memory: {reply}")
    if isinstance(reply, redis.exceptions.ResponseError):
        return from_reply(str(reply)) or reply
    return reply


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
        replies = self._send(calls)
        # After a restart without persistence the scripts are gone; a NOSCRIPT
        # reply means that call ran nothing, so it alone is sent again.
        missing = [i for i, r in enumerate(replies) if isinstance(r, redis.exceptions.NoScriptError)]
        if missing:
            with wire_errors(self.client):
                self.scripts.load(self.client)
            for i, reply in zip(missing, self._send([calls[i] for i in missing])):
                replies[i] = reply
        return [as_error(r) for r in replies]

    def command(self, *args: Any) -> Any:
        with wire_errors(self.client):
            # redis-py leaves execute_command unannotated.
            return self.client.execute_command(*args)  # type: ignore[no-untyped-call]

    def _send(self, calls: Sequence[ScriptCall]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for c in calls:
            # Raw EVALSHA: a Script object on a pipeline would add a SCRIPT
            # EXISTS round trip to every execute.
            evalsha(pipe, self.scripts.sha(c.verb), c.keys, c.args)
        with wire_errors(self.client):
            return list(pipe.execute(raise_on_error=False))


def is_error(reply: Any) -> bool:
    return isinstance(reply, (EchoMQError, redis.exceptions.RedisError))
