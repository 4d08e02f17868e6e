"""The load under fire: producer, consumer and pump processes whose every
step is written to an event log that survives SIGKILL.

A worker cannot hand its Ledger over when it is killed, so each one appends
one line per event to its own file, with one `os.write` per line: the kernel
keeps what was written whatever happens to the process. `read_logs` turns the
files into `Evidence`, and `Evidence.ledger` into the audit's Ledger.

The event words (first field), then id, token, time (monotonic, system-wide):

    E id t          enqueue answered enqueued
    U id t          enqueue sent, no answer (timeout, connection lost)
    O id t          enqueue refused: the server is out of memory
    C id tok fail t claimed; fail=1: this attempt will end in retry
    S id tok t      about to send complete or retry (a kill after C and
                    before S leaves the lease unanswered, nothing in flight)
    A / R / Q       complete accepted / refused (EMQSTALE) / unanswered
    Y / N / W       retry accepted / refused (EMQSTALE) / unanswered
    T t             claim or pump call unanswered
    P t reaped promoted
    X t message     anything else: an error the load did not expect

Clients here never retry on their own (redis-py retries a timed-out command
by default): a complete that timed out may have landed, and resending it
would turn its success into EMQSTALE. An unanswered call is logged as such
and `Evidence.ledger` resolves it against what the server holds.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq_bench.load.audit import Ledger
from echomq_bench.measurement.workdist import parse_dist
from echomq.errors import OutOfMemoryError, ServerUnavailableError, StaleTokenError
from echomq.ids import mint
from echomq.queue import Queue

__all__ = ["LoadSettings", "Worker", "Fleet", "Answer", "Evidence", "read_logs", "last_event"]

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


def worker_client(server: Any, settings: LoadSettings) -> redis.Redis:
    return server.client(socket_timeout=settings.socket_timeout_s,
                         socket_connect_timeout=settings.socket_timeout_s, retry=Retry(NoBackoff(), 0))


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


def _connect(server: Any, settings: LoadSettings, name: str, stop: Any, log: _Log) -> Queue | None:
    while not stop.is_set():
        try:
            return Queue(worker_client(server, settings), name, max_attempts=settings.max_attempts)
        except ServerUnavailableError:
            log("T", _now())
            time.sleep(BACKOFF_S)
    return None


def _produce(server: Any, settings: LoadSettings, name: str, log: _Log, stop: Any, parent: int, seed: int) -> None:
    q = _connect(server, settings, name, stop, log)
    payload = random.Random(seed).randbytes(settings.payload_bytes)
    period = 1.0 / settings.rate
    due = time.monotonic()
    while q is not None and not stop.is_set() and os.getppid() == parent:
        due += period
        ahead = due - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        elif ahead < -0.5:
            due = time.monotonic()  # after a stall, carry on at the rate rather than burst
        jid = mint()
        try:
            reply = q.enqueue(jid, payload)
        except OutOfMemoryError:
            log("O", jid, _now())
            continue
        except ServerUnavailableError:
            log("U", jid, _now())
            time.sleep(BACKOFF_S)
            continue
        except Exception as exc:  # noqa: BLE001 - every surprise is evidence
            log("X", _now(), f"enqueue {type(exc).__name__}: {exc}".replace("\n", " "))
            continue
        log("E" if reply == "enqueued" else "D", jid, _now())


def _consume(server: Any, settings: LoadSettings, name: str, log: _Log, stop: Any, parent: int, seed: int) -> None:
    q = _connect(server, settings, name, stop, log)
    rng = random.Random(seed)
    work = parse_dist(settings.work)
    while q is not None and not stop.is_set() and os.getppid() == parent:
        try:
            job = q.claim(settings.lease_ms)
        except ServerUnavailableError:
            log("T", _now())
            time.sleep(BACKOFF_S)
            continue
        except Exception as exc:  # noqa: BLE001
            log("X", _now(), f"claim {type(exc).__name__}: {exc}".replace("\n", " "))
            time.sleep(BACKOFF_S)
            continue
        if job is None:
            time.sleep(IDLE_S)
            continue
        fail = rng.random() < settings.fail_rate
        log("C", job.id, job.token, int(fail), _now())
        time.sleep(work.sample_ms(rng) / 1000.0)
        log("S", job.id, job.token, _now())
        ok, refused, unknown = ("Y", "N", "W") if fail else ("A", "R", "Q")
        try:
            if fail:
                q.retry(job.id, job.token, "faults: simulated failure", settings.retry_delay_ms)
            else:
                q.complete(job.id, job.token)
            log(ok, job.id, job.token, _now())
        except StaleTokenError:
            log(refused, job.id, job.token, _now())
        except ServerUnavailableError:
            log(unknown, job.id, job.token, _now())
            time.sleep(BACKOFF_S)
        except Exception as exc:  # noqa: BLE001
            log("X", _now(), f"{'retry' if fail else 'complete'} {type(exc).__name__}: {exc}".replace("\n", " "))


def _pump(server: Any, settings: LoadSettings, name: str, log: _Log, stop: Any, parent: int, seed: int) -> None:
    q = _connect(server, settings, name, stop, log)
    while q is not None and not stop.is_set() and os.getppid() == parent:
        try:
            reaped = q.reap(settings.reap_limit)
            promoted = q.promote(settings.reap_limit)
            if reaped or promoted:
                log("P", _now(), reaped, promoted)
        except ServerUnavailableError:
            log("T", _now())
        except Exception as exc:  # noqa: BLE001
            log("X", _now(), f"pump {type(exc).__name__}: {exc}".replace("\n", " "))
        time.sleep(settings.pump_interval_s)


ROLES: dict[str, Callable[..., None]] = {"producer": _produce, "consumer": _consume, "pump": _pump}


def _main(role: str, server: Any, settings: LoadSettings, name: str, path: Path, stop: Any,
          parent: int, seed: int) -> None:
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    ROLES[role](server, settings, name, _Log(path), stop, parent, seed)


@dataclass
class Worker:
    role: str
    index: int
    path: Path
    process: Any

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    @property
    def label(self) -> str:
        return f"{self.role}-{self.index}"


class Fleet:
    """The worker processes of one scenario, forked so they start in
    milliseconds; each dies with the parent (PR_SET_PDEATHSIG)."""

    def __init__(self, server: Any, queue_name: str, settings: LoadSettings, log_dir: Path, seed: int) -> None:
        self.server, self.queue_name, self.settings = server, queue_name, settings
        self.log_dir = log_dir
        self.ctx = mp.get_context("fork")
        self.stop_event = self.ctx.Event()
        self.producers_stop = self.ctx.Event()
        self.workers: list[Worker] = []
        self.rng = random.Random(seed)

    def start(self, role: str) -> Worker:
        index = sum(w.role == role for w in self.workers)
        path = self.log_dir / f"{role}-{index}.log"
        stop = self.producers_stop if role == "producer" else self.stop_event
        process = self.ctx.Process(
            target=_main, name=f"echomq-{role}-{index}", daemon=True,
            args=(role, self.server, self.settings, self.queue_name, path, stop, os.getpid(),
                  self.rng.randrange(2**32)))
        process.start()
        worker = Worker(role, index, path, process)
        self.workers.append(worker)
        return worker

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
        self._join([w for w in self.workers if w.role == "producer"], timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Let every worker finish the job in hand, then go; kill stragglers."""
        self.producers_stop.set()
        self.stop_event.set()
        self.signal(self.workers, signal.SIGCONT)  # a stopped worker would never see the event
        self._join(self.workers, timeout)

    def _join(self, workers: list[Worker], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for w in workers:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                w.process.kill()
                w.process.join()

    def paths(self) -> list[Path]:
        return [w.path for w in self.workers]


def last_event(path: Path) -> list[str]:
    """The fields of the last line a worker wrote, or [] before its first."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 512))
            tail = fh.read().decode(errors="replace")
    except OSError:
        return []
    lines = [line for line in tail.split("\n")[:-1] if line]
    return lines[-1].split(" ") if lines else []


class Answer(NamedTuple):
    """A complete or retry the server answered: when it was sent and answered, by which worker."""
    jid: str
    token: int
    t: float
    worker: str
    sent: float


@dataclass
class Evidence:
    """What the workers saw, from their logs."""

    enqueued: dict[str, float] = field(default_factory=dict)        # id -> time
    enqueue_unknown: set[str] = field(default_factory=set)
    oom_refused: list[tuple[str, float]] = field(default_factory=list)
    claimed: dict[str, int] = field(default_factory=dict)          # id -> highest token claimed
    accepted: list[Answer] = field(default_factory=list)
    refused: list[Answer] = field(default_factory=list)
    complete_unknown: list[tuple[str, int, str]] = field(default_factory=list)
    retried: list[Answer] = field(default_factory=list)
    retry_refused: list[Answer] = field(default_factory=list)
    unanswered: int = 0
    reaped: int = 0
    promoted: int = 0
    errors: list[str] = field(default_factory=list)
    events: Counter[str] = field(default_factory=Counter)

    def ledger(self, places: set[str], zombies: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset()
               ) -> Ledger:
        """The audit's Ledger, with each unanswered call resolved by the evidence.

        `places`: every id the server holds now (or held at a snapshot taken
        before a fault). An unanswered enqueue landed if its id was claimed
        or is held; an unanswered complete landed if its job is held nowhere
        and no other complete of it was accepted: a landed complete deletes
        the row, so no later claim and no second complete could follow.
        """
        ledger = Ledger()
        for jid in self.enqueued:
            ledger.record_enqueue(jid, "enqueued")
        for jid in self.enqueue_unknown:
            if jid in self.claimed or jid in places:
                ledger.record_enqueue(jid, "enqueued")
        for a in self.accepted:
            ledger.record_complete(a.jid, a.token, accepted=True, zombie=(a.jid, a.token) in zombies)
        for a in self.refused:
            ledger.record_complete(a.jid, a.token, accepted=False, zombie=(a.jid, a.token) in zombies)
        for jid, token, _ in self.complete_unknown:
            if jid not in places and ledger.accepted[jid] == 0:
                ledger.record_complete(jid, token, accepted=True, zombie=(jid, token) in zombies)
        return ledger

    def first_after(self, kind: str, t: float) -> float | None:
        """When the first complete (A) or enqueue (E) answered at or after t was answered."""
        times = {"A": [a.t for a in self.accepted], "E": list(self.enqueued.values())}[kind]
        later = [x for x in times if x >= t]
        return min(later) if later else None

    def first_sent_after(self, t: float) -> float | None:
        """When the first complete sent at or after t was accepted: a reply read
        late from before t does not count."""
        later = [a.t for a in self.accepted if a.sent >= t]
        return min(later) if later else None


def read_logs(paths: Iterable[Path]) -> Evidence:
    ev = Evidence()
    for path in paths:
        worker = path.stem
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            continue
        sent = 0.0
        for line in text.split("\n"):
            f = line.split(" ")
            if not line or not f:
                continue
            word = f[0]
            ev.events[word] += 1
            if word in ("E", "D"):
                ev.enqueued[f[1]] = float(f[2])
            elif word == "U":
                ev.enqueue_unknown.add(f[1])
            elif word == "O":
                ev.oom_refused.append((f[1], float(f[2])))
            elif word == "C":
                ev.claimed[f[1]] = max(ev.claimed.get(f[1], 0), int(f[2]))
            elif word == "S":
                sent = float(f[3])
            elif word in ("A", "R", "Y", "N"):
                row = Answer(f[1], int(f[2]), float(f[3]), worker, sent)
                {"A": ev.accepted, "R": ev.refused, "Y": ev.retried, "N": ev.retry_refused}[word].append(row)
            elif word == "Q":
                ev.complete_unknown.append((f[1], int(f[2]), worker))
            elif word == "P":
                ev.reaped += int(f[2])
                ev.promoted += int(f[3])
            elif word == "X":
                ev.errors.append(f"{worker}: {' '.join(f[2:])}")
            if word in ("U", "Q", "W", "T"):
                ev.unanswered += 1
    ev.enqueue_unknown -= set(ev.enqueued)
    return ev
