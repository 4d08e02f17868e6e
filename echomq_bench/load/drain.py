"""Is the queue empty, and which ids does each of its sets hold?

Every command that waits for the consumers to finish (the fault scenarios,
`failover`, `reshard`) and every check that reads the final sets (the
call-log check, the Locust coordinator) asks through these two readers.

- `drain` waits until no queue given holds a job that could still move: its
  pending, active and schedule sets are all empty. The dead set does not
  count: no verb takes a job out of it, so waiting for it would only wait
  out the deadline.
- `places` reads what each of a queue's four sets holds.

Each reads a queue's sets in one transaction (MULTI/EXEC). Separate reads
race the queue's own moves: a reap that moves a job from active to pending
after pending was read and before active was, reads as an empty queue with
that job still pending; the same move between two ZRANGEs shows the job in
no set at all. A queue's keys share a hash tag, so on a cluster the
transaction of one queue runs on the one node that holds them. Queues are
read one after another: no verb moves a job from one queue to another.
"""

from __future__ import annotations

import time
from typing import Iterable

import redis

from echomq._instrument import Client, QueueKeys

__all__ = ["PLACES", "drain", "unsettled", "places", "held_ids"]

# Where a job can be on the server, named as its row's `state` names it.
PLACES = ("pending", "active", "scheduled", "dead")
POLL_S = 0.05


def _set_keys(keys: QueueKeys) -> dict[str, str]:
    return {"pending": keys.pending, "active": keys.active, "scheduled": keys.schedule, "dead": keys.dead}


def _queue_keys(queues: Iterable[str | QueueKeys]) -> list[QueueKeys]:
    return [q if isinstance(q, QueueKeys) else QueueKeys(q) for q in queues]


def unsettled(client: Client, keys: QueueKeys) -> int:
    """The jobs of one queue that could still move: pending + active + scheduled, read at one instant."""
    pipe = client.pipeline(transaction=True)
    for key in (keys.pending, keys.active, keys.schedule):
        pipe.zcard(key)
    return sum(int(n) for n in pipe.execute())


def drain(client: Client, queues: Iterable[str | QueueKeys], timeout_s: float) -> bool:
    """Wait until every queue (a name or its `QueueKeys`) has nothing
    pending, active or scheduled; whether it did within `timeout_s`. A
    RedisError (a server restarting, a cluster electing a replica) reads as
    not drained yet."""
    every = _queue_keys(queues)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if all(unsettled(client, keys) == 0 for keys in every):
                return True
        except redis.RedisError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def places(client: Client, queues: Iterable[str | QueueKeys]) -> dict[str, set[str]]:
    """The ids each set holds, over all the queues given, keyed by `PLACES`;
    each queue's four sets read in one transaction."""
    out: dict[str, set[str]] = {place: set() for place in PLACES}
    for keys in _queue_keys(queues):
        pipe = client.pipeline(transaction=True)
        sets = _set_keys(keys)
        for place in PLACES:
            pipe.zrange(sets[place], 0, -1)
        for place, members in zip(PLACES, pipe.execute()):
            out[place].update(m.decode() if isinstance(m, bytes) else str(m) for m in members)
    return out


def attempts(client: Client, keys: QueueKeys, ids: Iterable[str]) -> dict[str, int]:
    """The attempts of each job's row (for a held job, the token of its last
    claim); a job whose row is gone is left out."""
    order = sorted(ids)
    pipe = client.pipeline(transaction=False)
    for jid in order:
        pipe.hget(keys.job(jid), "attempts")
    return {jid: int(a) for jid, a in zip(order, pipe.execute()) if a is not None}


def held_ids(client: Client, queues: Iterable[str | QueueKeys]) -> set[str]:
    """Every id the queues hold, in whichever set."""
    return set().union(*places(client, queues).values())
