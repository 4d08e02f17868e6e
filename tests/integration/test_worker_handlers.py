"""What a Worker makes of its handler, on each build: what the handler returns
and whatever it raises.

A plain handler that returns an awaitable has it run to its end before the
job counts as done; one that returns a generator or an async generator fails
its job, whose body never ran, and never completes it. An exception a handler
raises fails that job alone, however broken its text, and the rounds go on.

Each Worker here drains in burst mode without pumps, so a retried job stays
in the schedule where the test reads it, and is not claimed again.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis

from echomq import Job, Queue, Worker, WorkerSettings, mint


def _enqueue(queue: Queue, n: int) -> list[str]:
    ids = [mint() for _ in range(n)]
    for jid in ids:
        assert queue.enqueue(jid, jid.encode()) == "enqueued"
    return ids


def _drain(queue: Queue, handler: Callable[[Job], Any], concurrency: int) -> tuple[Worker, list[tuple[str, str]]]:
    """Run `handler` on every pending job, then return: the Worker and each job's outcome."""
    settled: list[tuple[str, str]] = []
    settings = WorkerSettings(concurrency=concurrency, burst=True, pumps=False, handle_signals=False)
    worker = Worker(queue, handler, settings, on_settled=lambda job, outcome: settled.append((job.id, outcome)))
    worker.run()
    return worker, settled


def _last_error(client: redis.Redis, queue: Queue, job_id: str) -> str:
    raw = client.hget(queue.keys.job(job_id), "last_error")
    assert isinstance(raw, bytes), f"{job_id} has no last_error"
    return raw.decode("utf-8")  # strict: the Worker writes valid UTF-8 whatever the exception held


# -- what a handler returns ------------------------------------------------------------


def _over_a_lambda(body: Callable[[Job], Awaitable[None]]) -> Callable[[Job], object]:
    return lambda job: body(job)


def _under_a_sync_decorator(body: Callable[[Job], Awaitable[None]]) -> Callable[[Job], object]:
    @functools.wraps(body)
    def traced(job: Job) -> object:  # a sync wrapper, as a tracing or retry decorator would be
        return body(job)
    return traced


@pytest.mark.parametrize("wrap", [_over_a_lambda, _under_a_sync_decorator])
def test_a_sync_handler_that_returns_a_coroutine_has_its_body_run(
        wrap: Callable[[Callable[[Job], Awaitable[None]]], Callable[[Job], object]],
        queue: Queue, client: redis.Redis) -> None:
    ids = _enqueue(queue, 3)
    ran: list[str] = []

    async def body(job: Job) -> None:
        await asyncio.sleep(0)
        ran.append(job.id)

    worker, settled = _drain(queue, wrap(body), concurrency=2)

    assert sorted(ran) == sorted(ids)
    assert sorted(settled) == sorted((jid, "completed") for jid in ids)
    assert (worker.stats.completed, worker.stats.retried) == (3, 0)
    assert not client.exists(*(queue.keys.job(jid) for jid in ids))


def _generator(ran: list[str]) -> Callable[[Job], Iterator[None]]:
    def handle(job: Job) -> Iterator[None]:
        ran.append(job.id)
        yield

    return handle


def _async_generator(ran: list[str]) -> Callable[[Job], AsyncIterator[None]]:
    async def handle(job: Job) -> AsyncIterator[None]:
        ran.append(job.id)
        yield

    return handle


@pytest.mark.parametrize("make", [_generator, _async_generator])
def test_a_handler_that_returns_a_generator_fails_its_jobs_and_never_completes_them(
        make: Callable[[list[str]], Callable[[Job], object]], queue: Queue, client: redis.Redis) -> None:
    ids = _enqueue(queue, 3)
    ran: list[str] = []

    worker, settled = _drain(queue, make(ran), concurrency=3)

    assert ran == []  # the Worker did not iterate it: the body never ran
    assert sorted(settled) == sorted((jid, "retried") for jid in ids)
    assert (worker.stats.completed, worker.stats.retried) == (0, 3)
    assert sorted(client.zrange(queue.keys.schedule, 0, -1)) == sorted(jid.encode() for jid in ids)
    for jid in ids:
        assert "generator" in _last_error(client, queue, jid)


# -- what a handler raises -------------------------------------------------------------


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


FAILURES: dict[str, tuple[Callable[[], BaseException], str]] = {
    # name: (the exception, what last_error starts with)
    "cancelled": (asyncio.CancelledError, "CancelledError"),
    "str raises": (UnprintableError, "UnprintableError"),
    "lone surrogate": (lambda: ValueError("payload \udcff undecodable"), "ValueError: payload "),
}


def _failing_first(first: str, exc: Callable[[], BaseException], is_async: bool) -> Callable[[Job], object]:
    def handle(job: Job) -> None:
        if job.id == first:
            raise exc()

    async def handle_async(job: Job) -> None:
        await asyncio.sleep(0)
        handle(job)

    return handle_async if is_async else handle


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("failure", list(FAILURES))
def test_whatever_a_handler_raises_retries_its_job_and_the_rounds_go_on(
        failure: str, is_async: bool, queue: Queue, client: redis.Redis) -> None:
    first, *rest = _enqueue(queue, 3)
    exc, starts = FAILURES[failure]

    # One job a round: the two after the failing one are claimed in rounds of their own.
    worker, settled = _drain(queue, _failing_first(first, exc, is_async), concurrency=1)

    assert settled == [(first, "retried"), *((jid, "completed") for jid in rest)]
    assert (worker.stats.rounds, worker.stats.completed, worker.stats.retried) == (4, 2, 1)
    assert client.zrange(queue.keys.schedule, 0, -1) == [first.encode()]
    assert _last_error(client, queue, first).startswith(starts)
    assert not client.exists(*(queue.keys.job(jid) for jid in rest)) and queue.pending_size() == 0


# -- what ends the Worker --------------------------------------------------------------


@pytest.mark.parametrize("ending", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("concurrency", [1, 2])
def test_an_exception_that_ends_the_worker_settles_the_handled_jobs_first(
        client: redis.Redis, queue: Queue, ending: type[BaseException], concurrency: int) -> None:
    """A round of four: the first returns, the second ends the Worker. The
    handled jobs are settled before run() raises it again, and no job the
    round had not started is run: it waits for its lease."""
    ids = _enqueue(queue, 4)
    ran: list[str] = []

    def handler(job: Job) -> None:
        ran.append(job.id)
        if job.id == ids[1]:
            raise ending("the operator stops the worker")

    settled: list[tuple[str, str]] = []
    settings = WorkerSettings(concurrency=concurrency, batch=4, burst=True, pumps=False, handle_signals=False)
    worker = Worker(queue, handler, settings, on_settled=lambda job, outcome: settled.append((job.id, outcome)))
    with pytest.raises(ending):
        worker.run()

    outcomes = dict(settled)
    assert outcomes[ids[0]] == "completed" and outcomes[ids[1]] == "retried"
    assert set(outcomes) == set(ids)  # every job of the round is accounted for
    for jid in ids[2:]:
        # Run before the interrupt (on another thread) and completed, or never started and left to its lease.
        assert outcomes[jid] == ("completed" if jid in ran else "unsettled")
    assert ids[2] not in ran or concurrency > 1
    assert not client.exists(queue.keys.job(ids[0]))
    assert client.zscore(queue.keys.schedule, ids[1]) is not None
    unsettled = [jid for jid, outcome in settled if outcome == "unsettled"]
    assert all(client.zscore(queue.keys.active, jid) is not None for jid in unsettled)
    assert client.zcard(queue.keys.pending) == 0  # the stopping round sent no claims
