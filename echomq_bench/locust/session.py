"""One run in one process: its queues, books, gate and background greenlets.

Locust users are the consumers. Around them each process runs what a real
deployment has beside its workers, as the load engine's roles over
`LocustCalls` in background greenlets:

- producers (every load process): enqueue in pipelined batches of --batch,
  either keeping `--backlog` jobs pending per queue or at `--rate` jobs/s
  for the whole run, open loop (a late producer catches up);
- the pump (one per run: on the local runner or the master): a reaper and
  a promoter, each on its own cadence, each draining a queue in up to
  DRAIN_ROUNDS calls of its limit per tick;
- zombies (crash scenario): crashed consumers that wake after their lease
  is gone and complete anyway.

Every call the roles and the zombies make is recorded in the process's
call log (echomq_bench.measurement.calllog), each greenlet a process of its
own; a crash is a nemesis strike on its job, a zombie's complete carries the
fault `zombie`. The coordinator checks the merged call log at the end.

`RunInfo` is what the coordinator decides at test start (run id, server
URL, queue names, how many processes load) and ships to workers inside
Locust's parsed options.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import gevent
from gevent.pool import Group

from echomq import EchoMQError
from echomq_bench.load.engine import Producer, ProducerPolicy, Pump, PumpPolicy
from echomq_bench.load.recorders import LedgerRecorder
from echomq_bench.locust.calls import LocustCalls
from echomq_bench.locust.books import Books, Claimed, Drained, Gate
from echomq_bench.measurement.calllog import CallLog, LoggedCalls
from echomq_bench.locust.options import Settings
from echomq_bench.locust.cluster_wire import ClusterRouter, is_cluster_url
from echomq_bench.locust.wire import AnyWire, ConnectionFactory, QueueWire

__all__ = ["RunInfo", "Session", "RUN_OPTION"]

log = logging.getLogger("echomq.locust")

RUN_OPTION = "echomq_run"  # the parsed_options attribute that carries RunInfo to workers
DRAIN_ROUNDS = 100  # a pump tick drains at most this many full reap (or promote) calls per queue
ZOMBIE_PATIENCE_S = 60.0


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    url: str
    queues: tuple[str, ...]
    load_processes: int

    def to_option(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_option(cls, text: str) -> "RunInfo":
        d = json.loads(text)
        return cls(d["run_id"], d["url"], tuple(d["queues"]), int(d["load_processes"]))

    @classmethod
    def fresh(cls, settings: Settings, url: str, load_processes: int,
              spread: "Callable[[str, int], list[str]] | None" = None) -> "RunInfo":
        """`spread(prefix, count)` picks the names on a cluster (echomq_bench.servers.spread_queues)."""
        run_id = os.urandom(3).hex()
        base = settings.queue or f"locust-{run_id}"
        if settings.queues == 1:
            names: tuple[str, ...] = (base,)
        elif spread is not None:
            names = tuple(spread(f"{base}.", settings.queues))
        else:
            names = tuple(f"{base}.{i}" for i in range(settings.queues))
        return cls(run_id, url, names, max(1, load_processes))


class Session:
    """The process's part of one run."""

    def __init__(self, environment: Any, settings: Settings, run: RunInfo, call_log: Path | None = None) -> None:
        self.environment = environment
        self.settings = settings
        self.run = run
        self.books = Books()
        self.gate = Gate()
        # one connection per greenlet (on a cluster: per greenlet and master)
        self.factory = ClusterRouter(run.url) if is_cluster_url(run.url) else ConnectionFactory(run.url)
        self.scripts = self.factory.scripts()
        s = settings
        self.queues = [QueueWire(n, self.scripts, s.lease_ms) for n in run.queues]
        self.background = Group()
        self.started = time.perf_counter()
        self.drained_at: float | None = None
        self._next_queue = 0
        self.wires: list[AnyWire] = []
        # Enqueue and complete lead with these keys: how an unanswered call names its queue.
        self.queue_names = {key: q.name for q in self.queues for key in (q.keys.pending, q.keys.active)}
        # Greenlets of one process: none is switched out inside the recorder, so it takes no lock.
        self.recorder = LedgerRecorder(self.books.ledger, self.books.counters, self.books.completed,
                                       lock=nullcontext())
        # `call_log` None: a temporary file, shipped to the master with the books.
        self.call_log = CallLog(call_log, chunk=16384)
        self.node = f"{socket.gethostname()}.{os.getpid()}"
        self._actors = itertools.count()

    # -- for users ---------------------------------------------------------

    def client(self, keep: bool = True) -> LocustCalls:
        """A measured client on its own connection (the engine's calls, a
        zombie's complete, the crash notes); kept ones close with the session."""
        wire = self.factory.wire(self.scripts)
        if keep:
            self.wires.append(wire)
        return LocustCalls(self.environment, wire, self.books, self.gate, self.queue_names)

    def recorded(self, calls: LocustCalls, role: str) -> LoggedCalls:
        """The calls of one greenlet, recorded in the call log as a process of their own."""
        return LoggedCalls(calls, self.call_log, self.actor(role), unsent=(Drained,))

    def actor(self, role: str) -> str:
        return f"{self.node}:{role}-{next(self._actors)}"

    def next_queue(self) -> QueueWire:
        """Consumers spread over the queues round-robin."""
        q = self.queues[self._next_queue % len(self.queues)]
        self._next_queue += 1
        return q

    def spawn_zombie(self, q: QueueWire, job: Claimed) -> None:
        self.background.spawn(self._zombie, q, job)

    # -- background greenlets ----------------------------------------------

    def start_producers(self) -> None:
        s = self.settings
        if s.producers == 0:
            return
        policy = self.producer_policy()
        keys = [q.keys for q in self.queues]
        for index in range(s.producers):
            turn = index % len(keys)  # each producer starts on its own queue
            producer = Producer(self.recorded(self.client(), "producer"), keys[turn:] + keys[:turn],
                                policy, self.recorder)
            self.background.spawn(producer.run)

    def producer_policy(self) -> ProducerPolicy:
        s = self.settings
        idle_s = max(1.0, s.idle_wait_ms) / 1000.0  # after a failed round trip: do not spin
        payload = os.urandom(s.payload_bytes)
        if s.enqueue_rate > 0:
            rate = s.enqueue_rate / self.run.load_processes / s.producers
            return ProducerPolicy(rate=rate, batch=s.batch, payload=payload, catch_up_s=float("inf"),
                                  backoff_s=idle_s)
        return ProducerPolicy(backlog=s.backlog, batch=s.batch, refill_max=s.batch, refill_s=idle_s,
                              payload=payload, backoff_s=idle_s)

    def start_pump(self) -> None:
        s = self.settings
        keys = [q.keys for q in self.queues]
        if s.reap_every_ms:
            policy = PumpPolicy(interval_s=s.reap_every_ms / 1000.0, reap_limit=s.reap_limit, promote=False,
                                max_attempts=s.max_attempts, drain_rounds=DRAIN_ROUNDS)
            self.background.spawn(Pump(self.recorded(self.client(), "reaper"), keys, policy,
                                       self.recorder).run)
        if s.promote_every_ms:
            policy = PumpPolicy(interval_s=s.promote_every_ms / 1000.0, reap=False, promote_limit=s.promote_limit,
                                max_attempts=s.max_attempts, drain_rounds=DRAIN_ROUNDS)
            self.background.spawn(Pump(self.recorded(self.client(), "promoter"), keys, policy,
                                       self.recorder).run)

    def _zombie(self, q: QueueWire, job: Claimed) -> None:
        """Sleep past the lease, wake once it is gone (reaped or re-claimed:
        the case the fence exists for), then complete with the old token."""
        client = self.client(keep=False)
        row = q.keys.job(job.id)
        poll = max(0.002, min(0.05, q.lease_s / 10.0))
        try:
            self._zombie_life(client, q, job, row, poll)
        except EchoMQError as exc:  # the server went away: this zombie never wakes
            self.books.counters["zombie_gave_up"] += 1
            log.warning("echomq: zombie of %s gave up: %s", job.id, exc)
        finally:
            client.wire.close()

    def _zombie_life(self, client: LocustCalls, q: QueueWire, job: Claimed, row: str, poll: float) -> None:
        gevent.sleep(max(0.0, job.deadline - time.time()))
        give_up = time.time() + ZOMBIE_PATIENCE_S
        while True:
            state, attempts = client.wire.command("HMGET", row, "state", "attempts")
            if state != b"active" or attempts is None or int(attempts) != job.token:
                break
            if time.time() > give_up:
                self.books.counters["zombie_gave_up"] += 1
                return
            gevent.sleep(poll)
        self.books.counters["zombies"] += 1
        self._zombie_complete(client, q, job)

    def _zombie_complete(self, client: LocustCalls, q: QueueWire, job: Claimed) -> None:
        """The zombie's complete, in the call log with the fault that made it."""
        h, process = self.call_log, self.actor("zombie")
        h.line("invoke", process, "complete", job.id, job.token, fault="zombie")
        try:
            accepted = client.zombie_complete(q, job.id, job.token)
        except BaseException as exc:
            sent = not isinstance(exc, Drained)
            h.line("info" if sent else "fail", process, "complete", job.id, job.token, fault="zombie",
                   extra=',"error":"%s"' % (type(exc).__name__ if sent else "not sent"))
            raise
        h.line("ok" if accepted else "fail", process, "complete", job.id, job.token, fault="zombie",
               extra="" if accepted else ',"error":"StaleTokenError"')

    # -- the end -----------------------------------------------------------

    def drain(self, timeout: float = 10.0) -> None:
        """No new calls; wait for those on the wire; stop the background.
        After this the books are final; a user that tries another call ends."""
        if self.drained_at is not None:
            return
        stuck = self.gate.drain(timeout)
        self.books.unresolved.extend(stuck)
        self.background.kill(block=True, timeout=5)
        self.drained_at = time.perf_counter()
        self.call_log.flush()

    def close(self) -> None:
        for wire in self.wires:
            wire.close()
        self.call_log.close()
