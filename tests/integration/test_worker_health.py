"""The Worker's pump thread and `Worker.health()` on each build: a pump round
that fails, however it fails, is counted and remembered, and the next round
goes on; health() shows from another thread how the Worker fares while
run() runs, and after.

The server is real throughout. Two failures are provoked: the pump's first
pipeline raising a RuntimeError on the client before it goes out (as a bug
in the client would; the server never sees that round), and the server's
own refusal of a promote whose schedule key holds another type.

Each test's proof that reaping went on is a job whose holder vanished: its
lease expires, and only a reap by the Worker's pumps brings it back to
pending for the Worker to run. Waits poll a condition under a deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Sequence

import pytest
import redis

from echomq import Job, Queue, Worker, WorkerHealth, WorkerSettings, mint
from echomq._instrument import ScriptCall, pipeline
from tests.helpers import wait_until

INJECTED = "injected: the pump's pipeline failed before it went out"


def _settings(**kw: Any) -> WorkerSettings:
    return WorkerSettings(handle_signals=False, pump_interval_ms=20, poll_ms=20, **kw)


@pytest.fixture
def pump_fault(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The first pump pipeline (reap then promote) raises RuntimeError instead of
    being sent; every other pipeline is sent as it would be. The time.time() it raised."""
    raised: list[float] = []
    send = pipeline.send

    def faulty(queue: Queue, calls: Sequence[ScriptCall], **kw: Any) -> list[Any]:
        if not raised and calls and calls[0].verb == "reap":
            raised.append(time.time())
            raise RuntimeError(INJECTED)
        return send(queue, calls, **kw)

    monkeypatch.setattr(pipeline, "send", faulty)
    return raised


def _abandoned(queue: Queue) -> str:
    """A job claimed by a holder that vanished: its lease expires in 100 ms and only a reap frees it."""
    jid = mint()
    assert queue.enqueue(jid, b"abandoned") == "enqueued"
    job = queue.claim(lease_ms=100)
    assert job is not None and (job.id, job.token) == (jid, 1)
    return jid


@contextmanager
def _running(worker: Worker) -> Iterator[None]:
    """worker.run() in a thread of its own, stopped and joined on the way out."""
    thread = threading.Thread(target=worker.run, name="worker-under-test")
    thread.start()
    try:
        yield
    finally:
        worker.stop()
        thread.join(20)
    assert not thread.is_alive()


def _recorder(settled: list[tuple[str, int, str]]) -> Any:
    return lambda job, outcome: settled.append((job.id, job.token, outcome))


def test_a_pump_round_that_raises_does_not_end_reaping(queue: Queue, pump_fault: list[float]) -> None:
    jid = _abandoned(queue)
    settled: list[tuple[str, int, str]] = []
    worker = Worker(queue, lambda job: None, _settings(), on_settled=_recorder(settled))

    with _running(worker):
        # The first pump round raised, so only a later round can have reaped the lease.
        assert wait_until(lambda: settled != [], 10), "the expired lease was never reaped"

    assert len(pump_fault) == 1
    assert settled == [(jid, 2, "completed")]
    assert (worker.stats.reaped, worker.stats.claimed, worker.stats.completed) == (1, 1, 1)
    assert worker.stats.errors == 2  # the raised round's reap and promote, neither of which went out


def test_health_shows_the_failure_and_the_rounds_while_running_and_after(
        queue: Queue, pump_fault: list[float]) -> None:
    jid = _abandoned(queue)
    settled: list[tuple[str, int, str]] = []
    worker = Worker(queue, lambda job: None, _settings(), on_settled=_recorder(settled))
    assert worker.health() == WorkerHealth(running=False, pumps_alive=False, rounds=0, pump_rounds=0,
                                           pump_failures=0, errors=0, last_error=None, last_error_at=None)

    with _running(worker):
        assert wait_until(lambda: settled != [] and worker.health().pump_rounds >= 3, 10)
        seen = worker.health()
        assert seen.running and seen.pumps_alive
        assert (seen.pump_failures, seen.errors) == (1, 2)
        assert seen.last_error == f"pump: RuntimeError: {INJECTED}"
        assert seen.last_error_at is not None and pump_fault[0] <= seen.last_error_at <= time.time()
        # The rounds go on, each claim round trip counted, though the queue is empty now.
        assert wait_until(lambda: worker.health().rounds > seen.rounds + 2, 10)
        assert worker.health().pumps_alive

    after = worker.health()
    assert settled == [(jid, 2, "completed")]
    assert not after.running and not after.pumps_alive
    assert after.rounds == worker.stats.rounds and after.rounds > seen.rounds
    assert after.pump_rounds >= seen.pump_rounds
    assert (after.pump_failures, after.errors) == (1, 2)
    assert (after.last_error, after.last_error_at) == (seen.last_error, seen.last_error_at)
    with pytest.raises(AttributeError):
        after.rounds = 0  # type: ignore[misc]  # frozen: a snapshot, not a live view


def test_a_refused_pump_call_shows_in_health_and_reaping_goes_on(queue: Queue, client: redis.Redis) -> None:
    client.set(queue.keys.schedule, b"not a sorted set")  # promote is refused every round; reap is not
    jid = _abandoned(queue)
    settled: list[tuple[str, int, str]] = []
    worker = Worker(queue, lambda job: None, _settings(), on_settled=_recorder(settled))

    with _running(worker):
        assert wait_until(lambda: settled != [] and worker.health().pump_failures >= 3, 10)
        assert worker.health().pumps_alive

    health = worker.health()
    assert settled == [(jid, 2, "completed")]
    assert worker.stats.reaped == 1
    # Every pump round had its promote refused, one error each; the claims had none.
    assert health.pump_failures == health.pump_rounds == health.errors == worker.stats.errors
    assert health.last_error is not None and health.last_error.startswith("promote: KeyspaceDamageError: ")


# The thread ending on SystemExit is this test's point; pytest reports any exception that ends a thread.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_system_exit_in_a_pump_round_ends_the_thread_and_health_shows_it(
        queue: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    """What is not an Exception is not the pumps' to swallow: the thread ends, uncounted, and says so."""
    send = pipeline.send

    def exiting(queue: Queue, calls: Sequence[ScriptCall], **kw: Any) -> list[Any]:
        if calls and calls[0].verb == "reap":
            raise SystemExit("the pump thread is told to end")
        return send(queue, calls, **kw)

    monkeypatch.setattr(pipeline, "send", exiting)
    worker = Worker(queue, lambda job: None, _settings())

    with _running(worker):
        assert wait_until(lambda: worker.health().rounds >= 3 and not worker.health().pumps_alive, 10)
        health = worker.health()
        assert health.running and not health.pumps_alive
        assert (health.pump_rounds, health.pump_failures, health.errors, health.last_error) == (0, 0, 0, None)


def test_health_of_a_worker_without_pumps_says_so(queue: Queue) -> None:
    worker = Worker(queue, lambda job: None, _settings(pumps=False))

    with _running(worker):
        assert wait_until(lambda: worker.health().rounds >= 3, 10)
        health = worker.health()
        assert health.running and not health.pumps_alive  # pumps off: the thread never starts
        assert (health.pump_rounds, health.pump_failures, health.errors, health.last_error) == (0, 0, 0, None)

    assert not worker.health().running


def test_a_handler_may_read_its_workers_health(queue: Queue) -> None:
    """health() takes no lock the rounds hold: a handler, or on_settled, may call it."""
    seen: list[WorkerHealth] = []

    def handle(job: Job) -> None:
        seen.append(worker.health())

    worker = Worker(queue, handle, _settings(burst=True, pumps=False))
    assert queue.enqueue(mint(), b"x") == "enqueued"
    worker.run()
    assert len(seen) == 1 and seen[0].running and seen[0].rounds == 1
