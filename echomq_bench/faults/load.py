"""The load under fire: the load engine's producer, consumer and pump, one
process each, whose every event is written to an event log that survives
SIGKILL, and whose every call is recorded in a call log that does too
(echomq_bench.measurement.calllog, durable: written before each call goes
out and once its reply is in).

A worker cannot hand its Ledger over when it is killed, so each one appends
one line per event to its own file, with one `os.write` per line: the kernel
keeps what was written whatever happens to the process. `read_logs` turns the
files into `Evidence`, and `Evidence.ledger` into the audit's Ledger.

The event words are listed in `echomq_bench.faults.evidence`, which reads
the files back.

Clients here never retry on their own (redis-py retries a timed-out command
by default): a complete that timed out may have landed, and resending it
would turn its success into EMQSTALE. An unanswered call is logged as such
and `Evidence.ledger` resolves it against what the server holds.

The parent writes the nemesis's own call log: each fault's window (`strike`)
and the jobs it hit (`struck`); a shared `FaultFlag` names the fault striking
now, so each worker stamps its call-log lines with it.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Protocol, Sequence

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq import ServerUnavailableError
from echomq._instrument import QueueKeys
from echomq_bench.faults.evidence import Answer, Evidence, last_event, read_logs
from echomq_bench.load.calls import Calls, RedisCalls
from echomq_bench.load.harness import Child, Harness
from echomq_bench.load.engine import (
    ConsumerPolicy, Consumer, Event, Producer, ProducerPolicy, Pump, PumpPolicy, Stop,
)
from echomq_bench.measurement.calllog import CallLog, LoggedCalls
from echomq_bench.measurement.workdist import parse_dist

__all__ = ["Reachable", "LoadSettings", "FaultLog", "FaultFlag", "Worker", "Fleet", "Answer", "Evidence", "read_logs",
           "last_event"]

PR_SET_PDEATHSIG = 1
BACKOFF_S = 0.05
IDLE_S = 0.005


@dataclass(frozen=True)
class LoadSettings:
    producers: int = 2
    consumers: int = 4
    rate: float = 150.0            # jobs/s per producer, paced
    payload_bytes: int = 64
    lease_ms: int = 1000
    work: str = "exp:mean=3ms"     # consumer work time (echomq_bench.measurement.workdist)
    fail_rate: float = 0.1         # share of attempts that end in retry
    retry_delay_ms: int = 50
    max_attempts: int = 3
    pump_interval_s: float = 0.02
    reap_limit: int = 100
    socket_timeout_s: float = 0.5


class Reachable(Protocol):
    """What the workers need of a server: a client to it (a `Server`, or the
    server seen through a fault proxy)."""

    def client(self, **kwargs: Any) -> Any: ...


def worker_client(server: Reachable, settings: LoadSettings) -> redis.Redis:
    # Faults run on single servers, whose client is a plain redis.Redis.
    client: redis.Redis = server.client(socket_timeout=settings.socket_timeout_s,
                                        socket_connect_timeout=settings.socket_timeout_s, retry=Retry(NoBackoff(), 0))
    return client


class _Log:
    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, *fields: object) -> None:
        os.write(self.fd, (" ".join(map(str, fields)) + "\n").encode())


def _now() -> str:
    return f"{time.monotonic():.6f}"


def _die_with_parent(parent: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # the loops also check the parent pid
    if os.getppid() != parent:
        os._exit(1)


def _connect(server: Reachable, settings: LoadSettings, stop: Stop, log: _Log) -> RedisCalls | None:
    while not stop.is_set():
        try:
            return RedisCalls(worker_client(server, settings))
        except ServerUnavailableError:
            log("T", _now())
            time.sleep(BACKOFF_S)
    return None


# event (verb, outcome) -> log word; claimed, work and pump lines carry more fields
_WORDS = {
    ("enqueue", "enqueued"): "E", ("enqueue", "duplicate"): "D", ("enqueue", "unanswered"): "U",
    ("enqueue", "oom"): "O",
    ("complete", "accepted"): "A", ("complete", "refused"): "R", ("complete", "unanswered"): "Q",
    ("retry", "scheduled"): "Y", ("retry", "dead"): "Y", ("retry", "refused"): "N", ("retry", "unanswered"): "W",
}


class FaultLog:
    """The engine's events as event-log lines (see the module docstring)."""

    def __init__(self, log: _Log) -> None:
        self.log = log

    def __call__(self, e: Event) -> None:
        word = _WORDS.get((e.verb, e.outcome))
        if word in ("E", "D", "U", "O"):
            self.log(word, e.job_id, f"{e.t1:.6f}")
        elif word is not None:
            self.log(word, e.job_id, e.token, f"{e.t1:.6f}")
        elif e.outcome == "claimed":
            self.log("C", e.job_id, e.token, int(e.fate is not None and e.fate.action == "retry"), f"{e.t1:.6f}")
        elif e.verb == "work":
            self.log("S", e.job_id, e.token, f"{e.t0:.6f}")
        elif e.outcome == "unanswered":
            self.log("K" if e.verb == "claim" else "T", f"{e.t1:.6f}")
        elif e.outcome == "ok" and e.count:
            moved = (e.count, 0) if e.verb == "reap" else (0, e.count)
            self.log("P", f"{e.t1:.6f}", *moved)
        elif e.outcome == "error":
            where = "pump" if e.verb in ("reap", "promote") else e.verb
            self.log("X", f"{e.t1:.6f}", f"{where} {type(e.error).__name__}: {e.error}".replace("\n", " "))


def _role(kind: str, calls: Calls, settings: LoadSettings, name: str, log: _Log, seed: int) -> Any:
    rng = random.Random(seed)
    keys, hear = [QueueKeys(name)], FaultLog(log)
    if kind == "producer":
        policy = ProducerPolicy(rate=settings.rate, payload=rng.randbytes(settings.payload_bytes),
                                catch_up_s=0.5, backoff_s=BACKOFF_S)
        return Producer(calls, keys, policy, hear)
    if kind == "consumer":
        consume = ConsumerPolicy(
            lease_ms=settings.lease_ms, work=parse_dist(settings.work), fail_rate=settings.fail_rate,
            retry_delay_ms=settings.retry_delay_ms, retry_error=b"faults: simulated failure",
            max_attempts=settings.max_attempts, idle_s=IDLE_S, backoff_s=BACKOFF_S)
        return Consumer(calls, keys, consume, hear, rng)
    pump = PumpPolicy(interval_s=settings.pump_interval_s, reap_limit=settings.reap_limit,
                      promote_limit=settings.reap_limit, max_attempts=settings.max_attempts)
    return Pump(calls, keys, pump, hear, rng)


class FaultFlag:
    """The fault striking now, in memory the forked workers share: an index
    into the kinds the Fleet was made with (0: none), one aligned int that a
    worker reads once per round trip."""

    def __init__(self, ctx: Any, kinds: Sequence[str]) -> None:
        self.kinds = ("", *kinds)
        self.value = ctx.Value("i", 0, lock=False)

    def set(self, kind: str | None) -> None:
        self.value.value = self.kinds.index(kind) if kind else 0

    def __call__(self) -> str | None:
        return self.kinds[self.value.value] or None


@dataclass(frozen=True)
class _Spawn:
    """What one worker process is: its role and label, queue, files and seed."""

    role: str
    label: str
    queue: str
    log: Path
    call_log: Path
    seed: int


def _main(spawn: _Spawn, server: Reachable, settings: LoadSettings, stop: Any, parent: int, flag: FaultFlag) -> None:
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    log = _Log(spawn.log)
    call_log = CallLog(spawn.call_log, durable=True)
    until = Stop(stop, alive=lambda: os.getppid() == parent)
    try:
        calls = _connect(server, settings, until, log)
        if calls is not None:
            recorded = LoggedCalls(calls, call_log, spawn.label, fault=flag)
            _role(spawn.role, recorded, settings, spawn.queue, log, spawn.seed).run(until)
    finally:
        call_log.close()


@dataclass
class Worker:
    role: str
    index: int
    path: Path
    child: Child

    @property
    def process(self) -> Any:
        return self.child.process

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def label(self) -> str:
        return f"{self.role}-{self.index}"


class Fleet:
    """The worker processes of one scenario, forked by the harness; each dies
    with the parent (PR_SET_PDEATHSIG). They talk to the parent through their
    event logs only: a worker the nemesis kills leaves no pipe half-read."""

    def __init__(self, server: Reachable, queue_name: str, settings: LoadSettings, log_dir: Path, seed: int,
                 kinds: Sequence[str] = ()) -> None:
        self.server, self.queue_name, self.settings = server, queue_name, settings
        self.log_dir = log_dir
        self.harness = Harness()
        self.ctx = self.harness.ctx
        self.stop_event = self.ctx.Event()
        self.producers_stop = self.ctx.Event()
        self.workers: list[Worker] = []
        self.rng = random.Random(seed)
        self.flag = FaultFlag(self.ctx, kinds)
        self.call_log_dir = log_dir / "history"  # the folder name older results folders have
        self.nemesis = CallLog(self.call_log_dir / "nemesis.jsonl")

    def start(self, role: str) -> Worker:
        index = sum(w.role == role for w in self.workers)
        path = self.log_dir / f"{role}-{index}.log"
        spawn = _Spawn(role, f"{role}-{index}", self.queue_name, path, self.call_log_dir / f"{role}-{index}.jsonl",
                       self.rng.randrange(2**32))
        stop = self.producers_stop if role == "producer" else self.stop_event
        child = self.harness.fork(f"echomq-{role}-{index}", _main, spawn, self.server, self.settings, stop,
                                  os.getpid(), self.flag, talk=False)
        worker = Worker(role, index, path, child)
        self.workers.append(worker)
        return worker

    @contextmanager
    def strike(self, kind: str) -> Iterator[None]:
        """A fault's window: the workers stamp their lines with it, the nemesis notes it open and closed."""
        self.flag.set(kind)
        self.nemesis.note("start", kind)
        try:
            yield
        finally:
            self.nemesis.note("stop", kind)
            self.flag.set(None)

    def struck(self, kind: str, jobs: Iterable[tuple[str, int, float]]) -> None:
        """The jobs a fault hit (job, token, when): a consumer killed or frozen while it held them."""
        for job, token, t in jobs:
            self.nemesis.note("strike", kind, job, token, t)

    def call_log_paths(self) -> list[Path]:
        """The call log's files: every worker's and the nemesis's (final once the fleet has stopped)."""
        return sorted(self.call_log_dir.glob("*.jsonl"))

    def start_all(self) -> None:
        for _ in range(self.settings.producers):
            self.start("producer")
        for _ in range(self.settings.consumers):
            self.start("consumer")
        self.start("pump")

    def alive(self, role: str) -> list[Worker]:
        return [w for w in self.workers if w.role == role and w.process.is_alive()]

    def signal(self, workers: Iterable[Worker], sig: int) -> None:
        for w in workers:
            try:
                os.kill(w.pid, sig)
            except ProcessLookupError:
                pass

    def stop_producers(self, timeout: float = 5.0) -> None:
        self.producers_stop.set()
        self.harness.finish([w.child for w in self.workers if w.role == "producer"], timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Let every worker finish the job in hand, then go; kill stragglers."""
        self.producers_stop.set()
        self.stop_event.set()
        self.signal(self.workers, signal.SIGCONT)  # a stopped worker would never see the event
        self.harness.finish(self.harness.children, timeout)
        self.nemesis.close()

    def paths(self) -> list[Path]:
        return [w.path for w in self.workers]
