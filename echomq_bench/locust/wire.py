"""Script calls on one held connection, with nothing between Locust and the socket.

A load greenlet owns one redis-py `Connection` for its whole life, made
from the URL's settings. redis-py makes it (the handshake: AUTH, SELECT,
HELLO); from then on the wire drives the socket itself: one hiredis pack
and one `send` per call, a wait on the hub, one `recv_into` fed to a hiredis
reader. No call pays for a pool checkout, redis-py's per-command health
check, retry and timeout juggling, or gevent's `sendall` (which asks the
kernel for the buffer size on every call). A verb's command is laid out by
`echomq.verbs` (the constant ones once per queue, in `QueueWire`); the load
engine's calls go over it through `echomq_bench.locust.calls`.

EVALSHA is tried first; a NOSCRIPT reply (a restarted or flushed server)
loads the scripts and sends the calls it answered once more, through the
client's one reload (`send_reloading`).
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import hiredis
import redis
from gevent import GreenletExit, get_hub, monkey
from gevent.socket import wait as wait_readable
from hiredis import pack_command
from redis._parsers.base import BaseParser
from redis.connection import AbstractConnection

from echomq import ServerUnavailableError
from echomq._instrument import QueueKeys, Scripts, pipeline, send_reloading, verbs
from echomq.errors import RepliesLostError

__all__ = ["Wire", "AnyWire", "Command", "QueueWire", "ConnectionFactory"]

# One command as sent: hiredis packs only a tuple.
Command = tuple[Any, ...]

# What a dropped or stalled connection raises under the wire (a socket timeout is an OSError).
_LINK_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


class _Connection(Protocol):
    """What a wire drives on a redis-py connection, typed (redis-py leaves
    these methods unannotated). `_sock` is None until it connects: a
    connect that fails sent nothing."""

    _sock: Any

    def connect(self) -> None: ...

    def disconnect(self) -> None: ...


class _Connects(Protocol):
    def connect(self) -> AbstractConnection: ...


class AnyWire(Protocol):
    """What `Wire` and `ClusterWire` both offer the Locust glue."""

    scripts: Scripts

    def call(self, cmd: Command) -> Any: ...

    def pipeline(self, cmds: Sequence[Command]) -> list[Any]: ...

    def command(self, *args: Any) -> Any: ...

    def load_scripts(self) -> None: ...

    def reconnect(self) -> None: ...

    def close(self) -> None: ...


class QueueWire:
    """One queue as the Locust glue needs it beside the engine: its keys, its
    lease, where crash notes go, and a zombie's complete."""

    def __init__(self, name: str, scripts: Scripts, lease_ms: int) -> None:
        self.name = name
        self.keys = QueueKeys(name)
        self.lease_s = lease_ms / 1000.0
        self._complete_sha = scripts.sha("complete")

    def crash_key(self, job_id: str) -> str:
        """Where a crashed consumer leaves its note for the re-claimer; in the
        queue's hash slot, outside the contract's keys (the audit ignores it)."""
        return f"{self.keys.base}locust:crash:{job_id}"

    def complete(self, job_id: str, token: int) -> tuple[Any, ...]:
        return verbs.complete(self.keys, job_id, token).evalsha(self._complete_sha)


class ConnectionFactory:
    """Connections from a URL, outside any pool: each is held by one
    greenlet for its life, so a pool's checkout (and its cap of 100 in
    redis-py 8) would only be in the way."""

    def __init__(self, url: str) -> None:
        parsed = redis.ConnectionPool.from_url(url, socket_connect_timeout=5)
        self.url = url
        self.connection_class: type[AbstractConnection] = parsed.connection_class
        self.kwargs = dict(parsed.connection_kwargs)
        self.made = 0

    def connect(self) -> AbstractConnection:
        self.made += 1
        return self.connection_class(**self.kwargs)

    def wire(self, scripts: Scripts) -> "Wire":
        return Wire(self, scripts)

    def scripts(self) -> Scripts:
        """The verbs' scripts, loaded on the server."""
        client = redis.Redis.from_url(self.url, socket_connect_timeout=5)
        try:
            return Scripts(client)
        finally:
            client.close()


class Wire:
    """One held connection. `call` returns the reply or raises an EchoMQError
    (wire codes mapped through echomq.errors); `pipeline` returns one reply
    or exception per command. A connection that fails after a write began
    raises RepliesLostError (a ServerUnavailableError): those calls may have
    run; one that cannot be made raises ServerUnavailableError, nothing sent.
    A command answered NOSCRIPT is sent again after the scripts are loaded
    on this connection: the client's reload (`echomq.send_reloading`)."""

    def __init__(self, factory: _Connects, scripts: Scripts) -> None:
        self.scripts = scripts
        self._loads = [("SCRIPT", "LOAD", source.text) for source in scripts.sources.values()]
        self.conn: _Connection = factory.connect()
        self._reader: hiredis.Reader | None = None  # this connection's replies, from its first call on
        self._buffer = bytearray(65536)
        self._readable: Any = None  # the hub's watch on the socket, under gevent

    def call(self, cmd: Command) -> Any:
        reply = self._send((cmd,))[0]
        if isinstance(reply, redis.exceptions.NoScriptError):  # rare: the reload, through the client's one copy
            reply = send_reloading(self._send, self.load_scripts, (cmd,))[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def pipeline(self, cmds: Sequence[Command]) -> list[Any]:
        """Send all, read all; a command's error reply is its result, mapped."""
        return send_reloading(self._send, self.load_scripts, cmds)

    def command(self, *args: Any) -> Any:
        """A plain command (bookkeeping, not a verb)."""
        return self.call(args)

    def load_scripts(self) -> None:
        failed = next((r for r in self._send(self._loads) if isinstance(r, Exception)), None)
        if failed is not None:
            raise failed

    def reconnect(self) -> None:
        """What a crashed worker's replacement does: a new connection."""
        self._drop()

    def close(self) -> None:
        self._drop()

    def _drop(self) -> None:
        self.conn.disconnect()
        self._reader = None  # what it held belonged to the dropped connection
        if self._readable is not None:
            self._readable.close()
            self._readable = None

    def _send(self, cmds: Sequence[Command]) -> list[Any]:
        """One write, one read per command: its reply, or its error reply in
        its place (NOSCRIPT as redis-py's, for the reload; the rest mapped)."""
        reader = self._reader
        if reader is None:
            reader = self._connected()
        sock = self.conn._sock
        out: list[Any] = []
        try:
            data = memoryview(b"".join(map(pack_command, cmds)))
            while data:
                data = data[sock.send(data):]
            buffer, readable = self._buffer, self._readable
            for _ in cmds:
                reply = reader.gets()
                while reply is False:
                    if readable is not None:
                        wait_readable(readable, sock.timeout)
                    read = sock.recv_into(buffer)
                    if not read:
                        raise redis.exceptions.ConnectionError("connection closed by server")
                    reader.feed(buffer, 0, read)  # type: ignore[arg-type]  # hiredis reads any buffer; its stub says bytes
                    reply = reader.gets()
                if isinstance(reply, redis.exceptions.RedisError):
                    if not isinstance(reply, redis.exceptions.ResponseError):
                        raise reply  # NOAUTH and the like: redis-py's ConnectionError family
                    reply = _mapped(reply)
                out.append(reply)
        except _LINK_ERRORS as exc:
            self._drop()
            lost = len(cmds) - len(out)
            raise RepliesLostError(f"server unavailable: {exc}", out + [None] * lost,
                                   tuple(range(len(out), len(cmds)))) from exc
        except GreenletExit:
            # Killed between send and reply: the reply would be read by the
            # next command. Drop the connection; the next call reconnects.
            self._drop()
            raise
        return out

    def _connected(self) -> hiredis.Reader:
        """Connect when the connection is down; a connect that fails sent nothing."""
        conn = self.conn
        try:
            if conn._sock is None:
                conn.connect()
        except _LINK_ERRORS as exc:
            conn.disconnect()
            raise ServerUnavailableError(f"server unavailable: {exc}") from exc
        self._reader = hiredis.Reader(protocolError=redis.exceptions.InvalidResponse,
                                      replyError=BaseParser.parse_error)
        if monkey.is_module_patched("socket"):
            # A reply is never there the moment its call went out. gevent's recv_into would try
            # first, fail with EWOULDBLOCK (a syscall and an exception) and only then wait for the
            # hub: a watch of our own waits first, and each recv reads.
            self._readable = get_hub().loop.io(conn._sock.fileno(), 1)
        return self._reader


# A cluster's redirections are routing for this module to follow, not answers.
_ROUTING = (redis.exceptions.MovedError, redis.exceptions.AskError, redis.exceptions.TryAgainError,
            redis.exceptions.ClusterDownError)


def _mapped(exc: redis.exceptions.ResponseError) -> Exception:
    if isinstance(exc, (redis.exceptions.NoScriptError, *_ROUTING)):
        return exc
    mapped: Exception = pipeline.as_error(exc)
    return mapped
