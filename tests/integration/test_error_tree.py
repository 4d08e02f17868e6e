"""Every failure a call raises is in the client's error tree, with the outcome
it proves. A refusal (LOADING, BUSY) ran nothing and says so; a reply that
cannot be parsed, or does not come by the caller's deadline, is a lost reply,
judged from the job's row like any other; text with no UTF-8 form is refused
before anything is sent; a server that may evict the queue's own keys is
refused when the Queue is made."""

from __future__ import annotations

import secrets
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest
import redis

from echomq import (EchoMQError, EvictionWarning, InvalidArgumentError, Job, OutcomeUnknownError, Queue,
                    ServerUnavailableError, errors, mint)
from echomq._instrument import pipeline, verbs
from echomq.errors import MalformedReplyError, RepliesLostError
from echomq.outcome import send_all_once
from echomq_bench.faults.proxy import FaultProxy
from echomq_bench.servers import EmbeddedServer
from echomq_bench.servers.base import no_retry

FILL_KEYS = 1000                # keys of 1 KiB of random bytes each in the saved dataset (RDB compresses
                                # repeated bytes, and the server answers clients per bytes loaded)
KEY_LOAD_DELAY_US = 10_000      # per key: a load of 10 s, cut short once the test has made its calls
LOAD_EVENTS_BYTES = 1024        # the least the builds allow: the server answers clients about every key
BOUND_S = 10.0                  # "finishes at all": orders of magnitude above the expected time


@pytest.fixture
def name() -> str:
    return f"tree-{secrets.token_hex(3)}"


def _claimed(q: Queue) -> Job:
    q.enqueue(mint(), b"payload")
    job = q.claim(60_000)
    assert job is not None
    return job


def _evalsha_calls(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


# -- LOADING ------------------------------------------------------------------


def _poll_until_loading(server: EmbeddedServer) -> redis.Redis:
    """A client of the restarted server once it answers LOADING (the old
    process may still answer PONG for a moment)."""
    until = time.monotonic() + BOUND_S
    while time.monotonic() < until:
        admin = server.client(retry=no_retry(), socket_timeout=BOUND_S)
        try:
            admin.ping()
        except redis.exceptions.BusyLoadingError:
            return admin
        except redis.exceptions.ConnectionError:
            pass
        admin.close()
        time.sleep(0.01)
    raise AssertionError(f"{server.name} did not answer LOADING within {BOUND_S} s of its restart")


@contextmanager
def _loading(server: EmbeddedServer) -> Iterator[None]:
    """The server restarted on its saved dataset, each key slowing the load,
    for as long as the block runs; then the load is let run to its end."""
    failed: list[BaseException] = []

    def restart() -> None:
        try:
            server.restart(("--key-load-delay", str(KEY_LOAD_DELAY_US),
                            "--loading-process-events-interval-bytes", str(LOAD_EVENTS_BYTES)))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread below
            failed.append(exc)

    server.start_timeout = FILL_KEYS * KEY_LOAD_DELAY_US / 1e6 + BOUND_S  # restart waits out the whole load
    thread = threading.Thread(target=restart, name="restart-loading", daemon=True)
    thread.start()
    admin = _poll_until_loading(server)
    try:
        yield
    finally:
        admin.config_set("key-load-delay", 0)
        admin.close()
        thread.join(BOUND_S)
    assert not thread.is_alive() and failed == []


def test_a_loading_server_refuses_claim_and_enqueue_and_nothing_runs(fresh_server: EmbeddedServer) -> None:
    client = fresh_server.client()
    q = Queue(client, "loading")
    waiting, refused = mint(), mint()
    q.enqueue(waiting, b"waiting")
    fill = client.pipeline(transaction=False)
    for i in range(FILL_KEYS):
        fill.set(f"fill:{i}", secrets.token_bytes(1024))
    fill.execute()
    client.save()
    with _loading(fresh_server):
        client.connection_pool.disconnect()
        for call in (lambda: q.claim(60_000), lambda: q.enqueue(refused, b"refused")):
            with pytest.raises(ServerUnavailableError) as caught:  # never OutcomeUnknownError
                call()
            assert isinstance(caught.value, errors.ServerBusyError) and caught.value.code == "LOADING"
        # Each call of a pipeline hears its own LOADING: the replies after the first are read too.
        replies = pipeline.send(q, [verbs.claim(q.keys, 60_000), verbs.enqueue(q.keys, refused, b"refused")])
        assert [(type(r).__name__, r.code) for r in replies] == [("ServerBusyError", "LOADING")] * 2
    assert client.zrange(q.keys.pending, 0, -1) == [waiting.encode()]
    assert client.hmget(q.keys.job(waiting), "state", "attempts") == [b"pending", b"0"]
    assert client.exists(q.keys.job(refused)) == 0 and client.zcard(q.keys.active) == 0
    client.close()


# -- BUSY ---------------------------------------------------------------------


def _wait_busy(admin: redis.Redis) -> None:
    until = time.monotonic() + BOUND_S
    while time.monotonic() < until:
        try:
            admin.ping()
        except redis.exceptions.ResponseError as exc:
            assert str(exc).startswith("BUSY"), exc
            return
        time.sleep(0.01)
    raise AssertionError(f"no BUSY within {BOUND_S} s of starting the script")


def test_a_script_running_long_makes_a_claim_server_busy_and_moves_nothing(server: EmbeddedServer,
                                                                             queue: Queue) -> None:
    job_id = mint()
    queue.enqueue(job_id, b"payload")
    admin, looper = server.client(), server.client()
    # busy-reply-threshold's older name, which every build knows
    threshold = next(iter(admin.config_get("lua-time-limit").values()))
    admin.config_set("lua-time-limit", 50)
    ended: list[BaseException] = []

    def loop() -> None:
        try:
            looper.eval("while true do end", 0)
        except redis.exceptions.ResponseError as exc:  # killed: what the test expects
            ended.append(exc)

    thread = threading.Thread(target=loop, name="busy-script", daemon=True)
    thread.start()
    try:
        _wait_busy(admin)
        with pytest.raises(ServerUnavailableError) as caught:
            queue.claim(60_000)
        assert isinstance(caught.value, errors.ServerBusyError) and caught.value.code == "BUSY"
    finally:
        with suppress(redis.exceptions.ResponseError):  # NOTBUSY: the script never started
            admin.script_kill()
        thread.join(BOUND_S)
        admin.config_set("lua-time-limit", threshold)
        admin.close()
        looper.close()
    assert not thread.is_alive() and "killed" in str(ended[0]).lower()
    assert queue.client.zrange(queue.keys.pending, 0, -1) == [job_id.encode()]
    assert queue.client.zcard(queue.keys.active) == 0


# -- a reply that cannot be parsed --------------------------------------------


def test_an_unparsable_reply_is_a_lost_reply_judged_from_the_row(proxy: FaultProxy, client: redis.Redis,
                                                                  name: str) -> None:
    q = Queue(redis.Redis(port=proxy.port), name)
    job = _claimed(q)
    proxy.corrupt_next_reply()
    assert q.complete(job.id, job.token) == "ok"  # the row is gone while our lease surely runs
    assert proxy.counts["replies_corrupted"] == 1 and client.exists(q.keys.job(job.id)) == 0

    # A Queue that took no lease for the job cannot tell whose complete deleted the row.
    other = _claimed(q)
    stranger = Queue(redis.Redis(port=proxy.port), name)
    proxy.corrupt_next_reply()
    with pytest.raises(EchoMQError) as caught:
        stranger.complete(other.id, other.token)
    assert isinstance(caught.value, OutcomeUnknownError) and client.exists(q.keys.job(other.id)) == 0

    # The Worker's pipelines: every call not heard from is lost, to be judged by its verb.
    third = _claimed(q)
    proxy.corrupt_next_reply()
    with pytest.raises(RepliesLostError) as lost:
        pipeline.send(q, [verbs.complete(q.keys, third.id, third.token), verbs.claim(q.keys, 60_000)])
    assert lost.value.lost == (0, 1) and client.exists(q.keys.job(third.id)) == 0

    # redis-py's own command path (promote, reap, browse) maps it too.
    proxy.corrupt_next_reply()
    with pytest.raises(MalformedReplyError, match="cannot be parsed"):
        q.promote()
    assert proxy.counts["replies_corrupted"] == 4


# -- text with no UTF-8 form ----------------------------------------------------


def test_a_lone_surrogate_in_a_payload_or_error_is_refused_before_anything_is_sent(queue: Queue,
                                                                                   client: redis.Redis) -> None:
    lone = b"\x80".decode("utf-8", "surrogateescape")  # '\udc80': a byte that is not UTF-8, as text
    before = _evalsha_calls(client)
    with pytest.raises(InvalidArgumentError, match="^payload is not valid text"):
        queue.enqueue(mint(), f"bad {lone} payload")
    assert _evalsha_calls(client) == before and client.zcard(queue.keys.pending) == 0

    job = _claimed(queue)
    before = _evalsha_calls(client)
    with pytest.raises(InvalidArgumentError, match="^error is not valid text"):
        queue.retry(job.id, job.token, f"failed on {lone}")
    assert _evalsha_calls(client) == before
    assert client.hmget(queue.keys.job(job.id), "state", "attempts") == [b"active", str(job.token).encode()]


# -- eviction -----------------------------------------------------------------


def test_a_server_that_may_evict_the_queues_keys_is_refused_unless_accepted(client: redis.Redis, name: str) -> None:
    try:
        client.config_set("maxmemory-policy", "allkeys-lru")
        with pytest.raises(EchoMQError) as caught:
            Queue(client, name)
        assert isinstance(caught.value, errors.EvictionPolicyError)
        assert "maxmemory-policy allkeys-lru" in str(caught.value) and "accept_eviction='allkeys-lru'" in str(
            caught.value)
        with pytest.raises(errors.EvictionPolicyError):  # another policy accepted is not this one
            Queue(client, name, accept_eviction="allkeys-lfu")
        with pytest.warns(EvictionWarning, match="maxmemory-policy allkeys-lru, accepted"):
            accepted = Queue(client, name, accept_eviction="allkeys-lru")
        assert accepted.enqueue(mint(), b"payload") == "enqueued"

        client.config_set("maxmemory-policy", "volatile-lru")  # evicts only keys with a TTL: the queue sets none
        with warnings.catch_warnings():
            warnings.simplefilter("error", EvictionWarning)
            Queue(client, name)
    finally:
        client.config_set("maxmemory-policy", "noeviction")


# -- a deadline for the replies -----------------------------------------------


def test_a_reply_not_read_by_the_deadline_is_lost_and_its_connection_dropped(proxy: FaultProxy) -> None:
    target = redis.Redis(port=proxy.port, single_connection_client=True)
    try:
        assert send_all_once(target, [("PING",)], deadline=time.monotonic() + BOUND_S) == [True]
        proxy.blackhole()
        start = time.monotonic()
        with pytest.raises(RepliesLostError, match="deadline") as caught:
            send_all_once(target, [("PING",), ("PING",)], deadline=start + 0.5)
        assert time.monotonic() - start < BOUND_S
        assert caught.value.lost == (0, 1) and caught.value.replies == [None, None]
        assert target.connection is not None and not target.connection.is_connected
    finally:
        proxy.heal()
        target.close()
