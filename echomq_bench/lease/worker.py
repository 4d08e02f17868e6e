"""One lease in its own process: consumers, a producer and a pump on one
queue (see echomq_bench.lease.sweep for the design)."""

from __future__ import annotations

import math
import random
import threading
import time
from typing import Any

import numpy as np
import redis

from echomq.errors import StaleTokenError
from echomq.ids import mint
from echomq.queue import Queue
from echomq_bench.measurement.serverstats import process_cpu_s
from echomq_bench.lease.records import LeaseData
from echomq_bench.lease.settings import SweepSettings

__all__ = ["PROGRESS_FIELDS", "connect_spec", "client", "lease_worker"]

POLL_S = 0.05
REFILL_S = 0.01
PROGRESS_FIELDS = 4  # per lease: executions, refused, crashes, resolved-after-window flag


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


class _LeaseRun:
    def __init__(self, spec: dict[str, Any], index: int, settings: SweepSettings, lease_ms: float,
                 counters: Any, tag: str) -> None:
        self.s = settings
        self.index = index
        self.counters = counters
        self.lease_real = settings.real_lease_ms(lease_ms)
        self.reap_real_s = settings.reap_every_ms / settings.time_scale / 1000.0
        self.scale = settings.time_scale
        self.dist = settings.dist()
        self.client = client(spec, max_connections=settings.consumers + 8)
        self.queue = Queue(self.client, f"lease-{tag}-{index}", max_attempts=settings.max_attempts)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.live: list[list[tuple]] = []
        self.crashed: list[list[tuple]] = []
        self.claims: list[list[float]] = []
        self.reclaim: dict[tuple[str, int], float] = {}
        self.reaps: list[tuple[float, float, int]] = []
        self.open = 0  # counted attempts still sleeping: the tail waits for them
        self.empty = 0
        self.target = 2 * settings.consumers + 50
        self.window = (math.inf, math.inf)
        self.errors: list[str] = []

    # -- threads ---------------------------------------------------------

    def _enqueue(self, n: int) -> None:
        k = self.queue.keys
        sha = self.queue.scripts.sha("enqueue")
        pipe = self.client.pipeline(transaction=False)
        for _ in range(n):
            job_id = mint("JOB")
            pipe.evalsha(sha, 2, k.pending, k.job(job_id), job_id, b"x")
        pipe.execute()

    def _guarded(self, body: Any, *args: Any) -> None:
        # A thread that dies quietly would leave fewer consumers (or no pump)
        # and skew every rate: stop the run and report why instead.
        try:
            body(*args)
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
            self.stop.set()

    def _producer(self) -> None:
        while not self.stop.is_set():
            short = self.target - self.queue.pending_size()
            if short > 0:
                self._enqueue(short + self.target // 2)
            time.sleep(REFILL_S)

    def _pump(self, rng: random.Random) -> None:
        nxt = time.perf_counter() + rng.random() * self.reap_real_s
        while not self.stop.is_set():
            wait = nxt - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            ts = time.perf_counter()
            n = self.queue.reap(self.s.reap_cap)
            self.reaps.append((ts, time.perf_counter(), n))
            nxt += self.reap_real_s

    def _consumer(self, rng: random.Random) -> None:
        live: list[tuple] = []
        crashed: list[tuple] = []
        claims: list[float] = []
        with self.lock:
            self.live.append(live)
            self.crashed.append(crashed)
            self.claims.append(claims)
        q, lease, scale, dist = self.queue, self.lease_real, self.scale, self.dist
        base = self.index * PROGRESS_FIELDS
        counters = self.counters
        while not self.stop.is_set():
            t0 = time.perf_counter()
            job = q.claim(lease)
            t1 = time.perf_counter()
            if job is None:
                self.empty += 1
                time.sleep(0.001)
                continue
            claims.append(t1)
            if job.token > 1:
                self.reclaim[(job.id, job.token)] = t1
            counted = self.window[0] <= t0 < self.window[1]
            if counted:
                with self.lock:
                    self.open += 1
            w = dist.sample_ms(rng)
            if rng.random() < self.s.crash_rate:
                c = rng.random() * w
                time.sleep(c / scale / 1000.0)
                tx = time.perf_counter()
                if counted:
                    crashed.append((job.id, job.token, t0, t1, w, c, tx))
                    with self.lock:
                        self.open -= 1
                    counters[base + 2] += 1
                    counters[base] += 1
                continue
            time.sleep(w / scale / 1000.0)
            t2 = time.perf_counter()
            try:
                q.complete(job.id, job.token)
                ok = True
            except StaleTokenError:
                ok = False
            t3 = time.perf_counter()
            if counted:
                live.append((job.id, job.token, t0, t1, w, t2, t3, ok))
                with self.lock:
                    self.open -= 1
                counters[base] += 1
                if not ok:
                    counters[base + 1] += 1

    # -- the run ---------------------------------------------------------

    def _unresolved_crashes(self) -> int:
        missing = 0
        for rows in self.crashed:
            for row in list(rows):
                if (row[0], row[1] + 1) not in self.reclaim:
                    missing += 1
        return missing

    def run(self, conn: Any) -> LeaseData:
        self._enqueue(self.target)
        conn.send(("ready", None))
        start, end, cap = conn.recv()
        self.window = (start, end)
        rng = random.Random(self.s.seed * 7919 + self.index)
        threads = [threading.Thread(target=self._guarded, args=(self._producer,), daemon=True),
                   threading.Thread(target=self._guarded, args=(self._pump, random.Random(rng.random())),
                                    daemon=True)]
        threads += [threading.Thread(target=self._guarded, args=(self._consumer, random.Random(rng.random())),
                                     daemon=True)
                    for _ in range(self.s.consumers)]
        for t in threads:
            t.start()
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
            raise RuntimeError(f"a worker thread failed: {self.errors[0]}")
        self.counters[self.index * PROGRESS_FIELDS + 3] = 1
        return self._collect(cpu1 - cpu0, tail)

    def _collect(self, cpu_s: float, tail_s: float) -> LeaseData:
        reclaim = dict(self.reclaim)
        live_rows = [r for rows in self.live for r in list(rows)]
        crash_rows = [r for rows in self.crashed for r in list(rows)]

        def after(row: tuple) -> float:
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
            claim_t1=np.array(sorted(t for rows in self.claims for t in list(rows))),
            reaps=np.array(self.reaps if self.reaps else np.zeros((0, 3))),
            censored_live=max(0, self.open),
            censored_crashed=censored_crashed,
            empty_claims=self.empty,
            cpu_s=cpu_s,
            tail_s=tail_s,
        )


def lease_worker(spec: dict[str, Any], index: int, settings: SweepSettings, lease_ms: float,
                  conn: Any, counters: Any, tag: str) -> None:
    try:
        run = _LeaseRun(spec, index, settings, lease_ms, counters, tag)
        data = run.run(conn)
        conn.send(("done", data))
    except BaseException as exc:  # the parent reports it; a child traceback would be lost
        try:
            conn.send(("error", f"lease {lease_ms:g} ms: {type(exc).__name__}: {exc}"))
        except Exception:
            pass
    finally:
        conn.close()
