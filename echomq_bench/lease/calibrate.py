"""Alone on the server after the sweep: what one reap call costs the
server (commandstats, empty calls and calls at the cap), and the drain of a
mass crash against the cap."""

from __future__ import annotations

import math
import random
import time

import redis

from echomq.queue import Queue
from echomq_bench.load.calls import RedisCalls
from echomq_bench.load.engine import (
    ConsumerPolicy, Consumer, Event, Producer, ProducerPolicy, Pump, PumpPolicy, Stop,
)
from echomq_bench.load.backlog import drop_queue
from echomq_bench.lease.records import MassCrash, ReapCost
from echomq_bench.lease.settings import SweepSettings
from echomq_bench.measurement.serverstats import command_stats

__all__ = ["reap_cost", "mass_crash"]

EMPTY_REAP_CALLS = 300


# --------------------------------------------------------------------------
# Alone on the server afterwards: what a reap call costs, and a mass crash


def reap_cost(client: redis.Redis, settings: SweepSettings, tag: str) -> ReapCost:
    q = Queue(client, f"lease-{tag}-cost", max_attempts=settings.max_attempts)
    c0, u0 = command_stats(client)
    for _ in range(EMPTY_REAP_CALLS):
        q.reap(settings.reap_cap)
    c1, u1 = command_stats(client)
    empty = (u1 - u0) / max(1, c1 - c0)
    # Full calls: enough expired jobs for 30 calls at the cap.
    k = settings.reap_cap * 30
    _fill_and_crash(q, k, 1)
    time.sleep(0.01)
    c2, u2 = command_stats(client)
    reaped = 0
    while reaped < k:
        reaped += q.reap(settings.reap_cap)
    c3, u3 = command_stats(client)
    calls = c3 - c2
    per_job = max(0.0, ((u3 - u2) - calls * empty) / k)
    drop_queue(q.client, q.name, sweep=True)
    return ReapCost(empty, per_job, empty + per_job * settings.reap_cap, calls + c1 - c0)


def _fill_and_crash(q: Queue, k: int, lease_real: int) -> tuple[float, float]:
    """Enqueue k jobs, then claim all k in one round trip and abandon them: a
    mass crash. The claim pipeline's send and reply times."""
    calls = RedisCalls(q.client)
    Producer(calls, [q.keys], ProducerPolicy(batch=k, total=k), strict=True).run()
    sent: list[tuple[float, float]] = []

    def heard(e: Event) -> None:
        if e.outcome == "claimed" and not sent:
            sent.append((e.t0, e.t1))

    crash_all = ConsumerPolicy(lease_ms=lease_real, crash_rate=1.0, claim_batch=k)
    Consumer(calls, [q.keys], crash_all, heard, strict=True).step()
    return sent[0]


class _Drain:
    """Hears the pump draining a mass crash; stops it when all k came back."""

    def __init__(self, k: int, stop: Stop) -> None:
        self.k, self.stop = k, stop
        self.reaped, self.ticks, self.end = 0, 0, math.nan

    def __call__(self, e: Event) -> None:
        if e.count:
            self.reaped += e.count
            self.ticks += 1
            self.end = e.t1
        if self.reaped >= self.k:
            self.stop.set()


def mass_crash(client: redis.Redis, settings: SweepSettings, lease_ms: float, tag: str,
                rng: random.Random) -> MassCrash:
    scale = settings.time_scale
    lease_real = settings.real_lease_ms(lease_ms)
    r_real = settings.reap_every_ms / scale / 1000.0
    out = MassCrash(settings.mass_crash, settings.reap_cap, [], [], [])
    for rep in range(settings.mass_crash_reps):
        q = Queue(client, f"lease-{tag}-mass{rep}", max_attempts=settings.max_attempts)
        t_first, t_last = _fill_and_crash(q, settings.mass_crash, lease_real)
        deadline = t_last + lease_real / 1000.0
        give_up = deadline + (settings.mass_crash / settings.reap_cap + 5) * r_real + 5
        stop = Stop(deadline=give_up)
        drain = _Drain(settings.mass_crash, stop)
        pump = Pump(RedisCalls(client), [q.keys], PumpPolicy(interval_s=r_real, reap_limit=settings.reap_cap,
                                                              promote=False, max_attempts=settings.max_attempts,
                                                              random_phase=True), drain, rng, strict=True)
        pump.run(stop)
        out.drain_ms.append((drain.end - deadline) * 1000 * scale)
        out.ticks.append(drain.ticks)
        out.spread_ms.append((t_last - t_first) * 1000 * scale)
        drop_queue(q.client, q.name, sweep=True)
    return out
