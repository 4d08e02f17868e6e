"""Bulk state: a backlog filled as enqueue leaves its jobs, with no script
call; a failed fill that leaves the client usable; and a queue dropped to
nothing, rows included."""

from __future__ import annotations

import pytest
import redis

from echomq import Queue, mint
from echomq._instrument import QueueKeys
from echomq_bench.capacity.session import target_of
from echomq_bench.errors import MeasurementError
from echomq_bench.load.bulk import SLICE, BulkFill, delete_keys, drop_queue, fill, fill_in_turn, id_block
from echomq_bench.servers import EmbeddedServer


def _script_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval"))


def test_a_backlog_is_what_enqueue_leaves_and_costs_no_script_call(server: EmbeddedServer,
                                                                   client: redis.Redis) -> None:
    q = Queue(client, "bulk-enqueued")
    q.enqueue(mint(), b"pay")
    enqueued_row = client.hgetall(q.keys.job(q.browse(1)[0]))
    before = _script_calls(client)
    ids = fill(target_of(server), "bulk-filled", 2_500, b"pay")
    assert _script_calls(client) == before
    keys = QueueKeys("bulk-filled")
    assert len(set(ids)) == 2_500 and ids == sorted(ids)
    assert client.zrange(keys.pending, 0, -1, withscores=True) == [(i, 0.0) for i in ids]
    assert {client.hgetall(keys.job(i.decode()))[b"state"] for i in ids} == {b"pending"}
    assert client.hgetall(keys.job(ids[-1].decode())) == enqueued_row
    assert Queue(client, "bulk-filled").claim(60_000) is not None  # the verbs take a filled job as their own


def test_queues_filled_in_turn_each_get_their_count(server: EmbeddedServer, client: redis.Redis) -> None:
    target = target_of(server)
    filled = fill_in_turn([(target, "bulk-a", 2_300), (target, "bulk-b", 700)], b"x")
    assert [len(ids) for ids in filled] == [2_300, 700]
    assert client.zcard(QueueKeys("bulk-a").pending) == 2_300 and client.zcard(QueueKeys("bulk-b").pending) == 700
    assert fill_in_turn([(target, "bulk-c", 500)], b"x", keep_ids=False) == [[]]
    assert client.zcard(QueueKeys("bulk-c").pending) == 500


def test_a_refused_fill_raises_and_leaves_the_client_usable(client: redis.Redis) -> None:
    client.set("not-a-set", "x")
    ids = id_block(SLICE + 10)  # two slices: the refusal comes with replies still unread
    with pytest.raises(MeasurementError, match="filling not-a-set failed: WRONGTYPE"):
        BulkFill(client).fill("not-a-set", ids, row_prefix="bulk-row:", payload=b"p")
    assert client.ping() is True
    assert client.get("not-a-set") == b"x"


def test_drop_queue_removes_every_key_of_the_queue_and_no_other(server: EmbeddedServer,
                                                                client: redis.Redis) -> None:
    fill(target_of(server), "bulk-drop", 12_000, b"x")  # more rows than one UNLINK takes
    q = Queue(client, "bulk-drop")
    job = q.claim(60_000)
    assert job is not None
    q.retry(job.id, job.token, "boom", delay_ms=60_000)  # a row in the schedule set too
    client.set(QueueKeys("bulk-drop").base + "note", "left beside the contract")
    client.set("someone-else", "kept")
    # Every row; the sets go with their last members.
    assert drop_queue(client, "bulk-drop") == 12_000
    assert client.keys(QueueKeys("bulk-drop").base + "*") == [(QueueKeys("bulk-drop").base + "note").encode()]
    assert drop_queue(client, "bulk-drop", sweep=True) == 1
    assert client.keys("*") == [b"someone-else"]


def test_delete_keys_counts_what_it_removed_over_several_chunks(client: redis.Redis) -> None:
    client.mset({f"bulk-key:{i}": i for i in range(25)})
    assert delete_keys(client, (f"bulk-key:{i}" for i in range(30)), chunk=10) == 25
    assert client.dbsize() == 0
