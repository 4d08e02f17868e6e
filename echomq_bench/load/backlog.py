"""Jobs in bulk for load generators: ids by the block, a pre-filled
backlog, and removing a run's keys afterwards.

A load generator that mints each id with `ids.mint` (6 µs in Python)
measures itself. `IdBlock` mints a block of ids at once with numpy, by the
same rule as `ids.Minter`: node bits per process, never below the previous
id, 4096 per millisecond and then the next millisecond is borrowed.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Iterator

import hiredis
import numpy as np

from echomq.ids import ALPHABET, EPOCH_MS, MAX_NODE, MAX_SEQ
from echomq.keys import QueueKeys
from echomq_bench.load.wire import Target, connect, read_replies

__all__ = ["IdBlock", "fill", "fill_chunks", "fill_in_turn", "remove_queue"]

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
    """Put n pending jobs on `queue`, as enqueue leaves them; returns their ids in mint order."""
    ids: list[bytes] = []
    for chunk in fill_chunks(target, queue, n, payload, node):
        ids.extend(chunk)
    return ids


def fill_chunks(target: Target, queue: str, n: int, payload: bytes,
                node: int = MAX_NODE) -> Iterator[list[bytes]]:
    """`fill`, one chunk of ids at a time, so several servers can be filled in turn.

    The row (state pending, attempts 0, the payload) and the pending entry
    at score 0 are written with plain HSET and ZADD, pipelined one chunk
    ahead: this is set-up, never measured, so it skips enqueue's per-call
    checks and costs the server about a third as much.
    """
    if n <= 0:
        return
    keys = QueueKeys(queue)
    prefix, pending = keys.job_prefix.encode(), keys.pending.encode()
    minter = IdBlock(node)
    sock = connect(target)
    reader = hiredis.Reader()
    try:
        waiting: list[bytes] = []
        for start in range(0, n, FILL_CHUNK):
            chunk = minter.take(min(FILL_CHUNK, n - start))
            width = len(chunk[0])  # every id has the same length: join, no per-id formatting
            head = b"*8\r\n$4\r\nHSET\r\n$%d\r\n%s" % (len(prefix) + width, prefix)
            tail = (b"\r\n$5\r\nstate\r\n$7\r\npending\r\n$8\r\nattempts\r\n$1\r\n0\r\n$7\r\npayload\r\n"
                    b"$%d\r\n%s\r\n" % (len(payload), payload))
            score = b"$1\r\n0\r\n$%d\r\n" % width
            rows = head + (tail + head).join(chunk) + tail
            zadd = (b"*%d\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n" % (2 + 2 * len(chunk), len(pending), pending)
                    + score + (b"\r\n" + score).join(chunk) + b"\r\n")
            sock.sendall(rows + zadd)
            if waiting:
                _check(read_replies(sock, reader, len(waiting) + 1))
                yield waiting
            waiting = chunk
        _check(read_replies(sock, reader, len(waiting) + 1))
        yield waiting
    finally:
        sock.close()


def fill_in_turn(jobs: list[tuple[Target, str, int]], payload: bytes,
                 keep_ids: bool = True) -> list[list[bytes]]:
    """Fill several queues (on several servers) a chunk each in turn, so that
    no server's backlog is fresher in the machine's caches than another's.
    Returns each queue's ids (empty lists unless keep_ids)."""
    streams = [fill_chunks(target, queue, n, payload) for target, queue, n in jobs]
    ids: list[list[bytes]] = [[] for _ in jobs]
    live = list(range(len(streams)))
    while live:
        for i in list(live):
            chunk = next(streams[i], None)
            if chunk is None:
                live.remove(i)
            elif keep_ids:
                ids[i].extend(chunk)
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
