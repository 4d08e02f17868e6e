"""Outcomes stay true when completion has deleted the evidence: through the
fault proxy, on a plain redis.Redis with redis-py's default retry on.

Completion deletes the job's row, so a row that is gone proves nothing by
itself: an enqueue resent after its job ran would run it again, and a
complete judged on a server that came back empty would be reported done."""

from __future__ import annotations

import secrets
import threading
from collections import Counter

import pytest
import redis

from echomq import OutcomeUnknownError, Queue, mint
from echomq._instrument import verbs
from echomq_bench.faults.proxy import FaultProxy
from echomq_bench.servers import EmbeddedServer, start
from tests.helpers import wait_until

IN_FLIGHT_MS = 300  # each direction: long enough for a worker to run the job before the reply arrives


@pytest.fixture
def name() -> str:
    return f"lost-{secrets.token_hex(3)}"


class Runner(threading.Thread):
    """A worker on its own connection that claims and completes every job the
    moment it is pending, and counts how often each id ran."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        super().__init__(daemon=True)
        self.queue = Queue(client, name)
        self.runs: Counter[str] = Counter()
        self.ran = threading.Event()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            job = self.queue.claim(30_000)
            if job is None:
                self.done.wait(0.002)
                continue
            self.runs[job.id] += 1
            self.queue.complete(job.id, job.token)
            self.ran.set()

    def __enter__(self) -> Runner:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.done.set()
        self.join()


def _reset_once_it_ran(proxy: FaultProxy, runner: Runner, client: redis.Redis, row: str) -> threading.Thread:
    """The enqueue's reply is held in the proxy until its job has run: reset then.
    The proxy holds nothing back once the request has crossed (its row is there,
    or the job ran already) and before the reply's delay is up; waiting for the
    job itself inside that delay would ask a loaded machine to run it in time."""
    def cut() -> None:
        assert wait_until(lambda: runner.ran.is_set() or client.exists(row) == 1, 5), "the enqueue never ran"
        proxy.blackhole()
        assert runner.ran.wait(5), "the job never ran"
        proxy.reset()
        proxy.clear()
    thread = threading.Thread(target=cut, daemon=True)
    thread.start()
    return thread


def _drain(runner: Runner, client: redis.Redis) -> None:
    """Until the queue has nothing pending or active: whatever a resend put back has run."""
    queue = runner.queue
    for _ in range(500):
        if client.zcard(queue.keys.pending) == 0 and client.zcard(queue.keys.active) == 0:
            return
        runner.done.wait(0.01)
    raise AssertionError("the queue did not drain")


def test_under_the_defaults_a_resent_enqueue_runs_its_job_twice(proxy: FaultProxy, client: redis.Redis,
                                                                 name: str) -> None:
    """The hazard, with the script called the usual way: redis-py resends the
    enqueue after the reset, finds no row (completion deleted it) and the job
    is enqueued anew."""
    q = Queue(redis.Redis(port=proxy.port), name)
    job_id = mint()
    with Runner(client, name) as runner:
        proxy.latency(IN_FLIGHT_MS)
        cut = _reset_once_it_ran(proxy, runner, client, q.keys.job(job_id))
        enqueue = verbs.enqueue(q.keys, job_id, b"x")
        call = q.scripts["enqueue"](keys=enqueue.keys, args=enqueue.args, client=q.client)
        cut.join()
        _drain(runner, client)
    assert call == b"enqueued" and proxy.counts["resets"] >= 1
    assert runner.runs[job_id] == 2


def test_a_lost_enqueue_whose_job_already_ran_is_outcome_unknown_and_runs_once(proxy: FaultProxy,
                                                                                client: redis.Redis,
                                                                                name: str) -> None:
    q = Queue(redis.Redis(port=proxy.port), name)
    job_id = mint()
    with Runner(client, name) as runner:
        proxy.latency(IN_FLIGHT_MS)
        cut = _reset_once_it_ran(proxy, runner, client, q.keys.job(job_id))
        with pytest.raises(OutcomeUnknownError, match="sending it again could run the job twice"):
            q.enqueue(job_id, b"x")
        cut.join()
        _drain(runner, client)
    assert runner.runs[job_id] == 1
    assert client.exists(q.keys.job(job_id)) == 0


def test_a_lost_enqueue_reply_is_read_from_the_row(proxy: FaultProxy, client: redis.Redis, name: str) -> None:
    q = Queue(redis.Redis(port=proxy.port), name)
    ours, taken = mint(), mint()
    Queue(client, name).enqueue(taken, b"theirs")
    proxy.drop_next_reply()
    assert q.enqueue(ours, b"ours") == "enqueued"
    proxy.drop_next_reply()
    assert q.enqueue(taken, b"ours") == "duplicate"
    assert proxy.counts["replies_dropped"] == 2
    assert client.hget(q.keys.job(ours), "payload") == b"ours"
    assert client.hget(q.keys.job(taken), "payload") == b"theirs"
    assert sorted(m.decode() for m in client.zrange(q.keys.pending, 0, -1)) == sorted([ours, taken])


def test_a_complete_lost_before_an_empty_restart_is_outcome_unknown_not_completed(fresh_server: EmbeddedServer,
                                                                                 name: str) -> None:
    """The request is held in a partition; the server restarts empty meanwhile.
    The row is gone and the lease still runs, which alone would read as
    "our complete deleted it"; the server's run id says it was another server."""
    with FaultProxy(fresh_server.host, fresh_server.port) as proxy:
        q = Queue(redis.Redis(port=proxy.port), name)
        q.enqueue(mint(), b"x")
        job = q.claim(60_000)
        assert job is not None
        before = fresh_server.client().info("server")["run_id"]

        def restart_then_heal() -> None:
            fresh_server.restart()
            proxy.heal()
        proxy.blackhole()
        timer = threading.Timer(0.3, restart_then_heal)
        timer.start()
        with pytest.raises(OutcomeUnknownError, match="our lease may have expired"):
            q.complete(job.id, job.token)
        timer.join()
        assert fresh_server.client().info("server")["run_id"] != before
        assert fresh_server.client().dbsize() == 0  # the job is gone: it was never completed


def test_a_complete_lost_after_a_reset_of_the_dataset_is_told_by_the_replication_id(
        fresh_server: EmbeddedServer, request: pytest.FixtureRequest, name: str) -> None:
    """A master made a replica of another server resyncs from it and drops its
    dataset, with the same run id: its replication id changes."""
    other = start(request.node.callspec.params["fresh_server"])
    try:
        with FaultProxy(fresh_server.host, fresh_server.port) as proxy:
            q = Queue(redis.Redis(port=proxy.port), name)
            q.enqueue(mint(), b"x")
            job = q.claim(60_000)
            assert job is not None
            direct = fresh_server.client()
            run_id = direct.info("server")["run_id"]
            direct.replicaof(other.host, other.port)
            assert wait_until(lambda: direct.info("replication").get("master_link_status") == "up"
                              and direct.dbsize() == 0, 10), "the resync never replaced the dataset"
            direct.replicaof("no", "one")
            proxy.drop_next_reply()  # the complete is refused (no row): only its reply is lost
            with pytest.raises(OutcomeUnknownError, match="our lease may have expired"):
                q.complete(job.id, job.token)
            assert direct.info("server")["run_id"] == run_id  # the same process all along
    finally:
        other.stop()
