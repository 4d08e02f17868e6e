"""Measuring the reap/promote curve on one server.

Every point is one call's server time from INFO commandstats (the server's
own clock), the median of `repeats` calls, with the M sizes interleaved so
a drifting machine slows them alike.
"""

from __future__ import annotations

import math
import secrets
import time
from typing import Callable, Sequence

import redis

from echomq.queue import Queue
from echomq_bench.load.bulk import BulkFill, delete_keys, id_block, server_ms
from echomq_bench.measurement.serverstats import command_stats, process_cpu_s, sample, usage
from echomq_bench.reapcost.curve import FULL, Curve, CurveSettings, Drain, Point

__all__ = ["measure_curve", "PAYLOAD", "FAR_MS"]

PAYLOAD = b'{"order": "ORD0Nt6z93U3dY", "qty": 3}'
FAR_MS = 36_000_000  # live leases and run-ats: ten hours ahead, never due during a run


class _Verb:
    """reap or promote on one queue: where its entries live, how a due
    entry looks, and the call."""

    def __init__(self, verb: str, q: Queue, bulk: BulkFill) -> None:
        self.verb, self.q, self.bulk = verb, q, bulk
        k = q.keys
        self.zkey, self.state = (k.active, "active") if verb == "reap" else (k.schedule, "scheduled")

    def live(self, n: int) -> None:
        """n entries that never fall due during the run; no rows needed,
        since the verb never reads them."""
        self.bulk.fill(self.zkey, id_block(n), score0=server_ms(self.q.client) + FAR_MS, step=1)

    def due(self, k: int) -> list[str]:
        """k rows due long ago (deadlines or run-ats 1..k)."""
        ids = id_block(k)
        if ids:
            self.bulk.fill(self.zkey, ids, row_prefix=self.q.keys.job_prefix, state=self.state,
                           attempts=1, payload=PAYLOAD, score0=1, step=1)
        return ids

    def call(self, cap: int) -> int:
        return self.q.reap(cap) if self.verb == "reap" else self.q.promote(cap)

    def clean(self, ids: Sequence[str]) -> None:
        """Drop what the call moved (now in pending) and what it left due."""
        c = self.q.client
        c.unlink(self.q.keys.pending)
        c.zremrangebyscore(self.zkey, "-inf", len(ids) + 1)
        delete_keys(c, map(self.q.keys.job, ids))


def _one_call(v: _Verb, cap: int, k: int) -> tuple[int, float]:
    """Set k due entries, then one timed call; its server µs and round trip µs."""
    ids = v.due(k)
    calls0, usec0 = command_stats(v.q.client)
    t0 = time.perf_counter()
    moved = v.call(cap)
    rtt = (time.perf_counter() - t0) * 1e6
    calls1, usec1 = command_stats(v.q.client)
    v.clean(ids)
    if moved != min(k, cap):
        raise RuntimeError(f"{v.verb}({cap}) with {k} due moved {moved}, expected {min(k, cap)}")
    if calls1 - calls0 != 1:
        raise RuntimeError(f"the server counted {calls1 - calls0} EVALSHA calls where this process made one; "
                           "another client is using the server")
    return usec1 - usec0, rtt


def _drain(v: _Verb, cap: int, orphans: int, size: int) -> Drain:
    """K orphans at once, reaped back to back until none is left."""
    ids = v.due(orphans)
    calls0, usec0 = command_stats(v.q.client)
    worst, n, left = 0, 0, orphans
    t0 = time.perf_counter()
    while left > 0:
        c0, u0 = command_stats(v.q.client)
        moved = v.call(cap)
        c1, u1 = command_stats(v.q.client)
        worst = max(worst, u1 - u0)
        n += 1
        left -= moved
        if moved == 0:
            raise RuntimeError(f"{v.verb}({cap}) moved nothing with {left} still due")
    wall = (time.perf_counter() - t0) * 1000
    calls1, usec1 = command_stats(v.q.client)
    v.clean(ids)
    return Drain(v.verb, cap, orphans, size, n, wall, (usec1 - usec0) / 1000, worst)


Progress = Callable[[str], None]


def _say(progress: Progress | None, text: str) -> None:
    if progress:
        progress(text)


def measure_curve(client: redis.Redis, *, server: str = "?", version: str = "?",
                  settings: CurveSettings = FULL,
                  progress: Callable[[str], None] | None = None) -> Curve:
    """The whole grid for each verb on one server; keys are removed after."""
    tag = f"rc{secrets.token_hex(3)}"
    bulk = BulkFill(client)
    points: list[Point] = []
    drains: list[Drain] = []
    ratio_pairs: dict[str, list[tuple[int, int]]] = {}
    s0, cpu0, t0 = sample(client), process_cpu_s(), time.perf_counter()
    try:
        for verb in settings.verbs:
            queues = {m: _Verb(verb, Queue(client, f"{tag}-{verb}-{m}", max_attempts=3), bulk)
                      for m in settings.sizes}
            for m, v in queues.items():
                _say(progress, f"{verb}: filling M={m:,}")
                v.live(m)
            for v in queues.values():  # settle after the fill: the first calls read cold memory
                for _ in range(3):
                    _one_call(v, settings.ratio_cap, 1)
            points.extend(_grid(verb, queues, settings, progress))
            ratio_pairs[verb] = _ratio_pairs(verb, queues, settings, progress)
            # The drain beside drain_size live entries (or the nearest measured M).
            near = min(settings.sizes, key=lambda m: abs(math.log(m) - math.log(settings.drain_size)))
            for cap in settings.caps:
                _say(progress, f"{verb}: draining {settings.orphans:,} at cap {cap:,}")
                drains.append(_drain(queues[near], cap, settings.orphans, near))
            for v in queues.values():
                client.unlink(v.zkey, v.q.keys.pending)
    finally:
        for key in list(client.scan_iter(match=f"emq:{{{tag}-*", count=10_000)):
            client.unlink(key)
    use = usage(s0, sample(client))
    return Curve(server, version, settings, points, drains, ratio_pairs, wall_s=time.perf_counter() - t0,
                 server_main_cpu_s=use.main_cpu_s, client_cpu_s=process_cpu_s() - cpu0)


def _grid(verb: str, queues: dict[int, _Verb], settings: CurveSettings, progress: Progress | None) -> list[Point]:
    """Every (cap, k) at every M, `repeats` calls each."""
    points = []
    grid = [(cap, k) for cap in settings.caps for k in settings.ks(cap)]
    order = list(settings.sizes)
    for n, (cap, k) in enumerate(grid):
        _say(progress, f"{verb}: cap {cap:,} k {k:,} ({n + 1}/{len(grid)})")
        got: dict[int, tuple[list[int], list[float]]] = {m: ([], []) for m in order}
        for rep in range(settings.repeats):
            shift = rep % len(order)   # interleave the sizes, rotating which goes first
            for m in order[shift:] + order[:shift]:
                usec, rtt = _one_call(queues[m], cap, k)
                got[m][0].append(usec)
                got[m][1].append(rtt)
        for m in order:
            points.append(Point(verb, m, cap, k, *got[m]))
    return points


def _ratio_pairs(verb: str, queues: dict[int, _Verb], settings: CurveSettings,
                 progress: Progress | None) -> list[tuple[int, int]]:
    """The check: one full call of ratio_cap at the smallest and the largest M,
    side by side, many times (a median of five would let one preempted call decide it)."""
    lo_v, hi_v = queues[min(settings.sizes)], queues[max(settings.sizes)]
    pairs = []
    for rep in range(settings.ratio_repeats):
        if rep == 0:
            _say(progress, f"{verb}: ratio check, {settings.ratio_repeats} pairs")
        first, second = (lo_v, hi_v) if rep % 2 == 0 else (hi_v, lo_v)
        a = _one_call(first, settings.ratio_cap, settings.ratio_cap)[0]
        b = _one_call(second, settings.ratio_cap, settings.ratio_cap)[0]
        pairs.append((a, b) if rep % 2 == 0 else (b, a))
    return pairs
