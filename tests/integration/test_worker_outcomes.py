"""The Worker tells the truth when a pipeline's replies are lost: through the
fault proxy, on a plain redis.Redis with redis-py's default retry settings on.

A pipeline of completes and retries that ran and lost its replies is
reported completed (or retried), never lost, and is not sent again; a
zombie's stale complete is still lost; claims that lost their replies,
alone or riding after a round's completes, are counted as errors and not
sent again, and the jobs they leased come back through reap."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
import redis

from echomq import Job, Queue, Worker, WorkerSettings, mint
from echomq._instrument import verbs
from echomq_bench.faults.proxy import FaultProxy
from tests.helpers import evalsha_calls, server_ms, wait_past, wait_until


@pytest.fixture
def name() -> str:
    return f"wout-{secrets.token_hex(3)}"


def _queue(proxy: FaultProxy, name: str) -> Queue:
    # The defaults: redis-py resends a command, or a whole pipeline, whose connection dropped.
    return Queue(redis.Redis(port=proxy.port), name, max_attempts=3)


def _enqueue(queue: Queue, n: int) -> list[str]:
    ids = [mint() for _ in range(n)]
    for jid in ids:
        assert queue.enqueue(jid, jid.encode()) == "enqueued"
    return ids


def _settings(**kw: Any) -> WorkerSettings:
    return WorkerSettings(handle_signals=False, pumps=False, burst=True, poll_ms=10, **kw)


def _stats(worker: Worker) -> tuple[int, ...]:
    s = worker.stats
    return s.claimed, s.completed, s.retried, s.dead, s.lost, s.unsettled, s.unknown, s.errors


def test_redis_py_resends_a_pipeline_whose_replies_were_lost(proxy: FaultProxy, client: redis.Redis,
                                                             name: str) -> None:
    """The hazard itself, without the Worker's guard: the pipeline sent the usual way."""
    q = _queue(proxy, name)
    _enqueue(q, 1)
    job = q.claim(30_000)
    assert job is not None
    pipe = q.client.pipeline(transaction=False)
    call = verbs.complete(q.keys, job.id, job.token)
    pipe.execute_command(*call.evalsha(q.scripts.sha("complete")))
    proxy.drop_next_reply()
    (reply,) = pipe.execute(raise_on_error=False)
    assert isinstance(reply, redis.exceptions.ResponseError) and str(reply).startswith("EMQSTALE")
    assert client.exists(q.keys.job(job.id)) == 0  # it had landed


def test_a_settle_pipeline_whose_replies_were_lost_is_reported_as_it_landed(proxy: FaultProxy, client: redis.Redis,
                                                                            name: str) -> None:
    q = _queue(proxy, name)
    ids = _enqueue(q, 4)
    failing = ids[1]
    settled: list[tuple[str, str]] = []

    def handle(job: Job) -> None:
        if job.id == ids[0]:
            proxy.drop_next_reply()  # the next reply through the proxy: the settles' and the next claims'
        if job.id == failing:
            raise ValueError("boom")

    client.config_resetstat()
    worker = Worker(q, handle, _settings(batch=4, retry_base_ms=0),
                    on_settled=lambda job, outcome: settled.append((job.id, outcome)))
    worker.run()

    assert proxy.counts["replies_dropped"] == 1
    assert sorted(settled) == sorted((jid, "retried" if jid == failing else "completed") for jid in ids)
    # claimed, completed, retried, dead, lost, unsettled, unknown, errors: the four claims
    # that rode with the settles lost their replies too.
    assert _stats(worker) == (4, 3, 1, 0, 0, 0, 0, 4)
    # Four claims; four settles and four claims sent once (the rows decided the settles);
    # four claims alone that found nothing.
    assert evalsha_calls(client) == 4 + (4 + 4) + 4
    assert "errorstat_EMQSTALE" not in client.info("errorstats")  # nothing was run twice
    assert [m.decode() for m in client.zrange(q.keys.schedule, 0, -1)] == [failing]
    assert client.hmget(q.keys.job(failing), "state", "attempts", "last_error") == [
        b"scheduled", b"1", b"ValueError: boom"]
    assert sorted(client.scan_iter(match=q.keys.base + "*")) == sorted(
        [q.keys.schedule.encode(), q.keys.job(failing).encode()])


def test_a_complete_landed_past_its_lease_whose_reply_was_lost_is_unknown(proxy: FaultProxy, client: redis.Redis,
                                                                          name: str) -> None:
    q = _queue(proxy, name)
    (jid,) = _enqueue(q, 1)
    settled: list[tuple[str, str]] = []

    def handle(job: Job) -> None:
        # The lease runs out, but nobody reaps it: the complete still lands. One ms past the score,
        # a whole ms, so the worker's own record of the lease (timed from before it sent the claim) ran out too.
        wait_past(client, client.zscore(q.keys.active, job.id) + 1)
        proxy.drop_next_reply()

    worker = Worker(q, handle, _settings(lease_ms=50),
                    on_settled=lambda job, outcome: settled.append((job.id, outcome)))
    worker.run()

    assert settled == [(jid, "unknown")]
    assert _stats(worker) == (1, 0, 0, 0, 0, 0, 1, 1)  # the claim that rode with the complete: an error
    assert client.exists(q.keys.job(jid), q.keys.active) == 0


def test_a_zombie_whose_stale_complete_lost_its_reply_is_still_lost(proxy: FaultProxy, client: redis.Redis,
                                                                    name: str) -> None:
    q = _queue(proxy, name)
    (jid,) = _enqueue(q, 1)
    other = Queue(client, name, max_attempts=3)
    settled: list[tuple[str, int, str]] = []
    taken: list[Job] = []

    def stall(job: Job) -> None:
        # Past the 200 ms lease: another worker reaps and claims the job.
        wait_past(client, client.zscore(q.keys.active, job.id))
        assert other.reap() == 1
        again = other.claim(30_000)
        assert again is not None
        taken.append(again)
        proxy.drop_next_reply()  # and the zombie's EMQSTALE never reaches it

    client.config_resetstat()
    zombie = Worker(q, stall, _settings(lease_ms=200),
                    on_settled=lambda job, outcome: settled.append((job.id, job.token, outcome)))
    zombie.run()

    assert proxy.counts["replies_dropped"] == 1
    assert settled == [(jid, 1, "lost")]
    assert _stats(zombie) == (1, 0, 0, 0, 1, 0, 0, 1)  # the claim that rode with the complete: an error
    assert client.info("errorstats")["errorstat_EMQSTALE"]["count"] == 1  # sent once, refused once
    assert [(j.id, j.token) for j in taken] == [(jid, 2)]
    assert other.complete(jid, 2) == "ok"
    assert sorted(client.scan_iter(match=q.keys.base + "*")) == []


def test_a_claim_pipeline_whose_replies_were_lost_is_not_resent(proxy: FaultProxy, client: redis.Redis,
                                                                name: str) -> None:
    q = _queue(proxy, name)
    ids = _enqueue(q, 5)
    done: list[tuple[str, str]] = []
    client.config_resetstat()
    proxy.drop_next_reply()  # the worker's first call: three claims in one pipeline
    worker = Worker(q, lambda job: None, _settings(batch=3, lease_ms=500),
                    on_settled=lambda job, outcome: done.append((job.id, outcome)))
    worker.run()

    assert proxy.counts["replies_dropped"] == 1
    # The lost claims count as errors; the next round claims the two jobs left.
    assert _stats(worker) == (2, 2, 0, 0, 0, 0, 0, 3)
    assert done == [(ids[3], "completed"), (ids[4], "completed")]
    # Three lost claims, three claims, two completes, three claims that found nothing: none sent twice.
    assert evalsha_calls(client) == 3 + 3 + 2 + 3
    # The first three jobs are leased to nobody, each claimed once; reap returns them when the lease ends.
    assert [m.decode() for m in client.zrange(q.keys.active, 0, -1)] == ids[:3]
    assert [client.hget(q.keys.job(jid), "attempts") for jid in ids[:3]] == [b"1"] * 3
    deadline = client.zrange(q.keys.active, -1, -1, withscores=True)[0][1]
    assert wait_until(lambda: server_ms(client) >= deadline, 5)
    assert Queue(client, name, max_attempts=3).reap() == 3
    rescued: list[tuple[str, str]] = []
    Worker(Queue(client, name, max_attempts=3), lambda job: None, _settings(batch=3),
           on_settled=lambda job, outcome: rescued.append((job.id, outcome))).run()
    assert rescued == [(jid, "completed") for jid in ids[:3]]
    assert sorted(client.scan_iter(match=q.keys.base + "*")) == []


def test_a_lost_round_trip_settles_its_complete_and_leaves_its_claim_to_reap(proxy: FaultProxy,
                                                                           client: redis.Redis, name: str) -> None:
    q = _queue(proxy, name)
    first, second = _enqueue(q, 2)
    done: list[tuple[str, str]] = []

    def handle(job: Job) -> None:
        if job.id == first:
            proxy.drop_next_reply()  # [complete first, claim] both run; neither reply comes back

    client.config_resetstat()
    worker = Worker(q, handle, _settings(batch=1, lease_ms=500),
                    on_settled=lambda job, outcome: done.append((job.id, outcome)))
    worker.run()

    assert proxy.counts["replies_dropped"] == 1
    assert done == [(first, "completed")]  # the row is gone inside our lease: the complete landed
    assert _stats(worker) == (1, 1, 0, 0, 0, 0, 0, 1)
    # A claim; the complete and the next claim, sent once; a claim alone that found nothing.
    assert evalsha_calls(client) == 1 + 2 + 1
    assert "errorstat_EMQSTALE" not in client.info("errorstats")
    # The second job is leased to nobody, claimed once; reap returns it when the lease ends.
    assert [m.decode() for m in client.zrange(q.keys.active, 0, -1)] == [second]
    assert client.hget(q.keys.job(second), "attempts") == b"1"
    deadline = client.zrange(q.keys.active, -1, -1, withscores=True)[0][1]
    assert wait_until(lambda: server_ms(client) >= deadline, 5)
    assert Queue(client, name, max_attempts=3).reap() == 1
    rescued: list[tuple[str, int, str]] = []
    Worker(Queue(client, name, max_attempts=3), lambda job: None, _settings(),
           on_settled=lambda job, outcome: rescued.append((job.id, job.token, outcome))).run()
    assert rescued == [(second, 2, "completed")]
    assert sorted(client.scan_iter(match=q.keys.base + "*")) == []
