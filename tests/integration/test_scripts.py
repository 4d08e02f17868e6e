"""Script discovery, includes, and the transparent reload."""

from __future__ import annotations

from pathlib import Path

import redis

from echomq import Queue, mint
from echomq._instrument import discover
from tests.helpers import server_ms, write_lua


def test_scripts_load_at_connect(client: redis.Redis) -> None:
    client.script_flush()
    q = Queue(client, "loaded")
    assert all(client.script_exists(*[q.scripts.sha(v) for v in q.scripts.sources]))


def test_reload_after_script_flush(queue: Queue, client: redis.Redis) -> None:
    queue.enqueue(mint(), b"x")
    client.script_flush()
    job = queue.claim(lease_ms=5_000)
    assert job is not None and queue.complete(job.id, job.token) == "ok"


def test_reload_after_server_restart() -> None:
    from echomq_bench.servers import start

    for build in ("redis", "valkey"):
        srv = start(build)
        try:
            client = srv.client()
            q = Queue(client, "restart")
            q.enqueue(mint(), b"x")
            srv.restart()
            # No persistence: the server is empty and has no scripts.
            assert q.pending_size() == 0
            q.enqueue(mint(), b"y")
            job = q.claim(lease_ms=5_000)
            assert job is not None and job.payload == b"y"
        finally:
            srv.stop()


def test_nested_include_used_twice_is_expanded_once(tmp_path: Path, client: redis.Redis) -> None:
    folder = write_lua(tmp_path / "lua", {"probe-1.lua": '--- @include "outer"\n--- @include "inner"\n'
                                                           "return outer() + inner()\n"},
                       {"inner": "local function inner() return 1 end\n",
                        "outer": '--- @include "inner"\nlocal function outer() return inner() + 10 end\n'})
    text = discover(folder)["probe"].text
    assert text.count("local function inner") == 1 and "@include" not in text
    assert text.index("local function inner") < text.index("local function outer")
    assert client.eval(text, 1, "k") == 12


def test_claim_deadline_and_retry_run_at_are_server_ms(queue: Queue, client: redis.Redis) -> None:
    for _ in range(2):
        queue.enqueue(mint(), b"p")
    before = server_ms(client)
    job = queue.claim(lease_ms=5_000)
    assert job is not None
    deadline = client.zscore(queue.keys.active, job.id)
    assert before + 5_000 <= deadline <= server_ms(client) + 5_000
    before = server_ms(client)
    assert queue.retry(job.id, job.token, "e", delay_ms=700) == "scheduled"
    run_at = client.zscore(queue.keys.schedule, job.id)
    assert before + 700 <= run_at <= server_ms(client) + 700


def test_claim_bumps_attempts_as_an_integer(queue: Queue, client: redis.Redis) -> None:
    """claim reads and rewrites attempts instead of HINCRBY: the row must
    still hold plain integer text, exact even far above any real count."""
    jid = mint()
    queue.enqueue(jid, b"p")
    job = queue.claim(lease_ms=5_000)
    assert job is not None and job.token == 1
    assert client.hmget(queue.keys.job(jid), "state", "attempts") == [b"active", b"1"]
    big = mint()
    queue.enqueue(big, b"q")
    client.hset(queue.keys.job(big), "attempts", 2**40)
    again = queue.claim(lease_ms=5_000)
    assert again is not None and (again.id, again.token) == (big, 2**40 + 1)
    assert client.hget(queue.keys.job(big), "attempts") == str(2**40 + 1).encode()
    assert client.hincrby(queue.keys.job(big), "attempts", 0) == 2**40 + 1
