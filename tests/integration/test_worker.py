"""echomq.Worker on each build: a drain, its round trips, a stop, retries
into the dead set, a zombie, a worker killed mid-batch and one stopped by
SIGTERM mid-batch.

Round trips are counted on the client, as the verbs of each pipeline the
Worker hands to `echomq.pipeline.send` (one pipeline, one round trip), and
the calls on the server (EVALSHA in commandstats). The server's own count
of reads (INFO total_reads_processed) is not exact: TCP may deliver one
pipeline in several reads, and the INFO calls that read it are reads too.

"Exactly once" is read two ways: the completion log (each Worker's
on_settled, or the child's log file) names every job completed once, and
the server holds nothing of the queue afterwards (completion deletes the
row; a job still pending, active, scheduled or dead would show).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import pytest
import redis

from echomq import InvalidArgumentError, Job, Queue, Worker, WorkerSettings, mint
from echomq._instrument import ScriptCall, pipeline
from echomq_bench.peers.runner import child_url
from echomq_bench.servers import EmbeddedServer
from tests.helpers import ROOT, evalsha_calls, server_ms, wait_until


@pytest.fixture
def pipelines(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The verbs of each pipeline sent through echomq.pipeline.send, in order; each is sent as it would be."""
    sent: list[list[str]] = []
    send = pipeline.send

    def recorded(queue: Queue, calls: Sequence[ScriptCall], **kw: Any) -> list[Any]:
        sent.append([call.verb for call in calls])
        return send(queue, calls, **kw)

    monkeypatch.setattr(pipeline, "send", recorded)
    return sent


def _enqueue(queue: Queue, n: int) -> list[str]:
    ids = [mint() for _ in range(n)]
    for jid in ids:
        assert queue.enqueue(jid, jid.encode()) == "enqueued"
    return ids


def _queue_keys(client: redis.Redis, queue: Queue) -> list[bytes]:
    return sorted(client.scan_iter(match=queue.keys.base + "*", count=1000))


def _settings(**kw: Any) -> WorkerSettings:
    return WorkerSettings(handle_signals=False, **kw)


def test_a_batch_drains_each_job_completed_once(queue: Queue, client: redis.Redis,
                                                pipelines: list[list[str]]) -> None:
    ids = _enqueue(queue, 23)
    client.config_resetstat()
    ran: list[str] = []
    settled: list[tuple[str, str]] = []
    worker = Worker(queue, lambda job: ran.append(job.id), _settings(concurrency=4, batch=5, burst=True),
                    on_settled=lambda job, outcome: settled.append((job.id, outcome)))

    stats = worker.run()

    assert sorted(ran) == sorted(ids)
    assert sorted(settled) == sorted((jid, "completed") for jid in ids)
    assert (stats.rounds, stats.claimed, stats.completed) == (6, 23, 23)
    assert (stats.retried, stats.dead, stats.lost, stats.unsettled, stats.errors) == (0, 0, 0, 0, 0)
    assert _queue_keys(client, queue) == []
    # Six rounds of five pipelined claims (the last finds nothing) and one complete per job.
    assert evalsha_calls(client) == 6 * 5 + 23
    # Each round's completes carry the next round's claims: six round trips, not eleven.
    assert pipelines == [["claim"] * 5] + [["complete"] * 5 + ["claim"] * 5] * 4 + [["complete"] * 3 + ["claim"] * 5]


def test_a_drain_of_one_job_per_round_makes_one_round_trip_per_job(queue: Queue, client: redis.Redis,
                                                                    pipelines: list[list[str]]) -> None:
    ids = _enqueue(queue, 20)
    client.config_resetstat()
    ran: list[str] = []
    stats = Worker(queue, lambda job: ran.append(job.id), _settings(batch=1, burst=True, pumps=False)).run()

    assert ran == ids  # claims are FIFO
    # The first claim alone, then each job's complete with the next claim; the last claim finds nothing.
    assert pipelines == [["claim"]] + [["complete", "claim"]] * 20
    assert evalsha_calls(client) == 1 + 2 * 20
    assert (stats.rounds, stats.claimed, stats.completed, stats.errors) == (21, 20, 20, 0)
    assert _queue_keys(client, queue) == []


def test_stop_sends_the_last_settles_without_claims(queue: Queue, client: redis.Redis,
                                                     pipelines: list[list[str]]) -> None:
    ids = _enqueue(queue, 10)
    ran: list[str] = []

    def handle(job: Job) -> None:
        ran.append(job.id)
        if len(ran) == 3:
            worker.stop()

    worker = Worker(queue, handle, _settings(batch=1, pumps=False))
    stats = worker.run()

    assert ran == ids[:3]
    assert pipelines == [["claim"], ["complete", "claim"], ["complete", "claim"], ["complete"]]
    assert (stats.claimed, stats.completed, stats.errors) == (3, 3, 0)
    # Nothing is leased to nobody: the other seven wait in pending, none ever claimed.
    assert client.zcard(queue.keys.active) == 0
    assert [m.decode() for m in client.zrange(queue.keys.pending, 0, -1)] == ids[3:]
    assert [client.hget(queue.keys.job(jid), "attempts") for jid in ids[3:]] == [b"0"] * 7


def test_jobs_claimed_before_stop_are_run_and_settled(queue: Queue, client: redis.Redis,
                                                      pipelines: list[list[str]]) -> None:
    ids = _enqueue(queue, 5)
    settled: list[tuple[str, str]] = []

    def note(job: Job, outcome: str) -> None:
        settled.append((job.id, outcome))
        worker.stop()  # the pipeline that settled this job has already claimed the next round's

    worker = Worker(queue, lambda job: None, _settings(batch=2, pumps=False), on_settled=note)
    stats = worker.run()

    assert settled == [(jid, "completed") for jid in ids[:4]]
    assert pipelines == [["claim"] * 2, ["complete"] * 2 + ["claim"] * 2, ["complete"] * 2]
    assert (stats.claimed, stats.completed, stats.errors) == (4, 4, 0)
    assert client.zcard(queue.keys.active) == 0
    assert [m.decode() for m in client.zrange(queue.keys.pending, 0, -1)] == ids[4:]


def test_scripts_flushed_before_a_drain_are_loaded_again(queue: Queue, client: redis.Redis) -> None:
    ids = _enqueue(queue, 4)
    client.script_flush()
    settled: list[tuple[str, str]] = []
    stats = Worker(queue, lambda job: None, _settings(batch=4, burst=True),
                   on_settled=lambda job, outcome: settled.append((job.id, outcome))).run()
    assert sorted(settled) == sorted((jid, "completed") for jid in ids)
    assert (stats.completed, stats.errors, stats.unsettled) == (4, 0, 0)
    assert _queue_keys(client, queue) == []


def test_a_failing_handler_retries_then_goes_dead(client: redis.Redis) -> None:
    queue = Queue(client, f"t-{secrets.token_hex(3)}", max_attempts=2)
    always, once, fine = _enqueue(queue, 3)
    settled: list[tuple[str, int, str]] = []

    def handle(job: Job) -> None:
        if job.id == always or (job.id == once and job.token == 1):
            raise ValueError("boom")

    def note(job: Job, outcome: str) -> None:
        settled.append((job.id, job.token, outcome))
        if sum(o in ("completed", "dead") for _, _, o in settled) == 3:
            worker.stop()

    worker = Worker(queue, handle, _settings(batch=3, retry_base_ms=0, pump_interval_ms=20), on_settled=note)
    timer = threading.Timer(20, worker.stop)  # a worker that never gets there still ends the test
    timer.start()
    stats = worker.run()
    timer.cancel()

    assert sorted(settled) == sorted([(always, 1, "retried"), (always, 2, "dead"), (once, 1, "retried"),
                                      (once, 2, "completed"), (fine, 1, "completed")])
    assert (stats.completed, stats.retried, stats.dead, stats.promoted, stats.reaped) == (2, 2, 1, 2, 0)
    assert client.zrange(queue.keys.dead, 0, -1) == [always.encode()]
    assert client.hgetall(queue.keys.job(always)) == {
        b"state": b"dead", b"attempts": b"2", b"payload": always.encode(), b"last_error": b"ValueError: boom"}
    assert _queue_keys(client, queue) == sorted([queue.keys.dead.encode(), queue.keys.job(always).encode()])


def test_a_zombie_loses_its_lease_and_its_complete_is_refused(queue: Queue, client: redis.Redis) -> None:
    (jid,) = _enqueue(queue, 1)
    started, release = threading.Event(), threading.Event()
    settled: list[tuple[str, str, int, str]] = []

    def stall(job: Job) -> None:
        started.set()
        release.wait(20)

    zombie = Worker(queue, stall, _settings(lease_ms=200, pumps=False, burst=True),
                    on_settled=lambda job, outcome: settled.append(("zombie", job.id, job.token, outcome)))
    zombie_thread = threading.Thread(target=zombie.run)
    zombie_thread.start()
    assert started.wait(10)

    def rescued(job: Job, outcome: str) -> None:
        settled.append(("rescuer", job.id, job.token, outcome))
        rescuer.stop()

    # The rescuer's own pump reaps the zombie's expired lease; nobody calls reap by hand.
    rescuer = Worker(queue, lambda job: None, _settings(pump_interval_ms=50, poll_ms=20), on_settled=rescued)
    timer = threading.Timer(20, rescuer.stop)
    timer.start()
    rescuer.run()
    timer.cancel()
    release.set()
    zombie_thread.join(20)

    assert not zombie_thread.is_alive()
    assert settled == [("rescuer", jid, 2, "completed"), ("zombie", jid, 1, "lost")]
    assert (zombie.stats.claimed, zombie.stats.completed, zombie.stats.lost) == (1, 0, 1)
    assert (rescuer.stats.reaped, rescuer.stats.claimed, rescuer.stats.completed) == (1, 1, 1)
    assert _queue_keys(client, queue) == []


# -- a worker in a process of its own --------------------------------------------


def _start_child(server: EmbeddedServer, queue: Queue, log: Path, **config: Any) -> subprocess.Popen[bytes]:
    config.update(url=child_url(server), queue=queue.name, log=str(log))
    return subprocess.Popen([sys.executable, "-m", "tests.integration.worker_child", json.dumps(config)],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _lines(log: Path, word: str) -> list[str]:
    """The job ids of the log's lines that start with `word`."""
    text = log.read_text() if log.exists() else ""
    return [line.split()[1] for line in text.splitlines() if line.split()[0] == word]


def test_a_worker_killed_mid_batch_loses_no_job(queue: Queue, client: redis.Redis, server: EmbeddedServer,
                                                tmp_path: Path) -> None:
    ids = _enqueue(queue, 20)
    log = tmp_path / "child.log"
    child = _start_child(server, queue, log, batch=5, lease_ms=1000, stall_after=7)
    try:
        # Round one: five completed. Round two: five claimed, the sixth job done, the seventh stalls.
        assert wait_until(lambda: bool(_lines(log, "stall")), 30), log.read_text()
        assert client.zcard(queue.keys.active) == 5
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        child.kill()
    held = [m.decode() for m in client.zrange(queue.keys.active, 0, -1)]
    assert wait_until(lambda: server_ms(client) >= client.zrange(queue.keys.active, -1, -1, withscores=True)[0][1],
                      10)
    assert queue.reap() == 5

    rescued: list[str] = []
    stats = Worker(queue, lambda job: None, _settings(batch=5, burst=True, pumps=False),
                   on_settled=lambda job, outcome: rescued.append(job.id) if outcome == "completed" else None).run()

    crashed = _lines(log, "completed")
    assert len(_lines(log, "ran")) == 7 and len(crashed) == 5
    assert (stats.claimed, stats.completed, stats.lost) == (15, 15, 0)
    # The five the dead worker held came back through reap and were completed by the rescuer.
    assert len(held) == 5 and set(held) <= set(rescued) == set(ids) - set(crashed)
    completions = Counter(crashed + rescued)
    assert sorted(completions) == sorted(ids) and set(completions.values()) == {1}
    assert _queue_keys(client, queue) == []


def test_sigterm_finishes_the_round_in_hand_then_exits(queue: Queue, client: redis.Redis,
                                                       server: EmbeddedServer, tmp_path: Path) -> None:
    ids = _enqueue(queue, 20)
    log = tmp_path / "child.log"
    child = _start_child(server, queue, log, batch=5, lease_ms=30_000, slow_ms=100)
    try:
        # Two jobs into the second round of five.
        assert wait_until(lambda: len(_lines(log, "ran")) >= 7, 30), log.read_text()
        child.send_signal(signal.SIGTERM)
        assert child.wait(30) == 0
    finally:
        child.kill()
    completed = _lines(log, "completed")
    assert len(completed) == len(_lines(log, "ran")) == 10
    assert completed == ids[:10]  # claims are FIFO: the first ten minted
    assert log.read_text().splitlines()[-1] == "stopped"
    assert client.zcard(queue.keys.active) == 0 and queue.pending_size() == 10


def test_bad_handlers_are_refused(queue: Queue) -> None:
    with pytest.raises(InvalidArgumentError, match="handler must be callable, got int"):
        Worker(queue, 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="settings must be a WorkerSettings, got dict"):
        Worker(queue, print, {"batch": 3})  # type: ignore[arg-type]
