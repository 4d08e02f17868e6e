"""One run in one process: its queues, books, gate and background greenlets.

Locust users are the consumers. Around them each process runs what a real
deployment has beside its workers:

- producers (every load process): enqueue in pipelined batches, either
  keeping `--backlog` jobs pending per queue or at `--rate` jobs/s
  for the whole run, open loop;
- the pump (one per run: on the local runner or the master): reap and
  promote on their cadence;
- zombies (crash scenario): crashed consumers that wake after their lease
  is gone and complete anyway.

`RunInfo` is what the coordinator decides at test start (run id, server
URL, queue names, how many processes load) and ships to workers inside
Locust's parsed options.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import gevent
from gevent.pool import Group

from echomq.errors import EchoMQError
from echomq.ids import mint
from echomq_bench.locust.client import Books, Claimed, EchoClient, Gate, sleep_ms
from echomq_bench.locust.options import Settings
from echomq_bench.locust.wire import ClusterRouter, ConnectionFactory, QueueWire, is_cluster_url

__all__ = ["RunInfo", "Session", "RUN_OPTION"]

log = logging.getLogger("echomq.locust")

RUN_OPTION = "echomq_run"  # the parsed_options attribute that carries RunInfo to workers
REAP_ROUNDS = 100  # a pump tick drains at most this many full reap calls per queue
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

    def __init__(self, environment: Any, settings: Settings, run: RunInfo) -> None:
        self.environment = environment
        self.settings = settings
        self.run = run
        self.books = Books()
        self.gate = Gate()
        # one connection per greenlet (on a cluster: per greenlet and master)
        self.factory = ClusterRouter(run.url) if is_cluster_url(run.url) else ConnectionFactory(run.url)
        self.scripts = self.factory.scripts()
        s = settings
        self.queues = [QueueWire(n, self.scripts, s.lease_ms, s.max_attempts, s.reap_limit, s.promote_limit)
                       for n in run.queues]
        self.background = Group()
        self.started = time.perf_counter()
        self.drained_at: float | None = None
        self._next_queue = 0
        self.wires: list[Any] = []

    # -- for users ---------------------------------------------------------

    def client(self, keep: bool = True) -> EchoClient:
        """A measured client on its own connection; kept ones close with the session."""
        wire = self.factory.wire(self.scripts)
        if keep:
            self.wires.append(wire)
        return EchoClient(self.environment, wire, self.books, self.gate)

    def next_queue(self) -> QueueWire:
        """Consumers spread over the queues round-robin."""
        q = self.queues[self._next_queue % len(self.queues)]
        self._next_queue += 1
        return q

    def backoff_ms(self, attempt: int, rng: random.Random) -> int:
        """Full jitter: uniform over [0, min(cap, base * 2^(attempt-1))]."""
        s = self.settings
        ceiling = min(s.backoff_cap_ms, s.backoff_base_ms * 2.0 ** (attempt - 1))
        return int(rng.uniform(0.0, ceiling))

    def spawn_zombie(self, q: QueueWire, job: Claimed) -> None:
        self.background.spawn(self._zombie, q, job)

    # -- background greenlets ----------------------------------------------

    def start_producers(self) -> None:
        s = self.settings
        if s.producers == 0:
            return
        per_producer = s.enqueue_rate / self.run.load_processes / s.producers
        for index in range(s.producers):
            self.background.spawn(self._producer, index, per_producer)

    def start_pump(self) -> None:
        if self.settings.reap_every_ms or self.settings.promote_every_ms:
            self.background.spawn(self._pump)

    def _producer(self, index: int, rate: float) -> None:
        s = self.settings
        client = self.client()
        payload = os.urandom(s.payload_bytes)
        queues, n, turn = self.queues, len(self.queues), index
        idle_ms = max(1.0, s.idle_wait_ms)
        if rate > 0:
            interval = s.batch / rate
            due = time.perf_counter()
            while True:
                if not client.enqueue(queues[turn % n], [mint() for _ in range(s.batch)], payload):
                    sleep_ms(idle_ms)  # a failed round trip (counted by Locust): do not spin
                turn += 1
                due += interval
                late = time.perf_counter() - due
                if late < 0:
                    gevent.sleep(-late)
                else:  # open loop: catch up, and say so
                    self.books.counters["producer_late"] += 1
                    gevent.sleep(0)
        while True:
            q = queues[turn % n]
            turn += 1
            deficit = s.backlog - client.pending_size(q)
            if deficit > 0:
                if not client.enqueue(q, [mint() for _ in range(min(s.batch, deficit))], payload):
                    sleep_ms(idle_ms)
            elif turn % n == 0:
                sleep_ms(idle_ms)

    def _pump(self) -> None:
        s = self.settings
        client = self.client()
        every = {"reap": s.reap_every_ms / 1000.0, "promote": s.promote_every_ms / 1000.0}
        verbs = {"reap": (client.reap, s.reap_limit), "promote": (client.promote, s.promote_limit)}
        due = {name: time.perf_counter() for name, period in every.items() if period > 0}
        while due:
            now = time.perf_counter()
            for name in list(due):
                if now < due[name]:
                    continue
                call, limit = verbs[name]
                for q in self.queues:
                    for _ in range(REAP_ROUNDS):
                        if call(q) < limit:
                            break
                # A pump that fell behind skips ticks rather than bursting.
                due[name] = max(due[name] + every[name], time.perf_counter())
            gevent.sleep(max(0.0, min(due.values()) - time.perf_counter()))

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

    def _zombie_life(self, client: EchoClient, q: QueueWire, job: Claimed, row: str, poll: float) -> None:
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
        client.complete(q, job.id, job.token, zombie=True)

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

    def close(self) -> None:
        for wire in self.wires:
            wire.close()
