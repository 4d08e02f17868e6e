"""The empirical lease sweep: every lease at once, each on its own queue.

One process per lease (so no lease waits on another's GIL), each with

    consumers   threads that claim with the lease, draw a work time and sleep
                it, then complete; with probability crash_rate they instead
                "crash": sleep a uniform fraction of the work, abandon the
                job and never touch it again (and, like a restarted worker,
                go on to the next job)
    a producer  that keeps a backlog in pending, so consumers never idle
    a pump      that calls reap(cap) once every reap interval, at a random
                phase, on a fixed schedule

All leases run side by side on one server over the same window, so they
share the machine's noise instead of each meeting a different moment of it.
Attempts claimed inside the window are counted; the run goes on after the
window until each counted attempt is resolved (completed, refused, or its
crashed job claimed again), up to a hard cap after which the rest are
reported as censored.

Durations are nominal (what the user's system sees) and run at
1/time_scale of that: a time scale of 60 runs leases of minutes as leases of
seconds. Everything measured is scaled back before it is reported. The
overheads of the client (round trips, sleep overshoot) are not scaled, so
a large time scale magnifies them; the model takes the measured overhead
as an input, which keeps the comparison fair at any scale.

After the sweep, alone on the server, the runner measures what one reap
call costs the server (commandstats, empty and full calls) and drains a mass
crash of K jobs against the cap.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import random
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
import redis

from ..dist import Distribution, parse_dist
from ..errors import StaleTokenError
from ..ids import mint
from ..latency import Latency
from ..queue import Queue
from ..serverstats import process_cpu_s, sample, usage

__all__ = [
    "DEFAULT_WORK",
    "SweepSettings",
    "SettingsError",
    "LeaseData",
    "MassCrash",
    "ReapCost",
    "SweepData",
    "auto_leases",
    "collect",
    "work_latency",
]

DEFAULT_WORK = "lognormal:median=200ms,p99=1s"
READY_TIMEOUT_S = 120.0
POLL_S = 0.05
REFILL_S = 0.01
EMPTY_REAP_CALLS = 300
PROGRESS_FIELDS = 4  # per lease: executions, refused, crashes, resolved-after-window flag


class SettingsError(ValueError):
    """Sweep settings that cannot run; the message names the setting."""


@dataclass(frozen=True)
class SweepSettings:
    """Everything one sweep depends on. Durations are nominal milliseconds
    (what the user's system would see); `time_scale` divides them for the run."""

    work: str = DEFAULT_WORK
    leases_ms: tuple[float, ...] = ()          # empty: automatic, around the work's quantiles
    crash_rate: float = 0.02
    reap_every_ms: float = 250.0
    reap_cap: int = 100
    consumers: int = 32                        # per lease
    time_scale: float = 1.0
    duration_s: float = 60.0                   # real seconds of the counted window
    warmup_s: float = 1.0
    budget: float = 0.001                      # false-expiry budget (fraction of executions)
    recovery_tolerance_ms: float = 3000.0      # p99 of crash -> re-claim must fit
    mass_crash: int = 1000
    mass_crash_reps: int = 2
    seed: int = 1
    # Jobs always go back to pending: the sweep measures leases, not the morgue.
    max_attempts: int = 1_000_000

    def check(self) -> None:
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise SettingsError(what)

        parse_dist(self.work)
        need(0 <= self.crash_rate < 1, f"--crash-rate must be in [0, 1), got {self.crash_rate}")
        need(self.reap_every_ms > 0, f"--reap-every must be above 0, got {self.reap_every_ms} ms")
        need(1 <= self.reap_cap <= 100_000, f"--reap-cap must be 1..100000, got {self.reap_cap}")
        need(1 <= self.consumers <= 1000, f"--consumers must be 1..1000, got {self.consumers}")
        need(self.time_scale > 0, f"--time-scale must be above 0, got {self.time_scale}")
        need(self.duration_s > 0, f"--duration must be above 0, got {self.duration_s} s")
        need(0 < self.budget < 1, f"--budget must be in (0, 1), got {self.budget}")
        need(self.recovery_tolerance_ms > 0, "--recovery-tolerance must be above 0")
        need(self.mass_crash >= 0 and self.mass_crash_reps >= 0, "--mass-crash must be >= 0")
        need(len(set(self.leases_ms)) == len(self.leases_ms), "--leases repeats a lease")
        for lease in self.leases_ms:
            real = lease / self.time_scale
            need(real >= 1, f"lease {lease:g} ms runs as {real:.3g} ms at time scale {self.time_scale:g}: "
                            "under the 1 ms the server can express; lower --time-scale")
            need(real <= 2**31 - 1, f"lease {lease:g} ms is over the server's limit")
        need(len(self.leases_ms) <= 12, "--leases: at most 12 leases in one sweep")

    def real_lease_ms(self, lease_ms: float) -> int:
        """The integer lease the server gets for a nominal lease."""
        return max(1, round(lease_ms / self.time_scale))

    def dist(self) -> Distribution:
        return parse_dist(self.work)


def _nice(x: float) -> float:
    """x rounded to two significant digits, so a lease reads like one a person would set."""
    if x <= 0:
        return x
    mag = 10 ** math.floor(math.log10(x) - 1)
    return round(x / mag) * mag


def auto_leases(dist: Distribution, budget: float, count: int = 5) -> tuple[float, ...]:
    """Leases at the work time's quantiles around the budget: p90, p99, then
    1-budget and one and two decades beyond, rounded; a point mass (const)
    gets multiples of its value instead."""
    probs = sorted({0.9, 0.99, 1 - budget, 1 - budget / 10, 1 - budget / 100})
    out = sorted({_nice(dist.quantile_ms(p)) for p in probs if 0 < p < 1})
    base = max(1.0, dist.quantile_ms(0.5))
    factor = 1.25
    while len(out) < count:
        out = sorted(set(out) | {_nice(base * factor)})
        factor *= 1.6
    return tuple(out[-count:]) if len(out) > count else tuple(out)


# --------------------------------------------------------------------------
# What comes back from a run (real seconds on perf_counter, which is
# CLOCK_MONOTONIC on Linux and so one clock across the lease processes)


@dataclass
class LeaseData:
    lease_ms: float                    # nominal, as run (real integer lease * time scale)
    lease_real_ms: int
    window: tuple[float, float]
    # counted live attempts: columns of one table
    live: dict[str, np.ndarray]        # t0 t1 w_ms(nominal) t2 t3 ok reclaim(t1 of token+1, nan if none)
    crashed: dict[str, np.ndarray]     # t0 t1 w_ms c_ms(nominal) tx reclaim
    claim_t1: np.ndarray               # every claim's reply time (window and tail)
    reaps: np.ndarray                  # rows (start, end, count)
    censored_live: int
    censored_crashed: int
    empty_claims: int
    cpu_s: float                       # this lease's process over the window
    tail_s: float                      # how long after the window the run went on


@dataclass
class ReapCost:
    empty_usec: float                  # server usec per reap call that finds nothing
    per_job_usec: float                # server usec per job reaped, beyond the call
    full_call_usec: float              # usec of a call that returns the cap
    calls: int


@dataclass
class MassCrash:
    k: int
    cap: int
    drain_ms: list[float]              # nominal: last deadline -> the call that returned the last job
    ticks: list[int]                   # non-empty reap calls it took
    spread_ms: list[float]             # nominal: first -> last claim of the K (deadline spread)


@dataclass
class SweepData:
    settings: SweepSettings
    server_name: str
    server_version: str
    leases: list[LeaseData]
    reap_cost: ReapCost | None
    mass: MassCrash | None
    server_utilization: float          # main thread, over the window
    server_cpu_s: float
    client_cpu_s: float                # all lease processes over the window
    window_s: float
    wall_s: float
    evalsha_calls: int
    evalsha_usec: int

    def settings_dict(self) -> dict[str, Any]:
        return asdict(self.settings)


# --------------------------------------------------------------------------
# Connecting from another process without writing a password anywhere


def _connect_spec(server: Any) -> dict[str, Any]:
    spec = getattr(server, "spec", None)
    if spec is not None and spec.kind == "url":
        return {"url": spec.url}
    kw = server.client().connection_pool.connection_kwargs
    return {k: kw[k] for k in ("host", "port", "password", "username", "db") if kw.get(k) is not None}


def _client(spec: dict[str, Any], **extra: Any) -> redis.Redis:
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
        self.client = _client(spec, max_connections=settings.consumers + 8)
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

    # -- threads ---------------------------------------------------------

    def _enqueue(self, n: int) -> None:
        k = self.queue.keys
        sha = self.queue.scripts.sha("enqueue")
        pipe = self.client.pipeline(transaction=False)
        for _ in range(n):
            job_id = mint("JOB")
            pipe.evalsha(sha, 2, k.pending, k.job(job_id), job_id, b"x")
        pipe.execute()

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
        threads = [threading.Thread(target=self._producer, daemon=True),
                   threading.Thread(target=self._pump, args=(random.Random(rng.random()),), daemon=True)]
        threads += [threading.Thread(target=self._consumer, args=(random.Random(rng.random()),), daemon=True)
                    for _ in range(self.s.consumers)]
        for t in threads:
            t.start()
        time.sleep(max(0.0, start - time.perf_counter()))
        cpu0 = process_cpu_s()
        time.sleep(max(0.0, end - time.perf_counter()))
        cpu1 = process_cpu_s()
        hard = end + cap
        while time.perf_counter() < hard:
            if self.open == 0 and self._unresolved_crashes() == 0:
                break
            time.sleep(POLL_S)
        tail = time.perf_counter() - end
        self.stop.set()
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


def _lease_worker(spec: dict[str, Any], index: int, settings: SweepSettings, lease_ms: float,
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


# --------------------------------------------------------------------------
# Alone on the server afterwards: what a reap call costs, and a mass crash


def _evalsha(client: redis.Redis) -> tuple[int, int]:
    stats = client.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    return int(stats["calls"]), int(stats["usec"])


def _reap_cost(client: redis.Redis, settings: SweepSettings, tag: str) -> ReapCost:
    q = Queue(client, f"lease-{tag}-cost", max_attempts=settings.max_attempts)
    c0, u0 = _evalsha(client)
    for _ in range(EMPTY_REAP_CALLS):
        q.reap(settings.reap_cap)
    c1, u1 = _evalsha(client)
    empty = (u1 - u0) / max(1, c1 - c0)
    # Full calls: enough expired jobs for 30 calls at the cap.
    k = settings.reap_cap * 30
    _fill_and_claim(q, k, 1)
    time.sleep(0.01)
    c2, u2 = _evalsha(client)
    reaped = 0
    while reaped < k:
        reaped += q.reap(settings.reap_cap)
    c3, u3 = _evalsha(client)
    calls = c3 - c2
    per_job = max(0.0, ((u3 - u2) - calls * empty) / k)
    _drop(q)
    return ReapCost(empty, per_job, empty + per_job * settings.reap_cap, calls + c1 - c0)


def _fill_and_claim(q: Queue, k: int, lease_real: int) -> tuple[float, float]:
    keys = q.keys
    pipe = q.client.pipeline(transaction=False)
    sha = q.scripts.sha("enqueue")
    for _ in range(k):
        job_id = mint("JOB")
        pipe.evalsha(sha, 2, keys.pending, keys.job(job_id), job_id, b"x")
    pipe.execute()
    claim = q.scripts.sha("claim")
    pipe = q.client.pipeline(transaction=False)
    for _ in range(k):
        pipe.evalsha(claim, 2, keys.pending, keys.active, keys.job_prefix, lease_real)
    t0 = time.perf_counter()
    pipe.execute()
    return t0, time.perf_counter()


def _drop(q: Queue) -> None:
    pattern = q.keys.pending.rsplit(":", 1)[0].replace("{", "\\{").replace("}", "\\}") + ":*"
    batch = list(q.client.scan_iter(match=pattern, count=1000))
    for i in range(0, len(batch), 1000):
        q.client.delete(*batch[i:i + 1000])


def _mass_crash(client: redis.Redis, settings: SweepSettings, lease_ms: float, tag: str,
                rng: random.Random) -> MassCrash:
    scale = settings.time_scale
    lease_real = settings.real_lease_ms(lease_ms)
    r_real = settings.reap_every_ms / scale / 1000.0
    out = MassCrash(settings.mass_crash, settings.reap_cap, [], [], [])
    for rep in range(settings.mass_crash_reps):
        q = Queue(client, f"lease-{tag}-mass{rep}", max_attempts=settings.max_attempts)
        t_first, t_last = _fill_and_claim(q, settings.mass_crash, lease_real)
        deadline = t_last + lease_real / 1000.0
        nxt = t_last + rng.random() * r_real
        reaped, ticks, end = 0, 0, math.nan
        give_up = deadline + (settings.mass_crash / settings.reap_cap + 5) * r_real + 5
        while reaped < settings.mass_crash and time.perf_counter() < give_up:
            time.sleep(max(0.0, nxt - time.perf_counter()))
            n = q.reap(settings.reap_cap)
            if n:
                reaped += n
                ticks += 1
                end = time.perf_counter()
            nxt += r_real
        out.drain_ms.append((end - deadline) * 1000 * scale)
        out.ticks.append(ticks)
        out.spread_ms.append((t_last - t_first) * 1000 * scale)
        _drop(q)
    return out


# --------------------------------------------------------------------------
# The orchestrator


def collect(server: Any, settings: SweepSettings, progress: Callable[[str], None] | None = None,
            leases_ms: tuple[float, ...] | None = None) -> SweepData:
    """Run the sweep on `server` and return its raw data (see `run_sweep`
    for the analysed result)."""
    settings.check()
    leases = tuple(leases_ms or settings.leases_ms or auto_leases(settings.dist(), settings.budget))
    tag = secrets.token_hex(3)
    # fork, not spawn: a child needs nothing re-imported, starts in
    # milliseconds, and never re-runs a caller's script that lacks a
    # __main__ guard. The parent holds no threads at this point.
    ctx = mp.get_context("fork")
    counters = ctx.Array("d", PROGRESS_FIELDS * len(leases), lock=False)
    spec = _connect_spec(server)
    client = server.client()
    version = server.version()
    say = progress or (lambda text: None)
    wall0 = time.perf_counter()
    procs, pipes = [], []
    say(f"starting {len(leases)} lease processes x {settings.consumers} consumers")
    try:
        for i, lease in enumerate(leases):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_lease_worker, args=(spec, i, settings, lease, child, counters, tag),
                            daemon=True, name=f"lease-{lease:g}ms")
            p.start()
            child.close()
            procs.append(p)
            pipes.append(parent)
        for conn in pipes:
            if not conn.poll(READY_TIMEOUT_S):
                raise RuntimeError("a lease process did not get ready in time")
            kind, msg = _recv(conn)
            if kind != "ready":
                raise RuntimeError(msg)
        dist = settings.dist()
        start = time.perf_counter() + settings.warmup_s
        end = start + settings.duration_s
        scale = settings.time_scale
        longest = max(settings.real_lease_ms(x) for x in leases) / 1000.0
        cap = (longest + 2 * settings.reap_every_ms / scale / 1000.0
               + min(dist.quantile_ms(0.9999) / scale / 1000.0, 10.0) + 1.0)
        for conn in pipes:
            conn.send((start, end, cap))
        time.sleep(max(0.0, start - time.perf_counter()))
        s0 = sample(client)
        results: dict[int, LeaseData] = {}
        sampled_end = None
        while len(results) < len(leases):
            now = time.perf_counter()
            if sampled_end is None and now >= end:
                sampled_end = sample(client)
            for i, conn in enumerate(pipes):
                if i in results or not conn.poll(0):
                    continue
                kind, payload = _recv(conn)
                if kind == "error":
                    raise RuntimeError(payload)
                results[i] = payload
            say(_progress_line(now, start, end, leases, counters, results))
            if now > end + cap + 30:
                raise RuntimeError("lease processes did not report back")
            time.sleep(0.5 if now < end else 0.1)
        if sampled_end is None:
            sampled_end = sample(client)
        use = usage(s0, sampled_end)
        for p in procs:
            p.join(timeout=10)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    lease_data = [results[i] for i in range(len(leases))]
    reap_cost = mass = None
    if settings.mass_crash > 0 and settings.mass_crash_reps > 0:
        say(f"measuring reap cost, then {settings.mass_crash_reps} mass crash(es) of {settings.mass_crash} jobs")
        reap_cost = _reap_cost(client, settings, tag)
        # The drain after the deadline does not depend on the lease; a short
        # one (half a reap interval) keeps the wait before it short.
        mass = _mass_crash(client, settings, settings.reap_every_ms / 2, tag, random.Random(settings.seed))
    for i in range(len(leases)):
        _drop(Queue(client, f"lease-{tag}-{i}", max_attempts=settings.max_attempts))
    return SweepData(
        settings=settings,
        server_name=server.name,
        server_version=version,
        leases=lease_data,
        reap_cost=reap_cost,
        mass=mass,
        server_utilization=use.utilization,
        server_cpu_s=use.cpu_s,
        client_cpu_s=sum(d.cpu_s for d in lease_data),
        window_s=settings.duration_s,
        wall_s=time.perf_counter() - wall0,
        evalsha_calls=use.calls("evalsha"),
        evalsha_usec=use.usec("evalsha"),
    )


def _recv(conn: Any) -> tuple[str, Any]:
    try:
        return conn.recv()
    except EOFError:
        return "error", "a lease process died without a word (killed, or out of memory?)"


def _progress_line(now: float, start: float, end: float, leases: tuple[float, ...], counters: Any,
                   done: dict[int, LeaseData]) -> str:
    if now < start:
        head = "warming up"
    elif now < end:
        head = f"{now - start:5.0f}/{end - start:.0f} s"
    else:
        head = f"tail {now - end:4.1f} s ({len(done)}/{len(leases)} done)"
    parts = []
    for i, lease in enumerate(leases):
        n = int(counters[i * PROGRESS_FIELDS])
        refused = int(counters[i * PROGRESS_FIELDS + 1])
        parts.append(f"{_short_ms(lease)}: {n} runs {refused} refused")
    return f"lease sweep {head} | " + " | ".join(parts)


def _short_ms(ms: float) -> str:
    if ms >= 60_000:
        return f"{ms / 60_000:g}m"
    if ms >= 1000:
        return f"{ms / 1000:g}s"
    return f"{ms:g}ms"


def work_latency(data: SweepData) -> Latency:
    """The work times the consumers measured (sleep from claim reply to
    complete, nominal), merged over all leases: what --work-from reads back."""
    lat = Latency()
    for d in data.leases:
        for t1, t2 in zip(d.live["t1"], d.live["t2"]):
            lat.record_ms((t2 - t1) * 1000 * data.settings.time_scale)
    return lat

