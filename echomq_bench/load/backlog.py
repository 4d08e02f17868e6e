"""Jobs in bulk for load generators: ids by the block, a pre-filled
backlog, and removing a run's keys afterwards.

A load generator that mints each id with `ids.mint` (6 µs in Python)
measures itself. `IdBlock` mints a block of ids at once with numpy, by the
same rule as `ids.Minter`: node bits per process, never below the previous
id, 4096 per millisecond and then the next millisecond is borrowed. Its
digits are `ids.encode`'s, a block at a time (a test holds the two equal).
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import hiredis
import numpy as np

from echomq.ids import ALPHABET, DIGITS, EPOCH_MS, MAX_NODE, MAX_SEQ
from echomq.keys import QueueKeys
from echomq_bench.load.wire import CommandTemplate, Target, connect, hole, read_replies, resp

__all__ = ["IdBlock", "encode_block", "fill", "fill_chunks", "fill_in_turn", "drop_queue"]

_ALPHA = np.frombuffer(ALPHABET.encode(), dtype=np.uint8)
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
        return [self.kind + d for d in encode_block(values)]


def encode_block(values: np.ndarray) -> list[bytes]:
    """`ids.encode` of each uint64 value, as bytes, for a whole array at once."""
    v = values.astype(np.uint64, copy=True)
    digits = np.empty((len(v), DIGITS), dtype=np.uint8)
    for i in range(DIGITS - 1, -1, -1):
        digits[:, i] = _ALPHA[(v % np.uint64(62)).astype(np.intp)]
        v //= np.uint64(62)
    return digits.view(f"S{DIGITS}").ravel().tolist()


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
    minter = IdBlock(node)
    # The row's HSET, as the bytes around its id: every id has the same width.
    id_hole = hole("id", len(minter.kind) + DIGITS)
    head, tail = CommandTemplate((b"HSET", keys.job(id_hole), b"state", b"pending", b"attempts", b"0",
                                  b"payload", payload), fixed={"id": id_hole}).pieces()
    pending = keys.pending.encode()
    sock = connect(target)
    reader = hiredis.Reader()
    try:
        waiting: list[bytes] = []
        for start in range(0, n, FILL_CHUNK):
            chunk = minter.take(min(FILL_CHUNK, n - start))
            rows = head + (tail + head).join(chunk) + tail
            zadd = resp(b"ZADD", pending, *[x for job_id in chunk for x in (b"0", job_id)])
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


def drop_queue(client: Any, name: str, *, sweep: bool = False) -> int:
    """Delete every key of one queue: the four sets and the row of every id in them.

    Every row of the contract is in exactly one set (or deleted), so the sets
    name all of them, and no SCAN walks a shared server's whole keyspace.
    With `sweep`, a SCAN then removes whatever else is left under the
    queue's prefix (notes beside the contract, rows of a broken run).
    Returns how many keys were deleted.
    """
    k = QueueKeys(name)
    sets = (k.pending, k.active, k.schedule, k.dead)
    prefix = k.job_prefix.encode()
    removed = 0
    for key in sets:
        while True:
            ids = client.zrange(key, 0, REMOVE_CHUNK - 1)
            if not ids:
                break
            # Two calls, not a pipeline: a cluster client's pipeline refuses multi-key UNLINK.
            removed += int(client.unlink(*[prefix + i for i in ids]))
            client.zrem(key, *ids)
    removed += int(client.unlink(*sets))
    if sweep:
        pattern = k.base.replace("{", "\\{").replace("}", "\\}") + "*"
        left = list(client.scan_iter(match=pattern, count=1000))
        for start in range(0, len(left), REMOVE_CHUNK):
            removed += int(client.unlink(*left[start:start + REMOVE_CHUNK]))
    return removed
