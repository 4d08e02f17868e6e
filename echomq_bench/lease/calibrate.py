"""Alone on the server after the sweep: what one reap call costs the server
(commandstats, empty calls and calls at the cap), and the drain of a mass
crash against the cap, both measured by `echomq_bench.reapcost.measure`."""

from __future__ import annotations

import random

import redis

from echomq import Queue
from echomq_bench.load.bulk import BulkFill, drop_queue
from echomq_bench.lease.records import MassCrash, ReapCost
from echomq_bench.lease.settings import SweepSettings
from echomq_bench.reapcost.measure import LiveEntries, paced_drain
from echomq_bench.reapcost.measure import reap_cost as measure_reap_cost

__all__ = ["reap_cost", "mass_crash", "EMPTY_REAP_CALLS", "FULL_REAP_CALLS"]

EMPTY_REAP_CALLS = 300
FULL_REAP_CALLS = 30


def _reaped(client: redis.Redis, settings: SweepSettings, name: str) -> LiveEntries:
    return LiveEntries("reap", Queue(client, name, max_attempts=settings.max_attempts), BulkFill(client))


def reap_cost(client: redis.Redis, settings: SweepSettings, tag: str) -> ReapCost:
    """One reap call's server time at the sweep's cap, empty and full."""
    v = _reaped(client, settings, f"lease-{tag}-cost")
    cost = measure_reap_cost(v, settings.reap_cap, EMPTY_REAP_CALLS, FULL_REAP_CALLS)
    drop_queue(client, v.q.name, sweep=True)
    return cost


def mass_crash(client: redis.Redis, settings: SweepSettings, lease_ms: float, tag: str,
               rng: random.Random) -> MassCrash:
    """`mass_crash` jobs whose leases of `lease_ms` (nominal) run out together, drained by a pump at
    the sweep's reap cadence and cap, `mass_crash_reps` times; times in nominal ms."""
    scale = settings.time_scale
    interval_s = settings.reap_every_ms / scale / 1000.0
    out = MassCrash(settings.mass_crash, settings.reap_cap, [], [], [])
    for rep in range(settings.mass_crash_reps):
        v = _reaped(client, settings, f"lease-{tag}-mass{rep}")
        drain = paced_drain(v, settings.reap_cap, settings.mass_crash, settings.real_lease_ms(lease_ms),
                            interval_s, rng)
        out.drain_ms.append(drain.after_deadline_ms * scale)
        out.ticks.append(drain.calls)
        out.spread_ms.append(0.0)
        drop_queue(client, v.q.name, sweep=True)
    return out
