"""One bad member cannot stop a Worker or strand its batch.

Any ZADD can put a member in pending that no enqueue wrote: text that is
not a JOB id, or bytes that are not ASCII. claim buries such a member in
the dead set with a reason before it could be handed out; a claim script
of another version that hands one out anyway gets a MalformedReplyError,
which the Worker counts, and the rest of the batch runs."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import pytest
import redis

from echomq import Queue, Worker, WorkerSettings, mint
from echomq.errors import MalformedReplyError
from echomq._instrument import lua_dir
from echomq_bench.faults.proxy import FaultProxy

# Both sort before every JOB id, so they are popped first, ahead of the jobs of their batch.
POISON = [b"0hello", b"1\xff\xfe not ascii"]
DAMAGED = b"damaged: member is not a JOB id at claim"


@pytest.fixture
def name() -> str:
    return f"poison-{secrets.token_hex(3)}"


def _poisoned(client: redis.Redis, q: Queue, jobs: int = 5) -> list[str]:
    """`jobs` good jobs, and each POISON member in pending with a row a claim would accept."""
    ids = [mint() for _ in range(jobs)]
    for job_id in ids:
        q.enqueue(job_id, b"payload")
    for member in POISON:
        client.zadd(q.keys.pending, {member: 0})
        client.hset(q.keys.job_prefix.encode() + member, mapping={"state": "pending", "attempts": 0, "payload": ""})
    return ids


def _burst(q: Queue, batch: int = 8) -> tuple[Worker, list[str]]:
    ran: list[str] = []
    worker = Worker(q, lambda job: ran.append(job.id),
                    WorkerSettings(batch=batch, burst=True, pumps=False, handle_signals=False, lease_ms=60_000))
    worker.run()
    return worker, ran


def test_claim_buries_a_member_that_is_not_a_job_id_and_the_batch_completes(proxy: FaultProxy,
                                                                              client: redis.Redis,
                                                                              name: str) -> None:
    q = Queue(redis.Redis(port=proxy.port), name)
    ids = _poisoned(client, q)
    worker, ran = _burst(q)
    assert sorted(ran) == sorted(ids)
    assert (worker.stats.completed, worker.stats.errors) == (len(ids), 0)
    assert sorted(client.zrange(q.keys.dead, 0, -1)) == sorted(POISON)
    for member in POISON:
        assert client.hmget(q.keys.job_prefix.encode() + member, "state", "last_error") == [b"dead", DAMAGED]
    assert client.zcard(q.keys.pending) == client.zcard(q.keys.active) == 0
    assert sorted(q.browse(state="dead")) == ["0hello", "1\\xff\\xfe not ascii"]


@pytest.fixture
def handing_out_anything(tmp_path: Path) -> Path:
    """The claim script as it was before it checked the ids it pops."""
    lua = tmp_path / "lua"
    shutil.copytree(lua_dir(), lua)
    claim = lua / "claim-3.lua"
    text = claim.read_text()
    assert "if checkJobId(id) then" in text
    claim.write_text(text.replace("if checkJobId(id) then", "if false then"))
    return lua


def test_a_worker_counts_a_reply_it_cannot_read_and_runs_the_rest(proxy: FaultProxy, client: redis.Redis,
                                                                  name: str, handing_out_anything: Path) -> None:
    q = Queue(redis.Redis(port=proxy.port), name, lua_dir=handing_out_anything)
    ids = _poisoned(client, q)
    worker, ran = _burst(q)
    assert sorted(ran) == sorted(ids)
    assert (worker.stats.completed, worker.stats.errors, worker.stats.claimed) == (len(ids), len(POISON), len(ids))
    # Leased to nobody: each returns through reap when its lease runs out.
    assert sorted(client.zrange(q.keys.active, 0, -1)) == sorted(POISON)


def test_queue_claim_reports_a_reply_it_cannot_read(client: redis.Redis, name: str,
                                                    handing_out_anything: Path) -> None:
    q = Queue(client, name, lua_dir=handing_out_anything)
    _poisoned(client, q, jobs=1)
    for member in POISON:
        with pytest.raises(MalformedReplyError, match="returns through reap when the lease expires"):
            q.claim(60_000)
        assert client.zscore(q.keys.active, member) is not None
    job = q.claim(60_000)
    assert job is not None and q.complete(job.id, job.token) == "ok"
