"""One lease in its own process: the load engine's consumers, producer and
pump on one queue (see echomq_bench.lease.sweep for the design); what this
module adds is the crash rule's policy and the rows the analysis reads."""

from __future__ import annotations

import math
import random
import threading
import time
from typing import Any

import numpy as np
import redis

from echomq._instrument import QueueKeys
from echomq_bench.errors import MeasurementError
from echomq_bench.load.calls import RedisCalls
from echomq_bench.load.harness import Line
from echomq_bench.load.engine import (
    ConsumerPolicy, Consumer, Event, Producer, ProducerPolicy, Pump, PumpPolicy, Stop, start_thread,
)
from echomq_bench.measurement.serverstats import process_cpu_s
from echomq_bench.lease.records import LeaseData
from echomq_bench.lease.settings import SweepSettings

__all__ = ["PROGRESS_FIELDS", "connect_spec", "client", "lease_worker"]

POLL_S = 0.05
REFILL_S = 0.01
PROGRESS_FIELDS = 4  # per lease: executions, refused, crashes, resolved-after-window flag

# One counted attempt. Live: job id, token, claim sent, claim answered, nominal
# work ms, complete sent, complete answered, accepted. Crashed: job id, token,
# claim sent, claim answered, nominal work ms, nominal crash ms, crashed at.
LiveRow = tuple[str, int, float, float, float, float, float, bool]
CrashRow = tuple[str, int, float, float, float, float, float]


# --------------------------------------------------------------------------
# Connecting from another process without writing a password anywhere


def connect_spec(server: Any) -> dict[str, Any]:
    spec = getattr(server, "spec", None)
    if spec is not None and spec.kind == "url":
        return {"url": spec.url}
    kw = server.client().connection_pool.connection_kwargs
    return {k: kw[k] for k in ("host", "port", "password", "username", "db") if kw.get(k) is not None}


def client(spec: dict[str, Any], **extra: Any) -> redis.Redis:
    opts = {"socket_connect_timeout": 5, "decode_responses": False, **extra}
    if "url" in spec:
        return redis.Redis.from_url(spec["url"], **opts)
    return redis.Redis(**spec, **opts)


# --------------------------------------------------------------------------
# One lease, in its own process


class _Attempts:
    """One consumer's recorder: its claims, and the attempts claimed inside
    the window (counted) as rows for the analysis."""

    def __init__(self, run: _LeaseRun) -> None:
        self.run = run
        self.base = run.index * PROGRESS_FIELDS
        self.live: list[LiveRow] = []
        self.crashed: list[CrashRow] = []
        self.claims: list[float] = []
        self.free_at: list[float] = []   # when each claimed job's work (or crash) was due to end
        self.holding: tuple[float, float, bool] = (0.0, 0.0, False)  # the job in hand: t0, t1, counted

    def __call__(self, e: Event) -> None:
        if e.error is not None and e.outcome != "refused":
            return  # the role is strict: it raises this next, and the run stops and says why
        run = self.run
        if e.outcome == "empty":
            run.empty += 1
        elif e.outcome == "claimed":
            self.claims.append(e.t1)
            if e.fate is not None:
                busy_ms = e.fate.crash_ms if e.fate.action == "crash" else e.fate.work_ms
                self.free_at.append(e.t1 + busy_ms / run.scale / 1000.0)
            if e.token > 1:
                run.reclaim[(e.job_id, e.token)] = e.t1
            counted = run.window[0] <= e.t0 < run.window[1]
            self.holding = (e.t0, e.t1, counted)
            if counted:
                with run.lock:
                    run.open += 1
        elif e.verb in ("crash", "complete"):
            self._settled(e)

    def _settled(self, e: Event) -> None:
        t0, t1, counted = self.holding
        if not counted:
            return
        assert e.fate is not None
        run, counters = self.run, self.run.counters
        if e.verb == "crash":
            self.crashed.append((e.job_id, e.token, t0, t1, e.fate.work_ms, e.fate.crash_ms, e.t1))
            counters[self.base + 2] += 1
        else:
            ok = e.outcome == "accepted"
            self.live.append((e.job_id, e.token, t0, t1, e.fate.work_ms, e.t0, e.t1, ok))
            if not ok:
                counters[self.base + 1] += 1
        counters[self.base] += 1
        with run.lock:
            run.open -= 1


class _ScheduledPump(Pump):
    """The pump, telling when each tick was due: how late a reap ran is a
    physical delay, which the analysis keeps apart from the nominal ones
    (docs/design/lease-model.md, "Recovery at a time scale")."""

    due = math.nan

    def pause(self) -> None:
        self.due = self._due   # the tick served next was due here, however late it runs
        super().pause()


class _LeaseRun:
    def __init__(self, spec: dict[str, Any], index: int, settings: SweepSettings, lease_ms: float,
                 counters: Any, tag: str) -> None:
        self.s = settings
        self.index = index
        self.counters = counters
        self.lease_real = settings.real_lease_ms(lease_ms)
        self.scale = settings.time_scale
        self.client = client(spec, max_connections=settings.consumers + 8)
        self.calls = RedisCalls(self.client)
        self.keys = QueueKeys(f"lease-{tag}-{index}")
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.books: list[_Attempts] = []
        self.reclaim: dict[tuple[str, int], float] = {}
        self.reaps: list[tuple[float, float, int, float]] = []
        self.pump: _ScheduledPump | None = None
        self.open = 0  # counted attempts still sleeping: the tail waits for them
        self.empty = 0
        self.target = 2 * settings.consumers + 50
        self.window = (math.inf, math.inf)
        self.errors: list[str] = []

    # -- the roles ---------------------------------------------------------

    def _guard(self, exc: BaseException) -> None:
        # A thread that dies quietly would leave fewer consumers (or no pump)
        # and skew every rate: stop the run and report why instead.
        self.errors.append(f"{type(exc).__name__}: {exc}")
        self.stop.set()

    def _heard_reap(self, e: Event) -> None:
        if e.error is None:
            due = self.pump.due if self.pump is not None else math.nan
            self.reaps.append((e.t0, e.t1, e.count, due))

    def _roles(self, rng: random.Random) -> list[Any]:
        s, keys = self.s, [self.keys]
        self.pump = _ScheduledPump(self.calls, keys,
                                   PumpPolicy(interval_s=s.reap_every_ms / s.time_scale / 1000.0,
                                              reap_limit=s.reap_cap, promote=False, max_attempts=s.max_attempts,
                                              random_phase=True), self._heard_reap, random.Random(rng.random()),
                                   strict=True)
        roles: list[Any] = [
            Producer(self.calls, keys, ProducerPolicy(backlog=self.target, refill_s=REFILL_S), strict=True),
            self.pump,
        ]
        policy = ConsumerPolicy(lease_ms=self.lease_real, work=s.dist(), time_scale=s.time_scale,
                                crash_rate=s.crash_rate, max_attempts=s.max_attempts, idle_s=0.001)
        for _ in range(s.consumers):
            book = _Attempts(self)
            self.books.append(book)
            roles.append(Consumer(self.calls, keys, policy, book, random.Random(rng.random()), strict=True))
        return roles

    # -- the run ---------------------------------------------------------

    def _unresolved_crashes(self) -> int:
        missing = 0
        for book in self.books:
            for row in list(book.crashed):
                if (row[0], row[1] + 1) not in self.reclaim:
                    missing += 1
        return missing

    def run(self, line: Line) -> LeaseData:
        Producer(self.calls, [self.keys], ProducerPolicy(batch=self.target, total=self.target), strict=True).run()
        start, end, cap = line.ready()
        self.window = (start, end)
        rng = random.Random(self.s.seed * 7919 + self.index)
        stop = Stop(self.stop)
        for role in self._roles(rng):
            start_thread(role, stop, guard=self._guard)
        time.sleep(max(0.0, start - time.perf_counter()))
        cpu0 = process_cpu_s()
        self.stop.wait(max(0.0, end - time.perf_counter()))
        cpu1 = process_cpu_s()
        hard = end + cap
        while time.perf_counter() < hard and not self.errors:
            if self.open == 0 and self._unresolved_crashes() == 0:
                break
            time.sleep(POLL_S)
        tail = time.perf_counter() - end
        self.stop.set()
        if self.errors:
            raise MeasurementError(f"a worker thread failed: {self.errors[0]}")
        self.counters[self.index * PROGRESS_FIELDS + 3] = 1
        return self._collect(cpu1 - cpu0, tail)

    def _collect(self, cpu_s: float, tail_s: float) -> LeaseData:
        reclaim = dict(self.reclaim)
        live_rows = [r for book in self.books for r in list(book.live)]
        crash_rows = [r for book in self.books for r in list(book.crashed)]

        def after(row: LiveRow | CrashRow) -> float:
            return reclaim.get((row[0], row[1] + 1), math.nan)

        live = {
            "t0": np.array([r[2] for r in live_rows]), "t1": np.array([r[3] for r in live_rows]),
            "w_ms": np.array([r[4] for r in live_rows]), "t2": np.array([r[5] for r in live_rows]),
            "t3": np.array([r[6] for r in live_rows]), "ok": np.array([r[7] for r in live_rows], dtype=bool),
            "reclaim": np.array([after(r) for r in live_rows]),
        }
        crashed = {
            "t0": np.array([r[2] for r in crash_rows]), "t1": np.array([r[3] for r in crash_rows]),
            "w_ms": np.array([r[4] for r in crash_rows]), "c_ms": np.array([r[5] for r in crash_rows]),
            "tx": np.array([r[6] for r in crash_rows]), "reclaim": np.array([after(r) for r in crash_rows]),
        }
        censored_crashed = int(np.isnan(crashed["reclaim"]).sum()) if crash_rows else 0
        return LeaseData(
            lease_ms=self.lease_real * self.scale,
            lease_real_ms=self.lease_real,
            window=self.window,
            live=live,
            crashed=crashed,
            claim_t1=np.array(sorted(t for book in self.books for t in list(book.claims))),
            free_at=np.array(sorted(t for book in self.books for t in list(book.free_at))),
            reaps=np.array(self.reaps if self.reaps else np.zeros((0, 4))),
            censored_live=max(0, self.open),
            censored_crashed=censored_crashed,
            empty_claims=self.empty,
            cpu_s=cpu_s,
            tail_s=tail_s,
        )


def lease_worker(line: Line, spec: dict[str, Any], index: int, settings: SweepSettings, lease_ms: float,
                 counters: Any, tag: str) -> None:
    """A lease process's entry (forked by the harness, which names it if it fails)."""
    run = _LeaseRun(spec, index, settings, lease_ms, counters, tag)
    line.result(run.run(line))
