"""A queue whose slot is moving between two masters, stopped between the
steps of the move: every script refuses what it cannot do whole, and the
keyspace on both nodes is as it was. Then the move finishes and every job
is still there to run.

A slot moves key by key, so for a while a queue's sets may be on one node
and some of its rows on the other. The source refuses a script that reads
a row already gone ("non local key"); the target, to a client that sent
ASKING, reads a row not yet there as missing, which is not damage."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import redis

from echomq import Queue, ServerUnavailableError, mint
from echomq.errors import SlotMigratingError
from echomq._instrument import QueueKeys
from echomq_bench.cli import main
from echomq_bench.faults.reshard import run_reshard
from echomq_bench.records.kinds.faults import AuditEntry
from echomq_bench.servers import EmbeddedCluster, parse_server_spec, start
from echomq_bench.servers.cluster import ClusterNode
from echomq_bench.servers.slotmove import SlotMove
from echomq_bench.servers.spec import CLUSTER_WORDS
from tests.helpers import wait_past

LEASE_MS = 60_000


@pytest.fixture(scope="module", params=list(CLUSTER_WORDS))
def two_masters(request: pytest.FixtureRequest) -> Iterator[EmbeddedCluster]:
    """Its own cluster: the tests leave slots on other masters than they found them."""
    c = start(f"t={request.param} --masters 2")
    assert isinstance(c, EmbeddedCluster)
    try:
        yield c
    finally:
        c.stop()


def _queue(cluster: EmbeddedCluster) -> tuple[Queue, redis.RedisCluster]:
    client = cluster.client()
    return Queue(client, f"rs-{secrets.token_hex(3)}", max_attempts=3), client


def _stocked(queue: Queue, client: redis.RedisCluster) -> dict[str, list[str]]:
    """Every set of the queue holds jobs: 3 pending, 1 active and expired,
    1 active, 1 due in the schedule, 1 dead. The sets by name."""
    for _ in range(7):
        queue.enqueue(mint("JOB"), b"work")
    expired = queue.claim(1)
    held = queue.claim(LEASE_MS)
    retried = queue.claim(LEASE_MS)
    dead = queue.claim(LEASE_MS)
    assert expired and held and retried and dead
    queue.retry(retried.id, retried.token, "again", delay_ms=0)
    Queue(client, queue.name, max_attempts=1).retry(dead.id, dead.token, "gave up")
    # Past the 1 ms lease; the retry's run-at of now is due already.
    wait_past(client, client.zscore(queue.keys.active, expired.id))
    return {kind: [m.decode() for m in client.zrange(getattr(queue.keys, kind), 0, -1)]
            for kind in ("pending", "active", "schedule", "dead")}


def _move(cluster: EmbeddedCluster, keys: QueueKeys) -> SlotMove:
    client = cluster.client()
    slot = client.keyslot(keys.pending)
    owner = client.get_node_from_key(keys.pending).name
    masters = cluster.masters()
    source = next(m for m in masters if m.name == owner)
    target = next(m for m in masters if m.name != owner)
    move = SlotMove(slot, source, target)
    move.begin()
    return move


def _keyspace(node: ClusterNode, slot: int) -> dict[bytes, Any]:
    """What the node holds of the slot, read with ASKING so that the importing
    node answers for it too."""
    out: dict[bytes, Any] = {}
    with node.client(single_connection_client=True) as c:
        for key in c.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000):
            c.execute_command("ASKING")
            kind = c.type(key)
            c.execute_command("ASKING")
            out[key] = c.zrange(key, 0, -1, withscores=True) if kind == b"zset" else c.hgetall(key)
    return out


def _both(move: SlotMove) -> tuple[dict[bytes, Any], dict[bytes, Any]]:
    return _keyspace(move.source, move.slot), _keyspace(move.target, move.slot)


VERBS: dict[str, Callable[[Queue], Any]] = {
    "claim": lambda q: q.claim(LEASE_MS),
    "promote": lambda q: q.promote(),
    "reap": lambda q: q.reap(),
}
SOURCE_OF = {"claim": "pending", "promote": "schedule", "reap": "active"}


@pytest.mark.parametrize("verb", list(VERBS))
def test_on_the_source_a_verb_whose_rows_moved_first_moves_nothing(two_masters: EmbeddedCluster,
                                                                  verb: str) -> None:
    queue, client = _queue(two_masters)
    sets = _stocked(queue, client)
    move = _move(two_masters, queue.keys)
    move.move([queue.keys.job(i) for i in sets[SOURCE_OF[verb]]])
    before = _both(move)
    with pytest.raises(SlotMigratingError):
        VERBS[verb](queue)
    assert _both(move) == before
    _finish_and_drain(two_masters, move, queue, sets)


@pytest.mark.parametrize("verb", list(VERBS))
def test_on_the_target_a_row_not_yet_moved_is_not_damage(two_masters: EmbeddedCluster, verb: str) -> None:
    queue, client = _queue(two_masters)
    sets = _stocked(queue, client)
    move = _move(two_masters, queue.keys)
    k = queue.keys
    move.move([k.pending, k.active, k.schedule, k.dead])  # the sets go first, every row stays
    before = _both(move)
    # The source sends the call on with ASK; the target answers TRYAGAIN until
    # the rows arrive, and the cluster client gives up after its redirects.
    with pytest.raises(ServerUnavailableError):
        VERBS[verb](queue)
    assert _both(move) == before, "a row still on the source was buried as damage on the target"
    _finish_and_drain(two_masters, move, queue, sets)


def test_claim_puts_back_a_member_that_is_no_job_when_its_row_may_have_moved(two_masters: EmbeddedCluster) -> None:
    """Burying a member that is not a JOB id writes at its row's key; with
    the slot moving, that key is asked first, and the member stays put."""
    queue, client = _queue(two_masters)
    sets = _stocked(queue, client)
    client.zadd(queue.keys.pending, {"BAD-member": 0})  # sorts before every JOB id at score 0
    move = _move(two_masters, queue.keys)
    before = _both(move)
    with pytest.raises(SlotMigratingError):
        queue.claim(LEASE_MS)
    assert _both(move) == before
    _finish_and_drain(two_masters, move, queue, sets, damaged=1)


def _finish_and_drain(cluster: EmbeddedCluster, move: SlotMove, queue: Queue, sets: dict[str, list[str]],
                      damaged: int = 0) -> None:
    """The move finishes; then every job of the stock is claimed and completed
    (the expired lease reaped, the due retry promoted), and the dead set holds
    what it held, plus any member buried as damage."""
    while move.move_batch(100):
        pass
    move.finish(cluster.masters())
    client = cluster.client()  # a fresh slot map
    after = Queue(client, queue.name, max_attempts=3)
    assert after.reap() == 1 and after.promote() == 1
    done = set()
    while (job := after.claim(LEASE_MS)) is not None:
        assert after.complete(job.id, job.token) == "ok"
        done.add(job.id)
    expected = set(sets["pending"]) | set(sets["active"]) | set(sets["schedule"])
    left_active = {m.decode() for m in client.zrange(after.keys.active, 0, -1)}
    assert done | left_active == expected and len(left_active) == 1
    assert client.zcard(after.keys.dead) == len(sets["dead"]) + damaged


# --------------------------------------------------------------------------
# The command: a slot moved back and forth under load


@pytest.mark.parametrize("build", list(CLUSTER_WORDS))
def test_moving_a_slot_under_load_loses_nothing_and_strands_nothing(build: str, tmp_path: Path) -> None:
    result = run_reshard(parse_server_spec(build), queues=2, moving_s=1.0, call_log_dir=tmp_path)
    assert (result.moves or 0) >= 1 and (result.keys_moved or 0) > 0
    report = AuditEntry.from_record(result.audit)
    assert (report.lost, report.in_two_places, result.in_no_set, result.without_row) == (0, 0, 0, 0)
    assert (report.enqueued or 0) > 0 and report.passed
    assert result.history["passed"] and result.history["counts"]["lost"] == 0
    assert result.passed


def test_reshard_refuses_a_cluster_it_did_not_start(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reshard", "--server", "redis://127.0.0.1:6379"]) == 2
    assert "reshard needs a local cluster it may move slots on" in capsys.readouterr().err
