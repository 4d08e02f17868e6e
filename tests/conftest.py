"""Fixtures: real servers of each build, started once per session on
loopback ports the launcher picks."""

from __future__ import annotations

import secrets
from typing import Iterator

import pytest
import redis

from echomq import Queue
from echomq_bench.servers import DEFAULT_SPECS, start

BUILDS = list(DEFAULT_SPECS)


@pytest.fixture(scope="session", params=BUILDS)
def server(request: pytest.FixtureRequest) -> Iterator[object]:
    srv = start(request.param)
    yield srv
    srv.stop()


@pytest.fixture
def client(server: object) -> Iterator[redis.Redis]:
    c = server.client()  # type: ignore[attr-defined]
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def queue(client: redis.Redis) -> Queue:
    return Queue(client, f"t-{secrets.token_hex(3)}", max_attempts=2)


def snapshot(client: redis.Redis) -> dict[bytes, object]:
    """Every key with its type and contents: what 'no key changed' compares."""
    out: dict[bytes, object] = {}
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        if kind == b"zset":
            out[key] = ("zset", client.zrange(key, 0, -1, withscores=True))
        elif kind == b"hash":
            out[key] = ("hash", client.hgetall(key))
        else:
            out[key] = (kind, client.dump(key))
    return out
