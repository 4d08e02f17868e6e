"""The driver's wire: where to connect, a raw socket logged in, RESP by hand.

redis-py spends tens of microseconds per command in Python; a load
generator that wants to measure the server writes RESP itself and parses
replies with hiredis (C).

`resp` is the one RESP writer of the instrument. `encode_call` turns an
`echomq.verbs.ScriptCall` into the bytes of its EVALSHA, and
`CommandTemplate` does the same once for a call built with holes in place of
the values that change per command (an id, a token), so hot loops fill
bytes instead of encoding arguments, and a signature change in
`echomq.verbs` reaches them unedited.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable, Mapping, Sequence

import hiredis

from echomq._instrument import ScriptCall

__all__ = ["Target", "connect", "resp", "as_bytes", "encode_call", "hole", "CommandTemplate", "read_replies"]


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
    return b"*%d\r\n" % len(args) + b"".join([b"$%d\r\n%s\r\n" % (len(a), a) for a in args])


def as_bytes(value: Any) -> bytes:
    """An argument as the server reads it: str in UTF-8, int in decimal."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int) and not isinstance(value, bool):
        return b"%d" % value
    raise TypeError(f"cannot send {type(value).__name__} {value!r} as a command argument")


def encode_call(call: ScriptCall, sha: str | bytes) -> bytes:
    """The RESP bytes of a script call's EVALSHA."""
    return resp(*map(as_bytes, call.evalsha(sha)))


def hole(name: str, width: int) -> str:
    """A stand-in value of `width` characters that no key, SHA or number contains.

    A str, so it goes where the verbs expect an id and into key names alike.
    """
    if width < 2:
        raise ValueError("a hole is at least 2 characters wide")
    return "\x00" + name[: width - 2].ljust(width - 2, "\x01") + "\x00"


class CommandTemplate:
    """One command's RESP bytes with holes, filled per command by `%`.

    Build the command with `hole(...)` values where the real ones go. A
    fixed hole is as wide as every value put in it (ids: all 14 bytes) and
    may sit inside an argument (a row key is prefix + id). A variable hole
    must be a whole argument; its length is written per fill.
    """

    def __init__(self, command: Sequence[Any], fixed: Mapping[str, str | bytes] | None = None,
                 variable: Mapping[str, str | bytes] | None = None) -> None:
        fixed_b = {n: as_bytes(v) for n, v in (fixed or {}).items()}
        variable_b = {n: as_bytes(v) for n, v in (variable or {}).items()}
        by_value = {v: n for n, v in variable_b.items()}
        # Literal bytes and holes in order; a hole is (name, "%s") or, for a length, (name, "%d").
        parts: list[bytes | tuple[str, bytes]] = [b"*%d\r\n" % len(command)]
        for arg in map(as_bytes, command):
            name = by_value.get(arg)
            if name is not None:
                parts += [b"$", (f"len({name})", b"%d"), b"\r\n", (name, b"%s"), b"\r\n"]
            else:
                parts += [b"$%d\r\n" % len(arg), *self._split(arg, fixed_b), b"\r\n"]
        holes = [p for p in parts if isinstance(p, tuple)]
        self.slots = tuple(name for name, _ in holes)
        missing = {*fixed_b, *variable_b} - set(self.slots)
        if missing:
            raise ValueError(f"holes {sorted(missing)} are not in the command")
        self.format = b"".join(p[1] if isinstance(p, tuple) else p.replace(b"%", b"%%") for p in parts)
        self._variable = any(kind == b"%d" for _, kind in holes)
        self._pieces = [b""]
        for p in parts:
            if isinstance(p, tuple):
                self._pieces.append(b"")
            else:
                self._pieces[-1] += p

    @staticmethod
    def _split(arg: bytes, fixed: Mapping[str, bytes]) -> list[bytes | tuple[str, bytes]]:
        """An argument as literal bytes and the fixed holes inside it, in order."""
        found: list[tuple[int, str, bytes]] = []
        for name, value in fixed.items():
            start = arg.find(value)
            while start >= 0:
                found.append((start, name, value))
                start = arg.find(value, start + len(value))
        out: list[bytes | tuple[str, bytes]] = []
        at = 0
        for start, name, value in sorted(found):
            out += [arg[at:start], (name, b"%s")]
            at = start + len(value)
        out.append(arg[at:])
        return out

    def filler(self, *names: str) -> Callable[[tuple[Any, ...]], bytes]:
        """A fill that takes a tuple of values for `names`, in that order.

        A variable hole `x` is given twice: as "x" and as "len(x)".
        """
        unknown = set(self.slots) - set(names)
        if unknown:
            raise ValueError(f"the command has holes {sorted(unknown)} that {names} does not fill")
        index = {n: i for i, n in enumerate(names)}
        fmt = self.format
        if len(self.slots) == 1:
            (only,) = (index[s] for s in self.slots)
            return lambda values: fmt % values[only]
        pick = itemgetter(*[index[s] for s in self.slots])
        return lambda values: fmt % pick(values)

    def fill(self, **values: Any) -> bytes:
        """The command with these values in its holes (the convenient, slower form)."""
        given = {n: as_bytes(v) for n, v in values.items()}
        lengths = {f"len({n})": len(v) for n, v in given.items()}
        filled: dict[str, bytes | int] = {**given, **lengths}
        return self.format % tuple(filled[s] for s in self.slots)

    def pieces(self) -> list[bytes]:
        """The bytes between the holes, for joining around values in bulk."""
        if self._variable:
            raise ValueError("a variable hole writes its length; fill it, do not join around it")
        return list(self._pieces)


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
