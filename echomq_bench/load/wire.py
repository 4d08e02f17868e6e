"""The driver's wire: where to connect, a raw socket logged in, RESP by hand.

redis-py spends tens of microseconds per command in Python; a load
generator that wants to measure the server writes RESP itself and parses
replies with hiredis (C).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import hiredis

__all__ = ["Target", "connect", "resp", "read_replies"]


@dataclass(frozen=True, repr=False)
class Target:
    """Where to connect. The password travels to worker processes in memory only."""

    host: str
    port: int
    username: str | None = None
    password: str | None = None
    db: int = 0

    def __repr__(self) -> str:
        return f"Target({self.host}:{self.port}/{self.db})"


def resp(*args: bytes) -> bytes:
    """One command in RESP2, ready for the socket."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


def read_replies(sock: socket.socket, reader: hiredis.Reader, n: int) -> list[object]:
    """Block until n replies have arrived; error replies come back as hiredis.ReplyError values."""
    out: list[object] = []
    while len(out) < n:
        while len(out) < n and (reply := reader.gets()) is not False:
            out.append(reply)
        if len(out) < n:
            data = sock.recv(1 << 18)
            if not data:
                raise ConnectionError("the server closed the connection")
            reader.feed(data)
    return out


def connect(target: Target) -> socket.socket:
    """A blocking TCP socket to the target, logged in and on its database."""
    sock = socket.create_connection((target.host, target.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    hello: list[bytes] = []
    if target.password is not None:
        creds = [target.password.encode()] if target.username is None else [
            target.username.encode(), target.password.encode()]
        hello.append(resp(b"AUTH", *creds))
    if target.db:
        hello.append(resp(b"SELECT", b"%d" % target.db))
    if hello:
        sock.sendall(b"".join(hello))
        for reply in read_replies(sock, hiredis.Reader(), len(hello)):
            if isinstance(reply, hiredis.ReplyError):
                sock.close()
                # The reply names the failure, never the password.
                raise ConnectionError(f"server refused the driver's login: {reply}")
    sock.settimeout(None)
    return sock
