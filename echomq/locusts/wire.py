"""Script calls on one held connection, with nothing between Locust and the socket.

A load greenlet owns one redis-py `Connection` for its whole life (one
connection per greenlet, made from the URL's settings), so no call pays for a pool checkout, its
liveness poll or redis-py's per-command retry and telemetry wrappers: on
this machine that path is about three times faster per greenlet than
`Redis.evalsha` through a shared pool under gevent. Every command a verb
sends is laid out once per queue (`QueueWire`), so a call is one hiredis
pack, one send and one reply parsed by hiredis.

EVALSHA is tried first; a NOSCRIPT reply (a restarted or flushed server)
loads the script and sends once more, as redis-py's `Script` does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

import redis
from gevent import GreenletExit

try:  # redis[hiredis] brings it; without it redis-py packs in Python
    from hiredis import pack_command
except ImportError:  # pragma: no cover
    pack_command = None

from ..errors import ServerUnavailableError, from_reply
from ..keys import QueueKeys
from ..scripts import ScriptSource, discover

__all__ = ["Wire", "QueueWire", "ScriptSet", "ConnectionFactory"]


@dataclass(frozen=True)
class ScriptSet:
    """The verbs' sources and SHA1s (the server's own script ids)."""

    sources: dict[str, ScriptSource]
    shas: dict[str, str]

    @classmethod
    def load(cls) -> "ScriptSet":
        sources = discover()
        return cls(sources, {v: hashlib.sha1(s.text.encode()).hexdigest() for v, s in sources.items()})

    def sha_to_text(self) -> dict[str, str]:
        return {self.shas[v]: s.text for v, s in self.sources.items()}


class QueueWire:
    """The commands of one queue's verbs, laid out once."""

    def __init__(self, name: str, scripts: ScriptSet, lease_ms: int, max_attempts: int,
                 reap_limit: int, promote_limit: int) -> None:
        k = QueueKeys(name)
        sha = scripts.shas
        self.name = name
        self.keys = k
        self.lease_s = lease_ms / 1000.0
        self.job_prefix = k.job_prefix
        self.enqueue_head = ("EVALSHA", sha["enqueue"], 2, k.pending)
        self.claim_cmd = ("EVALSHA", sha["claim"], 2, k.pending, k.active, k.job_prefix, lease_ms)
        self.complete_head = ("EVALSHA", sha["complete"], 2, k.active)
        self.retry_head = ("EVALSHA", sha["retry"], 4, k.active, k.schedule, k.dead)
        self.max_attempts = max_attempts
        self.reap_cmd = ("EVALSHA", sha["reap"], 3, k.active, k.pending, k.dead, k.job_prefix, reap_limit,
                         max_attempts)
        self.promote_cmd = ("EVALSHA", sha["promote"], 2, k.schedule, k.pending, k.job_prefix, promote_limit)
        self.size_cmd = ("ZCARD", k.pending)

    def crash_key(self, job_id: str) -> str:
        """Where a crashed consumer leaves its note for the re-claimer; in the
        queue's hash slot, outside the contract's keys (the audit ignores it)."""
        return f"{self.keys.base}locust:crash:{job_id}"

    def enqueue(self, job_id: str, payload: bytes) -> tuple[Any, ...]:
        return (*self.enqueue_head, self.job_prefix + job_id, job_id, payload)

    def complete(self, job_id: str, token: int) -> tuple[Any, ...]:
        return (*self.complete_head, self.job_prefix + job_id, job_id, token)

    def retry(self, job_id: str, token: int, error: str, delay_ms: int) -> tuple[Any, ...]:
        return (*self.retry_head, self.job_prefix + job_id, job_id, token, error, delay_ms, self.max_attempts)


class ConnectionFactory:
    """Connections from a URL, outside any pool: each is held by one
    greenlet for its life, so a pool's checkout (and its cap of 100 in
    redis-py 8) would only be in the way."""

    def __init__(self, url: str) -> None:
        parsed = redis.ConnectionPool.from_url(url, socket_connect_timeout=5)
        self.connection_class = parsed.connection_class
        self.kwargs = dict(parsed.connection_kwargs)
        self.made = 0

    def connect(self) -> redis.connection.AbstractConnection:
        self.made += 1
        return self.connection_class(**self.kwargs)


class Wire:
    """One held connection. `call` returns the reply or raises an EchoMQError
    (wire codes mapped through echomq.errors); `pipeline` returns one reply
    or exception per command."""

    def __init__(self, factory: "ConnectionFactory", scripts: ScriptSet) -> None:
        self.scripts = scripts
        self._texts = scripts.sha_to_text()
        self.conn = factory.connect()

    def call(self, cmd: Sequence[Any]) -> Any:
        conn = self.conn
        try:
            if pack_command is not None:
                conn.send_packed_command((pack_command(cmd),), check_health=False)
            else:
                conn.send_command(*cmd)
            return conn.read_response()
        except redis.exceptions.NoScriptError:
            return self._reload_and_call(cmd)
        except redis.exceptions.ResponseError as exc:
            raise _mapped(exc) from None
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            conn.disconnect()
            raise ServerUnavailableError(f"server unavailable: {exc}") from exc
        except GreenletExit:
            # Killed between send and reply: the reply would be read by the
            # next command. Drop the connection; the next call reconnects.
            conn.disconnect()
            raise

    def pipeline(self, cmds: Sequence[Sequence[Any]]) -> list[Any]:
        """Send all, read all; a command's error reply is its result, mapped."""
        conn = self.conn
        try:
            if pack_command is not None:
                conn.send_packed_command((b"".join(map(pack_command, cmds)),), check_health=False)
            else:
                conn.send_packed_command(conn.pack_commands(cmds))
            out: list[Any] = []
            for _ in cmds:
                try:
                    out.append(conn.read_response())
                except redis.exceptions.ResponseError as exc:
                    out.append(exc if isinstance(exc, redis.exceptions.NoScriptError) else _mapped(exc))
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            conn.disconnect()
            raise ServerUnavailableError(f"server unavailable: {exc}") from exc
        except GreenletExit:
            conn.disconnect()
            raise
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in out):
            self.load_scripts()
            redo = [i for i, r in enumerate(out) if isinstance(r, redis.exceptions.NoScriptError)]
            for i, reply in zip(redo, self.pipeline([cmds[i] for i in redo])):
                out[i] = reply
        return out

    def command(self, *args: Any) -> Any:
        """A plain command (bookkeeping, not a verb)."""
        return self.call(args)

    def load_scripts(self) -> None:
        for text in self._texts.values():
            self.conn.send_command("SCRIPT", "LOAD", text)
            self.conn.read_response()

    def reconnect(self) -> None:
        """What a crashed worker's replacement does: a new connection."""
        self.conn.disconnect()

    def close(self) -> None:
        self.conn.disconnect()

    def _reload_and_call(self, cmd: Sequence[Any]) -> Any:
        self.load_scripts()
        try:
            self.conn.send_command(*cmd)
            return self.conn.read_response()
        except redis.exceptions.ResponseError as exc:
            raise _mapped(exc) from None


def _mapped(exc: redis.exceptions.ResponseError) -> Exception:
    mapped = from_reply(str(exc))
    return mapped if mapped is not None else exc

