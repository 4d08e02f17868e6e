"""Jobs in bulk for load generators: ids by the block, a pre-filled
backlog, and removing a run's keys afterwards.

A load generator that mints each id with `ids.mint` (6 µs in Python)
measures itself. `IdBlock` mints a block of ids at once with numpy, by the
same rule as `ids.Minter`: node bits per process, never below the previous
id, 4096 per millisecond and then the next millisecond is borrowed.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

import hiredis
import numpy as np

from .ids import ALPHABET, EPOCH_MS, MAX_NODE, MAX_SEQ
from .keys import QueueKeys
from .wire import Target, connect, read_replies

__all__ = ["IdBlock", "fill", "remove_queue"]

_ALPHA = np.frombuffer(ALPHABET.encode(), dtype=np.uint8)
_DIGITS = 11
FILL_CHUNK = 1000
REMOVE_CHUNK = 5000


class IdBlock:
    """Mints JOB ids a block at a time, in mint order, for one node."""

    def __init__(self, node: int, kind: bytes = b"JOB") -> None:
        if not 0 <= node <= MAX_NODE:
            raise ValueError(f"node must be 0..{MAX_NODE}, got {node}")
        self.node = node
        self.kind = kind
        self._last_ms = -1
        self._seq = MAX_SEQ

    def take(self, n: int) -> list[bytes]:
        if n <= 0:
            return []
        now = time.time_ns() // 1_000_000
        if now > self._last_ms:
            ms, seq = now, 0
        else:
            ms, seq = self._last_ms, self._seq + 1
        values = np.empty(n, dtype=np.uint64)
        filled = 0
        while filled < n:
            if seq > MAX_SEQ:
                ms, seq = ms + 1, 0  # more than 4096 in this ms: borrow the next
            run = min(n - filled, MAX_SEQ + 1 - seq)
            base = ((ms - EPOCH_MS) << 22) | (self.node << 12) | seq
            values[filled:filled + run] = np.arange(base, base + run, dtype=np.uint64)
            filled += run
            seq += run
        self._last_ms, self._seq = ms, seq - 1
        return [self.kind + d for d in _encode(values)]


def _encode(values: np.ndarray) -> list[bytes]:
    v = values.copy()
    digits = np.empty((len(v), _DIGITS), dtype=np.uint8)
    for i in range(_DIGITS - 1, -1, -1):
        digits[:, i] = _ALPHA[(v % 62).astype(np.intp)]
        v //= np.uint64(62)
    return digits.view(f"S{_DIGITS}").ravel().tolist()


def fill(target: Target, queue: str, n: int, payload: bytes, node: int = MAX_NODE) -> list[bytes]:
    """Put n pending jobs on `queue`, as enqueue leaves them; returns their ids in mint order.

    The row (state pending, attempts 0, the payload) and the pending entry
    at score 0 are written with plain HSET and ZADD, pipelined one chunk
    ahead: this is set-up, never measured, so it skips enqueue's per-call
    checks and costs the server about a third as much.
    """
    keys = QueueKeys(queue)
    prefix, pending = keys.job_prefix.encode(), keys.pending.encode()
    ids = IdBlock(node).take(n)
    if not ids:
        return ids
    head = b"*8\r\n$4\r\nHSET\r\n$%d\r\n%s" % (len(prefix) + len(ids[0]), prefix)
    tail = (b"\r\n$5\r\nstate\r\n$7\r\npending\r\n$8\r\nattempts\r\n$1\r\n0\r\n$7\r\npayload\r\n$%d\r\n%s\r\n"
            % (len(payload), payload))
    sock = connect(target)
    reader = hiredis.Reader()
    try:
        waiting = 0
        width = len(ids[0])  # every id has the same length: join, no per-id formatting
        score = b"$1\r\n0\r\n$%d\r\n" % width
        for start in range(0, n, FILL_CHUNK):
            chunk = ids[start:start + FILL_CHUNK]
            rows = head + (tail + head).join(chunk) + tail
            zadd = (b"*%d\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n" % (2 + 2 * len(chunk), len(pending), pending)
                    + score + (b"\r\n" + score).join(chunk) + b"\r\n")
            sock.sendall(rows + zadd)
            if waiting:
                _check(read_replies(sock, reader, waiting))
            waiting = len(chunk) + 1
        _check(read_replies(sock, reader, waiting))
    finally:
        sock.close()
    return ids


def _check(replies: list[object]) -> None:
    for reply in replies:
        if isinstance(reply, hiredis.ReplyError):
            raise RuntimeError(f"filling the backlog failed: {reply}")


def remove_queue(client: Any, queues: Iterable[str]) -> int:
    """Delete every key of these queues: the four sets and the row of every id in them.

    Every row of the contract is in exactly one set (or deleted), so the sets
    name all of them, and no SCAN walks a shared server's whole keyspace.
    """
    removed = 0
    for name in queues:
        k = QueueKeys(name)
        for key in (k.pending, k.active, k.schedule, k.dead):
            while True:
                ids = client.zrange(key, 0, REMOVE_CHUNK - 1)
                if not ids:
                    break
                pipe = client.pipeline(transaction=False)
                pipe.unlink(*[k.job_prefix.encode() + i for i in ids])
                pipe.zrem(key, *ids)
                removed += int(pipe.execute()[0])
        removed += int(client.unlink(k.pending, k.active, k.schedule, k.dead))
    return removed
