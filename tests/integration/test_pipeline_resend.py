"""A pipeline's one resend, of the calls answered NOSCRIPT, failing: on a real
server through the fault proxy, the failure injected on the client side.

The scripts are flushed and only complete's is loaded again, so in a
pipeline [complete of a claimed job, claim] the complete runs and the
claim is answered NOSCRIPT (it ran nothing). The reload and resend of the
claim then meet a connection that is down: before the reload, between the
reload and the resend (connecting for it fails), or after the resend was
written (its reply is lost). The complete's reply was read in the first
send and stands each time; the claim is never sent when the resend never
went out, and lost when it did."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator

import pytest
import redis
from redis.backoff import ConstantBackoff
from redis.retry import Retry

from echomq import Job, Queue, ServerUnavailableError, Worker, WorkerSettings, mint
from echomq._instrument import verbs
from echomq.errors import RepliesLostError
from echomq.pipeline import send, send_calls
from echomq._instrument import Scripts, discover
from echomq_bench.faults.proxy import FaultProxy
from echomq_bench.load.calls import RedisCalls

# When the connection goes down, against the reload: "before" it (the reload
# fails), "after" it (connecting for the resend fails), or "written" (the
# resend goes out and its reply is lost).
WHEN_NOT_SENT = ["before", "after"]


@pytest.fixture
def q(proxy: FaultProxy, client: redis.Redis) -> Iterator[Queue]:
    # redis-py's retries stay on (short waits, so that a refused connect fails fast):
    # the pipeline must hold its own rule whatever the client's settings.
    c = redis.Redis(port=proxy.port, retry=Retry(ConstantBackoff(0.01), 2))
    yield Queue(c, f"resend-{secrets.token_hex(3)}", max_attempts=3)
    c.close()
    Scripts(client)  # the session's server gets every script back for the tests after


def _only_complete_loaded(client: redis.Redis) -> None:
    """The scripts flushed, then complete's alone loaded again: complete runs, claim gets NOSCRIPT."""
    client.script_flush()
    client.script_load(discover()["complete"].text)


def _cut(proxy: FaultProxy, q: Queue) -> None:
    """The connection down for good: the proxy gone (a connect is refused) and
    the pooled connection dropped, so that nothing is written into a dead socket."""
    proxy.stop()
    q.client.connection_pool.disconnect()


def _fail_reload(monkeypatch: pytest.MonkeyPatch, q: Queue, proxy: FaultProxy, when: str,
                 then: Callable[[], None] = lambda: None) -> None:
    """The next reload of q's scripts meets the fault `when` says; `then` runs after it."""
    real = q.scripts.load

    def load(c: redis.Redis | redis.RedisCluster) -> None:
        monkeypatch.setattr(q.scripts, "load", real)  # once
        try:
            if when == "before":
                _cut(proxy, q)
            real(c)
            if when == "after":
                _cut(proxy, q)
            elif when == "written":
                proxy.drop_next_reply()
        finally:
            then()

    monkeypatch.setattr(q.scripts, "load", load)


def _two_jobs_one_claimed(q: Queue) -> tuple[Job, str]:
    first, second = mint(), mint()
    for jid in (first, second):
        assert q.enqueue(jid, b"x") == "enqueued"
    job = q.claim(30_000)
    assert job is not None and job.id == first
    return job, second


@pytest.mark.parametrize("when", WHEN_NOT_SENT)
def test_a_resend_that_never_went_out_leaves_the_first_sends_replies(
        monkeypatch: pytest.MonkeyPatch, proxy: FaultProxy, client: redis.Redis, q: Queue, when: str) -> None:
    job, waiting = _two_jobs_one_claimed(q)
    _only_complete_loaded(client)
    _fail_reload(monkeypatch, q, proxy, when)

    calls = [verbs.complete(q.keys, job.id, job.token), verbs.claim(q.keys, 30_000)]
    done, claim = send_calls(q.client, q.scripts, calls)

    assert done == b"ok"
    assert client.exists(q.keys.job(job.id)) == 0  # the complete landed
    # The claim was never sent: no reply was lost, it ran nothing.
    assert isinstance(claim, ServerUnavailableError) and not isinstance(claim, RepliesLostError)
    assert [m.decode() for m in client.zrange(q.keys.pending, 0, -1)] == [waiting]
    assert client.zcard(q.keys.active) == 0
    assert client.hget(q.keys.job(waiting), "attempts") == b"0"


def test_a_resend_that_lost_its_reply_reports_only_its_calls_lost(
        monkeypatch: pytest.MonkeyPatch, proxy: FaultProxy, client: redis.Redis, q: Queue) -> None:
    job, waiting = _two_jobs_one_claimed(q)
    _only_complete_loaded(client)
    _fail_reload(monkeypatch, q, proxy, "written")

    with pytest.raises(RepliesLostError) as caught:
        send(q, [verbs.complete(q.keys, job.id, job.token), verbs.claim(q.keys, 30_000)])

    assert proxy.counts["replies_dropped"] == 1
    assert caught.value.replies[0] == b"ok" and caught.value.lost == (1,)
    assert client.exists(q.keys.job(job.id)) == 0
    # The resent claim ran: its job is leased to nobody, and reap returns it when the lease ends.
    assert [m.decode() for m in client.zrange(q.keys.active, 0, -1)] == [waiting]
    assert client.hget(q.keys.job(waiting), "attempts") == b"1"


def _round(monkeypatch: pytest.MonkeyPatch, proxy: FaultProxy, client: redis.Redis, q: Queue,
           when: str) -> tuple[Worker, list[tuple[str, str]], str, str]:
    """A Worker whose first settle pipeline, [complete, claim], meets the fault `when` says."""
    settled: list[tuple[str, str]] = []
    first, second = mint(), mint()
    for jid in (first, second):
        assert q.enqueue(jid, b"x") == "enqueued"

    def handle(job: Job) -> None:
        if job.id == first:
            _only_complete_loaded(client)
            # With the connection gone for good, the Worker would poll forever: stop it
            # once the round's claim is built, during the reload.
            _fail_reload(monkeypatch, q, proxy, when, worker.stop if when != "written" else lambda: None)

    worker = Worker(q, handle, WorkerSettings(handle_signals=False, pumps=False, burst=True, poll_ms=10, batch=1),
                    on_settled=lambda job, outcome: settled.append((job.id, outcome)))
    worker.run()
    return worker, settled, first, second


@pytest.mark.parametrize("when", WHEN_NOT_SENT)
def test_a_worker_counts_a_complete_that_landed_before_a_failed_resend_as_completed(
        monkeypatch: pytest.MonkeyPatch, proxy: FaultProxy, client: redis.Redis, q: Queue, when: str) -> None:
    worker, settled, done, waiting = _round(monkeypatch, proxy, client, q, when)

    assert settled == [(done, "completed")]
    s = worker.stats
    # The claim that rode with the complete was never sent: an error, not resent.
    assert (s.claimed, s.completed, s.unsettled, s.lost, s.unknown, s.errors) == (1, 1, 0, 0, 0, 1)
    assert client.exists(q.keys.job(done)) == 0
    assert [m.decode() for m in client.zrange(q.keys.pending, 0, -1)] == [waiting]  # the claim never ran


def test_a_worker_whose_resent_claim_lost_its_reply_completes_the_job_and_leaves_the_claim_to_reap(
        monkeypatch: pytest.MonkeyPatch, proxy: FaultProxy, client: redis.Redis, q: Queue) -> None:
    worker, settled, done, waiting = _round(monkeypatch, proxy, client, q, "written")

    assert proxy.counts["replies_dropped"] == 1
    assert settled == [(done, "completed")]
    s = worker.stats
    # The lost claim is an error, not resent; the next claim alone finds the queue empty.
    assert (s.claimed, s.completed, s.unsettled, s.lost, s.unknown, s.errors) == (1, 1, 0, 0, 0, 1)
    assert [m.decode() for m in client.zrange(q.keys.active, 0, -1)] == [waiting]
    assert client.zcard(q.keys.pending) == 0


def test_a_single_call_answered_noscript_is_loaded_and_sent_again(client: redis.Redis, q: Queue) -> None:
    calls = RedisCalls(q.client)
    job = mint()
    assert q.enqueue(job, b"x") == "enqueued"
    client.script_flush()
    assert calls.call(verbs.claim(q.keys, 30_000)) == [job.encode(), b"x", 1]
    assert all(client.script_exists(*[q.scripts.sha(v) for v in q.scripts.sources]))


def test_a_single_call_whose_reply_was_lost_is_not_sent_again(proxy: FaultProxy, client: redis.Redis,
                                                              q: Queue) -> None:
    """The engine's one call goes out once though the client's retries are on:
    a claim resent after its reply was lost would lease a second job."""
    first, second = mint(), mint()
    for job in (first, second):
        assert q.enqueue(job, b"x") == "enqueued"
    calls = RedisCalls(q.client)
    proxy.drop_next_reply()
    with pytest.raises(RepliesLostError) as caught:
        calls.call(verbs.claim(q.keys, 30_000))
    assert (caught.value.replies, caught.value.lost) == ([None], (0,))
    assert proxy.counts["replies_dropped"] == 1
    assert [m.decode() for m in client.zrange(q.keys.active, 0, -1)] == [first]
    assert [m.decode() for m in client.zrange(q.keys.pending, 0, -1)] == [second]
