"""The Worker and the Queue against time, on each build: a retry's delay is
honoured to within a round trip, not the pump's cadence; a silent server
cannot hold run() past its deadlines, and health() shows how long it has
waited; claims that buried their scan limit of damage are sent again; and a
server clock that steps forward voids the lease's proof of a lost complete.

Every bound asserted below is on "happens at all", tens of times the time the
event needs, never a speed."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
import redis

from echomq import Job, OutcomeUnknownError, Queue, Worker, WorkerSettings, mint
from echomq_bench.faults.proxy import FaultProxy
from echomq_bench.servers import EmbeddedServer
from tests.helpers import wait_until

DAMAGED = 150  # more than claim's scan limit of 100 damaged ids per call


@pytest.fixture
def name() -> str:
    return f"time-{secrets.token_hex(3)}"


@pytest.fixture
def proxy(server: EmbeddedServer) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", server.port) as p:
        yield p


def _worker_thread(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, name="worker-under-test", daemon=True)
    thread.start()
    return thread


def test_a_retry_runs_again_when_its_delay_is_over_not_at_the_pump_cadence(client: redis.Redis, name: str) -> None:
    # A 60 s lease puts the pumps' cadence at 30 s; the retry's delay is 50 ms.
    queue = Queue(client, name, max_attempts=3)
    runs: list[float] = []

    def flaky(job: Job) -> None:
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise RuntimeError("first attempt fails")

    worker = Worker(queue, flaky, WorkerSettings(lease_ms=60_000, retry_base_ms=50, retry_cap_ms=50, poll_ms=20,
                                                 handle_signals=False))
    assert queue.enqueue(mint(), b"x") == "enqueued"
    thread = _worker_thread(worker)
    try:
        assert wait_until(lambda: worker.stats.completed == 1, 10), "the retry waited for the pump's cadence"
    finally:
        worker.stop()
        thread.join(20)
    assert (worker.stats.retried, worker.stats.completed, len(runs)) == (1, 1, 2)
    assert worker.stats.promoted >= 1


def test_promote_keeps_its_own_cadence_for_retries_other_clients_scheduled(client: redis.Redis, name: str) -> None:
    queue = Queue(client, name, max_attempts=3)
    jid = mint()
    assert queue.enqueue(jid, b"x") == "enqueued"
    job = queue.claim(lease_ms=60_000)
    assert job is not None and queue.retry(job.id, job.token, "elsewhere", delay_ms=50) == "scheduled"
    ran: list[str] = []
    worker = Worker(queue, lambda j: ran.append(j.id),
                    WorkerSettings(lease_ms=60_000, promote_interval_ms=100, poll_ms=20, handle_signals=False))
    thread = _worker_thread(worker)
    try:
        assert wait_until(lambda: ran == [jid], 10), "promote waited for the reap cadence"
    finally:
        worker.stop()
        thread.join(20)


def test_a_silent_server_cannot_hold_run_past_its_deadlines(proxy: FaultProxy, client: redis.Redis,
                                                            name: str) -> None:
    # The guide's advice: a socket_timeout, so that a connect to a silent server gives up too.
    # Judging alone would wait out the client's 10 retries of 2 s each.
    quiet = redis.Redis(port=proxy.port, socket_timeout=2)
    queue = Queue(quiet, name, judge_timeout_ms=300)
    assert queue.enqueue(mint(), b"x") == "enqueued"
    started, release = threading.Event(), threading.Event()

    def handle(job: Job) -> None:
        started.set()
        release.wait(10)

    worker = Worker(queue, handle, WorkerSettings(reply_timeout_ms=300, pump_interval_ms=50, poll_ms=20,
                                                  handle_signals=False))
    thread = _worker_thread(worker)
    try:
        assert started.wait(10)
        proxy.blackhole()  # the server answers nothing from now on; connections stay open
        release.set()
        assert wait_until(lambda: worker.health().waiting_since is not None, 10)
        assert wait_until(lambda: worker.stats.unknown == 1, 20), "judging the lost complete never ended"
        worker.stop()
        thread.join(20)
        assert not thread.is_alive(), "stop() did not end run() while the server was silent"
    finally:
        proxy.heal()
        worker.stop()
    health = worker.health()
    assert health.last_round_at is not None and health.waiting_since is None
    assert (worker.stats.claimed, worker.stats.completed, worker.stats.unknown) == (1, 0, 1)


def test_health_tells_an_idle_worker_from_a_stuck_one(client: redis.Redis, name: str) -> None:
    worker = Worker(Queue(client, name), lambda job: None, WorkerSettings(poll_ms=20, handle_signals=False))
    assert worker.health().last_round_at is None
    thread = _worker_thread(worker)
    try:
        # Idle: no job, yet a round trip of claims ends every poll_ms, so last_round_at keeps moving.
        assert wait_until(lambda: worker.health().last_round_at is not None, 10)
        first = worker.health().last_round_at
        assert wait_until(lambda: (worker.health().last_round_at or 0) > (first or 0), 10)
    finally:
        worker.stop()
        thread.join(20)


def _bury_ahead(client: redis.Redis, queue: Queue, damaged: int, good: int) -> list[str]:
    """`damaged` ids with no row at the head of pending, then `good` jobs behind them."""
    client.zadd(queue.keys.pending, {mint(): 0 for _ in range(damaged)})
    jobs = [mint() for _ in range(good)]
    for jid in jobs:
        assert queue.enqueue(jid, b"good") == "enqueued"
    return jobs


def test_queue_claim_goes_past_a_scan_limit_of_damage(client: redis.Redis, name: str) -> None:
    queue = Queue(client, name)
    good = _bury_ahead(client, queue, DAMAGED, 3)
    job = queue.claim(lease_ms=10_000)
    assert job is not None and job.id == good[0]
    assert client.zcard(queue.keys.dead) == DAMAGED


def test_a_burst_worker_drains_the_jobs_behind_a_scan_limit_of_damage(client: redis.Redis, name: str) -> None:
    queue = Queue(client, name)
    good = _bury_ahead(client, queue, DAMAGED, 3)
    ran: list[str] = []
    stats = Worker(queue, lambda job: ran.append(job.id), WorkerSettings(burst=True, handle_signals=False)).run()
    assert ran == good and stats.completed == 3
    assert client.zcard(queue.keys.pending) == 0 and client.zcard(queue.keys.dead) == DAMAGED


def test_a_forward_step_of_the_server_clock_voids_the_lease_proof(proxy: FaultProxy, client: redis.Redis,
                                                                  name: str) -> None:
    """The server's clock steps 120 s ahead while a 60 s lease is held: the
    server reaps by its clock, another worker runs and completes the job, and
    our complete's reply is lost. The row is gone and our monotonic clock
    still shows the lease running, yet the lease did not hold: unknown, never ok."""
    ours = Queue(redis.Redis(port=proxy.port), name)
    other = Queue(client, name)
    assert ours.clock is not None, "the server reports its time (INFO server_time_usec)"
    # The step, as our next reading of the server's clock will see it: 120 s more than ours since this one.
    ours.clock = replace(ours.clock, server_s=ours.clock.server_s - 120)
    jid = mint()
    assert other.enqueue(jid, b"x") == "enqueued"
    job = ours.claim(lease_ms=60_000)
    assert job is not None and job.token == 1
    # On the stepped clock the lease's deadline has passed: reap returns it, another worker finishes it.
    client.zadd(other.keys.active, {jid: 0}, xx=True)
    assert other.reap() == 1
    theirs = other.claim(lease_ms=60_000)
    assert theirs is not None and theirs.token == 2 and other.complete(jid, 2) == "ok"

    proxy.drop_next_reply()
    with pytest.raises(OutcomeUnknownError):
        ours.complete(jid, 1)
