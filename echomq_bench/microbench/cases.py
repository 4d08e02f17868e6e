"""The microbenchmarks' cases: each verb from a prepared state.

An `Env` holds the queues of one session on one server (a random tag in
every key name, so a shared server's other keys are never touched) and
their populations: a pending set of 100,000 rows for claim, browse,
pending_size and enqueue, 1,000 live leases beside complete, retry and
reap, 1,000 future run-ats beside retry and promote.

A `Case` is one verb from one state. State that a call consumes is written
fresh before it with plain HSET/ZADD/UNLINK, which INFO commandstats counts
under their own names, never under the verbs' EVALSHA.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import redis

from echomq_bench.load.bulk import BulkFill, delete_keys, drop_queue, id_block, member_ids, server_ms
from echomq import Job, Queue

__all__ = ["Sizes", "Env", "Case", "CASES", "VERB_CASES", "REFERENCES", "LEASE_MS", "PAYLOAD", "NOOP_LUA",
           "READ_100_LUA",
           "KEEP", "SUB_US_KEEP"]

LEASE_MS = 3_600_000
PAYLOAD = b'{"order": "ORD0Nt6z93U3dY", "qty": 3}'
NOOP_LUA = "return 0"
# The reference of the heavy verbs' weight: read one field of each of 100
# job rows, found through a sorted set -- the shape of a reap or promote of
# 100, without the writes, so it never changes what it reads.
READ_100_LUA = """
local ids = redis.call('ZRANGE', KEYS[1], 0, 99)
local n = 0
for i = 1, #ids do n = n + tonumber(redis.call('HGET', ARGV[1] .. ids[i], 'attempts')) end
return n
"""
KEEP = 0.5          # typical(): the faster half of the calls
SUB_US_KEEP = 0.9   # ... of a command that takes less than a µs


@dataclass(frozen=True)
class Sizes:
    """The populations each verb runs against."""
    pending: int = 100_000     # claim, browse, pending_size, enqueue: a large pending set
    active: int = 1_000        # live leases beside complete, retry and reap
    schedule: int = 1_000      # future run-ats beside retry and promote


class Env:
    """The queues of one microbench session on one server, named with a
    random tag so that a shared server's other keys are never touched
    (or a given tag and id source, for a keyspace that repeats run after
    run); `close()` deletes every queue it made."""

    def __init__(self, client: redis.Redis, *, sizes: Sizes = Sizes(), lua_dir: Path | str | None = None,
                 tag: str | None = None, id_block: Callable[[int], list[str]] = id_block) -> None:
        self.client = client
        self.sizes = sizes
        self.lua_dir = lua_dir
        self.tag = tag or f"mb{secrets.token_hex(3)}"
        self.id_block = id_block
        self.bulk = BulkFill(client)
        client.script_load(NOOP_LUA)
        client.script_load(READ_100_LUA)
        self._queues: dict[tuple[str, int, str | None], Queue] = {}
        self._filled: set[str] = set()

    def prepare_reference(self) -> None:
        """The 100 rows the heavy reference reads (once, before any window)."""
        if "reference" not in self._filled:
            self._filled.add("reference")
            q = self.queue("reference")
            self.bulk.fill(q.keys.pending, self.id_block(100), row_prefix=q.keys.job_prefix, state="pending",
                           attempts=1, payload=PAYLOAD)

    def read_100_eval(self) -> object:
        """The heavy reference, also sent as EVAL (between its own INFOs)."""
        q = self.queue("reference")
        return self.client.eval(READ_100_LUA, 1, q.keys.pending, q.keys.job_prefix)

    def noop_eval(self) -> object:
        """The no-op reference script, sent as EVAL: commandstats files it
        under eval, apart from the verbs' EVALSHA, and the server finds the
        compiled body by its SHA just as EVALSHA does."""
        return self.client.eval(NOOP_LUA, 0)

    def queue(self, name: str, max_attempts: int = 3, lua_dir: Path | str | None = None) -> Queue:
        """The queue `name` of this session; with lua_dir, a second handle on
        the same keys whose verbs run that folder's scripts."""
        folder = lua_dir if lua_dir is not None else self.lua_dir
        key = (name, max_attempts, None if folder is None else str(folder))
        if key not in self._queues:
            self._queues[key] = Queue(self.client, f"{self.tag}-{name}", max_attempts=max_attempts,
                                      lua_dir=folder)
        return self._queues[key]

    def scripts_dir(self) -> str:
        q = self.queue("pending")
        return str(next(iter(q.scripts.sources.values())).path.parent)

    # Populations, filled once per session on first use.

    def pending_rows(self, q: Queue, n: int) -> list[str]:
        ids = self.id_block(n)
        self.bulk.fill(q.keys.pending, ids, row_prefix=q.keys.job_prefix, state="pending",
                       attempts=0, payload=PAYLOAD)
        return ids

    def active_rows(self, q: Queue, ids: Sequence[str], *, expired: bool = False) -> None:
        """Rows in state active, attempts 1, leased until an hour from now
        (or expired long ago, at deadlines 1, 2, ...)."""
        score0 = 1 if expired else server_ms(self.client) + LEASE_MS
        self.bulk.fill(q.keys.active, ids, row_prefix=q.keys.job_prefix, state="active",
                       attempts=1, payload=PAYLOAD, score0=score0, step=1)

    def populate(self, q: Queue, what: str) -> None:
        """Fill `what` of q once: pending (rows), active (live leases) or
        schedule (future run-ats). Leases and run-ats need no rows: the
        verbs measured beside them never read those rows."""
        marker = f"{q.name}:{what}"
        if marker in self._filled:
            return
        self._filled.add(marker)
        if what == "pending":
            self.pending_rows(q, self.sizes.pending)
            return
        key, n = {"active": (q.keys.active, self.sizes.active),
                  "schedule": (q.keys.schedule, self.sizes.schedule)}[what]
        self.bulk.fill(key, self.id_block(n), score0=server_ms(self.client) + 10 * LEASE_MS, step=1)

    def close(self) -> None:
        for q in self._queues.values():
            drop_queue(self.client, q.name)


# -- the cases ---------------------------------------------------------------------------


class Case:
    """One verb from one prepared state.

    prepare(n)      untimed, before the window: state for n calls (may use scripts)
    before(i)       untimed, inside the window: per-call state, plain commands only;
                    returns the call's arguments
    call(*args)     the timed call
    ok(reply)       whether the reply is the one this state must produce
    after(replies)  untimed, after the window: put the population back
    """

    name = ""
    script: str | None = None  # the lua/ verb it runs, None for a plain command
    command = "evalsha"        # the commandstats entry that holds its server time
    keep = KEEP                # the share of calls `typical` keeps
    heavy = False
    reference = "read_100"  # see READ_100_LUA: the no-op, read in whole µs, does not track the machine
    expect: object = None

    def __init__(self, env: Env, lua_dir: Path | str | None = None) -> None:
        self.env = env
        self.lua_dir = lua_dir
        if self.reference == "read_100":
            env.prepare_reference()

    def queue(self, name: str, max_attempts: int = 3) -> Queue:
        return self.env.queue(name, max_attempts, self.lua_dir)

    def prepare(self, n: int) -> None:
        pass

    def before(self, i: int) -> tuple[Any, ...]:
        return ()

    def call(self, *args: Any) -> object:
        raise NotImplementedError

    def ok(self, reply: object) -> bool:
        return reply == self.expect

    def after(self, replies: list[object]) -> None:
        pass


class Enqueue(Case):
    name, script, expect = "enqueue", "enqueue", "enqueued"

    def __init__(self, env: Env, lua_dir: Path | str | None = None) -> None:
        super().__init__(env, lua_dir)
        self.q = self.queue("pending")
        env.populate(self.q, "pending")

    def prepare(self, n: int) -> None:
        self.ids = self.env.id_block(n)

    def before(self, i: int) -> tuple[Any, ...]:
        return self.ids[i], PAYLOAD

    def call(self, job_id: str, payload: bytes) -> object:
        return self.q.enqueue(job_id, payload)

    def after(self, replies: list[object]) -> None:
        self.env.client.zrem(self.q.keys.pending, *self.ids)
        delete_keys(self.env.client, map(self.q.keys.job, self.ids))


class EnqueueDuplicate(Enqueue):
    name, expect = "enqueue_duplicate", "duplicate"

    def prepare(self, n: int) -> None:
        self.ids = member_ids(self.env.client, self.q.keys.pending, 0, n - 1)

    def after(self, replies: list[object]) -> None:
        pass


class Claim(Case):
    name = script = "claim"

    def __init__(self, env: Env, lua_dir: Path | str | None = None) -> None:
        super().__init__(env, lua_dir)
        self.q = self.queue("pending")
        env.populate(self.q, "pending")

    def call(self) -> object:
        return self.q.claim(LEASE_MS)

    def ok(self, reply: object) -> bool:
        return isinstance(reply, Job) and reply.token == 1 and reply.payload == PAYLOAD

    def after(self, replies: list[object]) -> None:
        ids = [job.id for job in replies if isinstance(job, Job)]
        if ids:
            self.env.client.zrem(self.q.keys.active, *ids)
            delete_keys(self.env.client, map(self.q.keys.job, ids))
        self.env.pending_rows(self.q, len(replies))  # the pending set keeps its size


class Complete(Case):
    name, script, expect = "complete", "complete", "ok"
    queue_name, max_attempts = "active", 3

    def __init__(self, env: Env, lua_dir: Path | str | None = None) -> None:
        super().__init__(env, lua_dir)
        self.q = self.queue(self.queue_name, self.max_attempts)
        env.populate(self.q, "active")
        env.populate(self.q, "schedule")

    def prepare(self, n: int) -> None:
        self.ids = self.env.id_block(n)
        self.env.active_rows(self.q, self.ids)

    def before(self, i: int) -> tuple[Any, ...]:
        return self.ids[i], 1

    def call(self, job_id: str, token: int) -> object:
        return self.q.complete(job_id, token)


class RetrySchedule(Complete):
    name, script, expect = "retry_schedule", "retry", "scheduled"
    queue_name, max_attempts = "retry", 3
    target = "schedule"

    def call(self, job_id: str, token: int) -> object:
        return self.q.retry(job_id, token, "boom", delay_ms=LEASE_MS)

    def after(self, replies: list[object]) -> None:
        key = getattr(self.q.keys, self.target)
        self.env.client.zrem(key, *self.ids)
        delete_keys(self.env.client, map(self.q.keys.job, self.ids))


class RetryDead(RetrySchedule):
    name, expect = "retry_dead", "dead"
    queue_name, max_attempts = "dead", 1
    target = "dead"


class _PerCall(Case):
    """A verb whose every call consumes k fresh entries: each call's setup,
    in the window but as plain HSET/ZADD, writes k rows and their entries at
    scores 1..k (long expired or long due), after unlinking the last call's."""

    heavy = True
    k = 0
    q: Queue  # each kind's own queue, made by its __init__

    def __init__(self, env: Env, lua_dir: Path | str | None = None) -> None:
        super().__init__(env, lua_dir)
        self.expect = self.k
        self._last: list[str] = []

    def prepare(self, n: int) -> None:
        self.ids = self.env.id_block(n * self.k)

    def _rows(self, i: int, zkey: str, state: str) -> None:
        pipe = self.env.client.pipeline(transaction=False)
        self._clear(pipe)
        ids = self.ids[i * self.k:(i + 1) * self.k]
        for job_id in ids:
            pipe.hset(self.q.keys.job(job_id), mapping={"state": state, "attempts": 1, "payload": PAYLOAD})
        if ids:
            pipe.zadd(zkey, {job_id: rank + 1 for rank, job_id in enumerate(ids)})
        pipe.execute()
        self._last = ids

    def _clear(self, pipe: Any) -> None:
        if self._last:
            pipe.unlink(*map(self.q.keys.job, self._last))
            pipe.unlink(self.q.keys.pending)

    def after(self, replies: list[object]) -> None:
        pipe = self.env.client.pipeline(transaction=False)
        self._clear(pipe)
        pipe.execute()
        self._last = []


class Promote100(_PerCall):
    name, script, k, reference = "promote_100", "promote", 100, "read_100"

    def __init__(self, env: Env, lua_dir: Path | str | None = None) -> None:
        super().__init__(env, lua_dir)
        self.q = self.queue("promote")
        env.populate(self.q, "schedule")

    def before(self, i: int) -> tuple[Any, ...]:
        self._rows(i, self.q.keys.schedule, "scheduled")
        return ()

    def call(self) -> object:
        return self.q.promote(100)


class Reap(_PerCall):
    script = "reap"

    def __init__(self, env: Env, lua_dir: Path | str | None = None) -> None:
        super().__init__(env, lua_dir)
        self.q = self.queue("reap")
        env.populate(self.q, "active")
        self.heavy = self.k > 1

    def before(self, i: int) -> tuple[Any, ...]:
        if self.k:
            self._rows(i, self.q.keys.active, "active")
        return ()

    def call(self) -> object:
        return self.q.reap(100)


class Reap0(Reap):
    name, k = "reap_0", 0


class Reap1(Reap):
    name, k = "reap_1", 1


class Reap100(Reap):
    name, k, reference = "reap_100", 100, "read_100"


class Browse5(Case):
    name, script, command = "browse_5", None, "zrange"

    def __init__(self, env: Env, lua_dir: Path | str | None = None) -> None:
        super().__init__(env, lua_dir)
        self.q = self.queue("pending")
        env.populate(self.q, "pending")

    def call(self) -> object:
        return self.q.browse(5)

    def ok(self, reply: object) -> bool:
        return isinstance(reply, list) and len(reply) == 5


class PendingSize(Browse5):
    name, command, keep = "pending_size", "zcard", SUB_US_KEEP

    def call(self) -> object:
        return self.q.pending_size()

    def ok(self, reply: object) -> bool:
        return isinstance(reply, int) and reply >= self.env.sizes.pending


REFERENCES: tuple[str, ...] = ("noop_script", "ping", "read_100")
VERB_CASES: tuple[type[Case], ...] = (
    Enqueue, EnqueueDuplicate, Claim, Complete, RetrySchedule, RetryDead,
    Promote100, Reap0, Reap1, Reap100, Browse5, PendingSize,
)
CASES: dict[str, type[Case]] = {c.name: c for c in VERB_CASES}
