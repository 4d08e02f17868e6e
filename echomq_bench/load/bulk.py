"""Bulk state for benchmarks and load generators: ids by the block, rows and
sorted set entries written in big slices, and a queue's keys removed.

A benchmark that needs an active set of 1,000,000 leases cannot mint them
one at a time (3-6 µs each in Python) nor send 1,000,000 HSETs, and a load
generator that mints each id as it sends measures itself.

    ids       `id_block(n)`: n consecutive snowflake values from a table;
              `FixedIds`: the same blocks on every run; `IdBlock`: a node's
              ids minted a block at a time with numpy, by `ids.Minter`'s
              rule (a test holds its digits equal to `ids.encode`'s)
    filling   `BulkFill.fill` writes set entries, and rows if asked, a
              slice of SLICE at a time; `fill`, `fill_chunks` and
              `fill_in_turn` put a pending backlog on queues through it
    dropping  `delete_keys` UNLINKs in chunks; `drop_queue` removes every
              key of one queue through it

All of it runs outside every measured window. A fill is plain HSET and
ZADD, so the verbs' EVALSHA counts in commandstats never include it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import redis

from echomq import mint, parse_id
from echomq._instrument import Client, QueueKeys, ids as id_format
from echomq_bench.errors import MeasurementError
from echomq_bench.load.wire import CommandTemplate, Target, as_bytes, hole, resp

__all__ = ["id_block", "FixedIds", "IdBlock", "encode_block", "BulkFill", "fill", "fill_chunks", "fill_in_turn",
           "server_ms", "member_ids", "delete_keys", "drop_queue", "SLICE"]

SLICE = 10_000
FILL_CHUNK = 1000   # a backlog is filled a chunk per queue in turn
REMOVE_CHUNK = 5000
_ALPHA = np.frombuffer(id_format.ALPHABET.encode(), dtype=np.uint8)
_LOW = 62**4  # four low digits come from the tables below
_PAIRS = [id_format.encode(i, 2) for i in range(62**2)]  # two low digits of every value, in order
_lock = threading.Lock()
_next_value = 0


def id_block(n: int, kind: str = "JOB") -> list[str]:
    """n distinct ids of this kind, in mint order, never handed out before
    by id_block in this process; they start just after the current mint
    time, so they sort after every id minted earlier. A later mint() may land
    inside a block: keep block ids and minted ids in separate queues."""
    global _next_value
    if n <= 0:
        return []
    with _lock:
        base = max(_next_value, parse_id(mint(kind)).value + 1)
        base = -(-base // _LOW) * _LOW
        _next_value = base + n
    return _ids_from(base, n, kind)


def _ids_from(base: int, n: int, kind: str) -> list[str]:
    out: list[str] = []
    high, low = divmod(base, _LOW)
    while len(out) < n:
        prefix = kind + id_format.encode(high, 7)
        take = min(n - len(out), _LOW - low)
        out.extend(prefix + _PAIRS[i // 3844] + _PAIRS[i % 3844] for i in range(low, low + take))
        high, low = high + 1, 0
    return out


class FixedIds:
    """The same ids in the same order on every run: blocks counted up from a
    fixed value, for a measurement whose keyspace must not vary (the
    instruction counts hash every key name)."""

    def __init__(self, start: int = 10**15) -> None:
        self._next = start

    def __call__(self, n: int, kind: str = "JOB") -> list[str]:
        base, self._next = self._next, self._next + max(n, 0)
        return _ids_from(base, n, kind) if n > 0 else []


class IdBlock:
    """Mints JOB ids a block at a time, in mint order, for one node."""

    def __init__(self, node: int, kind: bytes = b"JOB") -> None:
        if not 0 <= node <= id_format.MAX_NODE:
            raise ValueError(f"node must be 0..{id_format.MAX_NODE}, got {node}")
        self.node = node
        self.kind = kind
        self._last_ms = -1
        self._seq = id_format.MAX_SEQ

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
            if seq > id_format.MAX_SEQ:
                ms, seq = ms + 1, 0  # more than 4096 in this ms: borrow the next
            run = min(n - filled, id_format.MAX_SEQ + 1 - seq)
            base = ((ms - id_format.EPOCH_MS) << 22) | (self.node << 12) | seq
            values[filled:filled + run] = np.arange(base, base + run, dtype=np.uint64)
            filled += run
            seq += run
        self._last_ms, self._seq = ms, seq - 1
        return [self.kind + d for d in encode_block(values)]


def encode_block(values: np.ndarray) -> list[bytes]:
    """`ids.encode` of each uint64 value, as bytes, for a whole array at once."""
    v = values.astype(np.uint64, copy=True)
    digits = np.empty((len(v), id_format.DIGITS), dtype=np.uint8)
    for i in range(id_format.DIGITS - 1, -1, -1):
        digits[:, i] = _ALPHA[(v % np.uint64(62)).astype(np.intp)]
        v //= np.uint64(62)
    return digits.view(f"S{id_format.DIGITS}").ravel().tolist()


def server_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


class BulkFill:
    """Writes sorted set entries, and their rows when asked, with plain HSET
    and ZADD: no script, so INFO commandstats files a fill under those
    commands, never under the verbs' EVALSHA. The commands are laid out as
    RESP by hand (`load.wire`) and go out a slice of SLICE entries at a time
    on one connection of the client's pool, each slice written before the
    replies of the one before are read."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def fill(self, zkey: str, ids: Sequence[str | bytes], *, row_prefix: str = "", state: str = "pending",
             attempts: int = 0, payload: bytes = b"", score0: int = 0, step: int = 0) -> int:
        """ZADD ids to zkey at score0 + step*i; with row_prefix, HSET each
        row state/attempts/payload too. Returns how many were written."""
        key_hole = hole("key", 16)
        hset = CommandTemplate((b"HSET", key_hole, b"state", state, b"attempts", attempts, b"payload", payload),
                               variable={"key": key_hole}).filler("key", "len(key)")
        prefix = row_prefix.encode()
        zset = zkey.encode()
        pool = self.client.connection_pool
        conn: Any = pool.get_connection()  # redis-py leaves its Connection's methods unannotated
        try:
            waiting = 0
            for start in range(0, len(ids), SLICE):
                chunk = [as_bytes(i) for i in ids[start:start + SLICE]]
                rows = [hset((key, len(key))) for key in (prefix + i for i in chunk)] if row_prefix else []
                first = score0 + step * start
                members = [x for k, job_id in enumerate(chunk) for x in (b"%d" % (first + step * k), job_id)]
                conn.send_packed_command([b"".join(rows) + resp(b"ZADD", zset, *members)])
                self._read(conn, waiting, zkey)
                waiting = len(rows) + 1
            self._read(conn, waiting, zkey)
        except BaseException:
            conn.disconnect()  # replies may be left unread on it
            raise
        finally:
            pool.release(conn)
        return len(ids)

    @staticmethod
    def _read(conn: Any, n: int, zkey: str) -> None:
        for _ in range(n):
            try:
                conn.read_response()
            except redis.exceptions.ResponseError as exc:
                raise MeasurementError(f"filling {zkey} failed: {exc}") from exc


def fill(target: Target, queue: str, n: int, payload: bytes, node: int = id_format.MAX_NODE) -> list[bytes]:
    """Put n pending jobs on `queue`, as enqueue leaves them; returns their ids in mint order."""
    ids: list[bytes] = []
    for chunk in fill_chunks(target, queue, n, payload, node):
        ids.extend(chunk)
    return ids


def fill_chunks(target: Target, queue: str, n: int, payload: bytes,
                node: int = id_format.MAX_NODE) -> Iterator[list[bytes]]:
    """`fill`, one chunk of ids at a time, so several servers can be filled in turn.

    Each job as enqueue leaves it, its row (state pending, attempts 0, the
    payload) and its pending entry at score 0, written by `BulkFill`: this
    is set-up, never measured, so it skips enqueue's per-call checks.
    """
    if n <= 0:
        return
    keys = QueueKeys(queue)
    minter = IdBlock(node)
    client = redis.Redis(host=target.host, port=target.port, username=target.username, password=target.password,
                         db=target.db)
    try:
        bulk = BulkFill(client)
        for start in range(0, n, FILL_CHUNK):
            chunk = minter.take(min(FILL_CHUNK, n - start))
            bulk.fill(keys.pending, chunk, row_prefix=keys.job_prefix, payload=payload)
            yield chunk
    finally:
        client.close()


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


def member_ids(client: Client, key: str, start: int = 0, end: int = -1) -> list[str]:
    """A sorted set's members from rank `start` to `end`, in score order, as text."""
    return [m.decode() if isinstance(m, bytes) else str(m) for m in client.zrange(key, start, end)]


def delete_keys(client: Any, keys: Iterable[str | bytes], chunk: int = REMOVE_CHUNK) -> int:
    """UNLINK in chunks, one command each: a million rows in one command would
    block the server, and a cluster client's pipeline refuses a multi-key
    UNLINK. Returns how many keys were deleted."""
    removed = 0
    batch: list[str | bytes] = []
    for key in keys:
        batch.append(key)
        if len(batch) >= chunk:
            removed += int(client.unlink(*batch))
            batch = []
    if batch:
        removed += int(client.unlink(*batch))
    return removed


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
            removed += delete_keys(client, [prefix + i for i in ids])
            client.zrem(key, *ids)
    removed += int(client.unlink(*sets))
    if sweep:
        pattern = k.base.replace("{", "\\{").replace("}", "\\}") + "*"
        removed += delete_keys(client, list(client.scan_iter(match=pattern, count=1000)))
    return removed
