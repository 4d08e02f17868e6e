"""Bulk state for benchmarks: many well-formed ids fast, and rows plus sorted
set entries written by the server in big slices.

A benchmark that needs an active set of 1,000,000 leases cannot mint them one
at a time (about 3 µs each in Python) nor send 1,000,000 HSETs. `id_block(n)`
hands out n consecutive snowflake values from a table, and `BulkFill` writes
10,000 entries per EVALSHA. Both run outside every measured window: bulk
fills go through EVALSHA, so a caller must never fill while it is counting
EVALSHA time in commandstats.
"""

from __future__ import annotations

import threading
from typing import Iterable, Sequence

import redis

from echomq.ids import encode, parse_id, mint
from echomq.scripts import Client

__all__ = ["id_block", "FixedIds", "BulkFill", "server_ms", "SLICE", "delete_keys", "member_ids"]

SLICE = 10_000
_LOW = 62**4  # four low digits come from the tables below
_PAIRS = [encode(i, 2) for i in range(62**2)]  # two low digits of every value, in order
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
        prefix = kind + encode(high, 7)
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


# Rows (optional) and zset entries in one server-side loop; scores run
# score0, score0+step, ... so a block of leases gets distinct deadlines.
_FILL_LUA = """
local zkey = KEYS[1]
local prefix, state, attempts, payload = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local score0, step = tonumber(ARGV[5]), tonumber(ARGV[6])
local args = {}
for i = 7, #ARGV do
  local id = ARGV[i]
  if prefix ~= '' then
    redis.call('HSET', prefix .. id, 'state', state, 'attempts', attempts, 'payload', payload)
  end
  args[#args + 1] = string.format('%.0f', score0 + step * (i - 7))
  args[#args + 1] = id
  if #args >= 1000 then
    redis.call('ZADD', zkey, unpack(args))
    args = {}
  end
end
if #args > 0 then redis.call('ZADD', zkey, unpack(args)) end
return #ARGV - 6
"""


def server_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


class BulkFill:
    """Writes zset entries (and their rows) in slices of SLICE per EVALSHA."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.script = client.register_script(_FILL_LUA)
        client.script_load(_FILL_LUA)

    def fill(self, zkey: str, ids: Sequence[str], *, row_prefix: str = "", state: str = "pending",
             attempts: int = 0, payload: bytes = b"", score0: int = 0, step: int = 0) -> int:
        """ZADD ids to zkey at score0 + step*i; with row_prefix, HSET each
        row state/attempts/payload too. Returns how many were written."""
        if not row_prefix:
            return self._zadd(zkey, ids, score0, step)
        done = 0
        for start in range(0, len(ids), SLICE):
            chunk = ids[start:start + SLICE]
            done += int(self.script(keys=[zkey], args=[row_prefix, state, attempts, payload,
                                                      score0 + step * start, step, *chunk]))
        return done

    def _zadd(self, zkey: str, ids: Sequence[str], score0: int, step: int) -> int:
        # Without rows, plain pipelined ZADDs are faster than the script:
        # 1,000,000 entries take about 3 s, half of it the server's.
        pipe = self.client.pipeline(transaction=False)
        for start in range(0, len(ids), SLICE):
            chunk = ids[start:start + SLICE]
            flat: list[object] = [None] * (2 * len(chunk))
            first = score0 + step * start
            flat[0::2] = range(first, first + step * len(chunk), step) if step else [first] * len(chunk)
            flat[1::2] = chunk
            # redis-py leaves execute_command unannotated.
            pipe.execute_command("ZADD", zkey, *flat)  # type: ignore[no-untyped-call]
            if len(pipe) >= 4:
                pipe.execute()
        pipe.execute()
        return len(ids)


def member_ids(client: Client, key: str, start: int = 0, end: int = -1) -> list[str]:
    """A sorted set's members from rank `start` to `end`, in score order, as text."""
    return [m.decode() if isinstance(m, bytes) else str(m) for m in client.zrange(key, start, end)]


def delete_keys(client: redis.Redis, keys: Iterable[str], chunk: int = 5_000) -> None:
    """UNLINK in chunks: a million rows in one command would block the server."""
    batch: list[str] = []
    pipe = client.pipeline(transaction=False)
    for key in keys:
        batch.append(key)
        if len(batch) >= chunk:
            pipe.unlink(*batch)
            batch = []
    if batch:
        pipe.unlink(*batch)
    pipe.execute()
