"""The one drain and the one ids-per-set reader (echomq_bench.load.drain):
every set a job can still leave counts, and each queue's sets are read in one
transaction, which a queue's own moves cannot fall between."""

from __future__ import annotations

import secrets
from typing import Any

import redis

from echomq import Queue, mint
from echomq._instrument import QueueKeys
from echomq_bench.load.drain import drain, held_ids, places, unsettled
from echomq_bench.servers import EmbeddedCluster, spread_queues


def _retried(client: redis.Redis, max_attempts: int, delay_ms: int) -> tuple[Queue, str, str]:
    """A queue of one job, claimed once and given back by retry: the queue, the id, and retry's reply."""
    queue = Queue(client, f"dr-{secrets.token_hex(3)}", max_attempts=max_attempts)
    jid = mint()
    queue.enqueue(jid, b"x")
    job = queue.claim(lease_ms=60_000)
    assert job is not None
    return queue, jid, queue.retry(job.id, job.token, "given back", delay_ms=delay_ms)


def test_a_job_only_in_the_schedule_keeps_its_queue_from_draining(client: redis.Redis) -> None:
    queue, jid, reply = _retried(client, max_attempts=3, delay_ms=60_000)
    assert reply == "scheduled"
    assert places(client, [queue.name])["scheduled"] == {jid}
    assert unsettled(client, queue.keys) == 1
    assert drain(client, [queue.name], 0.2) is False


def test_a_queue_whose_jobs_are_all_dead_is_drained(client: redis.Redis) -> None:
    queue, jid, reply = _retried(client, max_attempts=1, delay_ms=0)
    assert reply == "dead"
    assert drain(client, [queue.keys], 5.0) is True  # the dead set is where a job ends, not where it waits
    assert places(client, [queue.keys]) == {"pending": set(), "active": set(), "scheduled": set(), "dead": {jid}}


class MovesAfterPendingIsRead:
    """A real client that, each time a command reading `pending` is issued,
    moves `job` from active to pending from a second connection, as a reap
    does, before its caller's next command is issued. Separate reads are
    sent one by one, so the move falls between them; a MULTI/EXEC pipeline
    sends nothing until EXEC, so the move comes before the whole transaction."""

    def __init__(self, client: redis.Redis, mover: redis.Redis, keys: QueueKeys, job: str) -> None:
        self.client, self.mover, self.keys, self.job = client, mover, keys, job

    def after(self, key: str) -> None:
        if key == self.keys.pending:
            # Two plain commands, not a MULTI: the test counts the EXECs the reader sends.
            self.mover.zadd(self.keys.pending, {self.job: 0})
            self.mover.zrem(self.keys.active, self.job)

    def zcard(self, key: str) -> int:
        n = int(self.client.zcard(key))
        self.after(key)
        return n

    def zrange(self, key: str, start: int, end: int) -> Any:
        members = self.client.zrange(key, start, end)
        self.after(key)
        return members

    def pipeline(self, transaction: bool = True) -> _Pipeline:
        return _Pipeline(self, self.client.pipeline(transaction=transaction))


class _Pipeline:
    def __init__(self, owner: MovesAfterPendingIsRead, pipe: Any) -> None:
        self.owner, self.pipe = owner, pipe

    def zcard(self, key: str) -> _Pipeline:
        self.pipe.zcard(key)
        self.owner.after(key)
        return self

    def zrange(self, key: str, start: int, end: int) -> _Pipeline:
        self.pipe.zrange(key, start, end)
        self.owner.after(key)
        return self

    def execute(self) -> Any:
        return self.pipe.execute()


def _drained_by_separate_reads(client: Any, keys: QueueKeys) -> bool:
    """The race the drain must not have: three reads, each at its own instant."""
    return sum(int(client.zcard(key)) for key in (keys.pending, keys.active, keys.schedule)) == 0


def _back_to_active(client: redis.Redis, keys: QueueKeys, jid: str) -> None:
    client.zrem(keys.pending, jid)
    client.zadd(keys.active, {jid: 1})


def _execs(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_exec", {}).get("calls", 0))


def test_a_move_between_separate_reads_looks_drained_and_the_drain_never_does(
        client: redis.Redis, server: Any) -> None:
    keys = QueueKeys(f"dr-{secrets.token_hex(3)}")
    jid = mint()
    client.zadd(keys.active, {jid: 1})
    mover = server.client()
    try:
        racing = MovesAfterPendingIsRead(client, mover, keys, jid)
        assert _drained_by_separate_reads(racing, keys) is True
        assert client.zrange(keys.pending, 0, -1) == [jid.encode()]  # read as drained, the job still pending

        _back_to_active(client, keys, jid)
        execs = _execs(client)
        assert drain(racing, [keys], 0.2) is False
        assert _execs(client) > execs  # the reads went to the server as MULTI/EXEC, not a plain pipeline
        _back_to_active(client, keys, jid)
        assert held_ids(racing, [keys]) == {jid}  # separate ZRANGEs would find it in no set
    finally:
        mover.close()


def test_places_reads_every_queue_on_a_plain_server(client: redis.Redis) -> None:
    a, b = (Queue(client, f"dr-{secrets.token_hex(3)}", max_attempts=1) for _ in range(2))
    ids = _one_in_each_place(a) | _one_in_each_place(b)
    got = places(client, [a.name, b.keys])
    assert {place: len(held) for place, held in got.items()} == {"pending": 2, "active": 2, "scheduled": 0, "dead": 2}
    assert held_ids(client, [a.name, b.name]) == ids
    assert held_ids(client, [a.keys]).isdisjoint(held_ids(client, [b.keys]))


def test_places_and_drain_on_a_cluster_read_each_queue_on_its_own_master(cluster: EmbeddedCluster) -> None:
    client = cluster.client()
    try:
        names = [p.queue for p in spread_queues(cluster, 3, prefix=f"dr{secrets.token_hex(3)}-")]
        queues = [Queue(client, name, max_attempts=1) for name in names]
        ids = set().union(*(_one_in_each_place(q) for q in queues))
        got = places(client, names)
        assert {place: len(held) for place, held in got.items()} == {"pending": 3, "active": 3, "scheduled": 0,
                                                                     "dead": 3}
        assert held_ids(client, names) == ids
        assert drain(client, names, 0.2) is False
        for queue in queues:
            client.delete(queue.keys.pending, queue.keys.active)
        assert drain(client, names, 5.0) is True
    finally:
        client.close()


def _one_in_each_place(queue: Queue) -> set[str]:
    """One job dead, one active, one pending; their ids."""
    ids = [mint() for _ in range(3)]
    for jid in ids:
        queue.enqueue(jid, b"x")
    dead = queue.claim(lease_ms=60_000)
    assert dead is not None and queue.retry(dead.id, dead.token, "e") == "dead"
    assert queue.claim(lease_ms=60_000) is not None
    return set(ids)
