"""A server that is not there: a clear error naming where, in bounded time."""

from __future__ import annotations

import socket
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq import Queue, ServerUnavailableError


def test_unreachable_server_is_a_clear_error_in_bounded_time() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # No retries: this checks that the refusal itself is prompt and clear, not
    # how long redis-py's default backoff waits before giving up.
    dead = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    started = time.monotonic()
    with pytest.raises(ServerUnavailableError) as info:
        Queue(dead, "jobs")
    assert f"127.0.0.1:{port}" in str(info.value)
    assert time.monotonic() - started < 5
