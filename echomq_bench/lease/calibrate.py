"""Alone on the server after the sweep: what one reap call costs the
server (commandstats, empty calls and calls at the cap), and the drain of a
mass crash against the cap."""

from __future__ import annotations

import math
import random
import time

import redis

from echomq.ids import mint
from echomq.queue import Queue
from echomq_bench.lease.records import MassCrash, ReapCost
from echomq_bench.lease.settings import SweepSettings
from echomq_bench.measurement.serverstats import command_stats

__all__ = ["reap_cost", "mass_crash", "drop"]

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
    _fill_and_claim(q, k, 1)
    time.sleep(0.01)
    c2, u2 = command_stats(client)
    reaped = 0
    while reaped < k:
        reaped += q.reap(settings.reap_cap)
    c3, u3 = command_stats(client)
    calls = c3 - c2
    per_job = max(0.0, ((u3 - u2) - calls * empty) / k)
    drop(q)
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


def drop(q: Queue) -> None:
    pattern = q.keys.pending.rsplit(":", 1)[0].replace("{", "\\{").replace("}", "\\}") + ":*"
    batch = list(q.client.scan_iter(match=pattern, count=1000))
    for i in range(0, len(batch), 1000):
        q.client.delete(*batch[i:i + 1000])


def mass_crash(client: redis.Redis, settings: SweepSettings, lease_ms: float, tag: str,
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
        drop(q)
    return out
