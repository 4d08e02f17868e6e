"""The fault proxy: each fault does what it says, seen through a real
redis-py client and a real server, and goes away when cleared."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq_bench.faults.proxy import FaultProxy
from tests.helpers import wait_until


def _client(proxy: FaultProxy, timeout: float = 2.0) -> redis.Redis:
    """A client that never resends, so each fault's first effect is what it sees."""
    return redis.Redis(port=proxy.port, socket_timeout=timeout, socket_connect_timeout=timeout,
                       retry=Retry(NoBackoff(), 0))


def _ping_s(client: redis.Redis) -> float:
    t0 = time.monotonic()
    assert client.ping() is True
    return time.monotonic() - t0


def test_latency_adds_to_each_direction_and_lifts(proxy: FaultProxy) -> None:
    c = _client(proxy)
    assert _ping_s(c) < 0.05
    proxy.latency(40)
    assert min(_ping_s(c) for _ in range(3)) >= 0.080  # 40 ms out, 40 ms back
    proxy.clear()
    assert min(_ping_s(c) for _ in range(3)) < 0.04


def test_jitter_never_reorders_replies(proxy: FaultProxy) -> None:
    c = _client(proxy)
    proxy.latency(2, jitter_ms=20)
    pipe = c.pipeline(transaction=False)
    for i in range(200):
        pipe.echo(str(i))
    assert pipe.execute() == [str(i).encode() for i in range(200)]


def test_bandwidth_cap_slows_a_large_value(proxy: FaultProxy) -> None:
    c = _client(proxy, timeout=10)
    value = b"x" * 200_000
    c.set("big", value)
    proxy.bandwidth(400_000)  # bytes per second: half a second for the value
    t0 = time.monotonic()
    assert c.get("big") == value
    assert time.monotonic() - t0 >= 0.45
    proxy.bandwidth(None)
    t0 = time.monotonic()
    assert c.get("big") == value
    assert time.monotonic() - t0 < 0.2


def test_reset_mid_call_reaches_the_client_as_a_connection_error(proxy: FaultProxy) -> None:
    c = _client(proxy)
    c.ping()
    proxy.latency(400)  # keep the call in flight while the reset comes
    threading.Timer(0.1, proxy.reset).start()
    with pytest.raises(redis.exceptions.ConnectionError, match="reset by peer"):
        c.ping()
    proxy.clear()
    assert c.ping() is True  # a new connection through the proxy works
    assert proxy.counts["resets"] == 1


def test_reset_is_an_rst_not_a_close(proxy: FaultProxy) -> None:
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=2) as sock:
        sock.sendall(b"PING\r\n")
        assert sock.recv(16) == b"+PONG\r\n"
        assert proxy.reset() == 1
        with pytest.raises(ConnectionResetError):
            sock.recv(16)


def test_a_reset_reply_is_lost_but_the_call_ran(proxy: FaultProxy, client: redis.Redis) -> None:
    c = _client(proxy)
    c.ping()
    proxy.drop_next_reply()
    with pytest.raises(redis.exceptions.ConnectionError):
        c.incr("landed")
    assert client.get("landed") == b"1"
    assert proxy.counts["replies_dropped"] == 1


def test_blackhole_times_calls_out_then_heals(proxy: FaultProxy, client: redis.Redis) -> None:
    c = _client(proxy, timeout=0.3)
    c.ping()
    proxy.blackhole(1.0)
    t0 = time.monotonic()
    with pytest.raises(redis.exceptions.TimeoutError):
        c.set("late", "1")
    # What was sent into the partition is held, not dropped: it runs once it heals.
    assert client.get("late") is None
    assert wait_until(lambda: client.get("late") == b"1", 3.0)
    assert time.monotonic() - t0 >= 0.95
    assert _client(proxy).ping() is True


def test_blackhole_holds_new_connections(proxy: FaultProxy) -> None:
    proxy.blackhole(0.8)
    with pytest.raises(redis.exceptions.TimeoutError):
        _client(proxy, timeout=0.3).ping()
    time.sleep(0.6)  # with the 0.3 s timeout, past the proxy's own 0.8 s timer; no lease is involved
    assert _client(proxy).ping() is True


def test_half_open_closes_the_server_side_and_silences_the_client(proxy: FaultProxy, client: redis.Redis) -> None:
    c = _client(proxy, timeout=0.4)
    c.client_setname("half-open-victim")
    assert "half-open-victim" in [x["name"] for x in client.client_list()]
    assert proxy.half_open() == 1
    assert wait_until(lambda: "half-open-victim" not in [x["name"] for x in client.client_list()], 2.0)
    with pytest.raises(redis.exceptions.TimeoutError):  # silence, not a reset
        c.ping()
    assert _client(proxy).ping() is True  # new connections are not affected


def test_bad_fault_settings_are_refused(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="latency and jitter must be >= 0 ms, got -1 and 0"):
        proxy.latency(-1)
    with pytest.raises(ValueError, match="bandwidth must be > 0 bytes/s or None, got 0"):
        proxy.bandwidth(0)
    assert proxy.faults.latency_s == 0 and proxy.faults.bytes_per_s is None
