"""Measuring the reap/promote curve on one server, in each form.

Every point is one call's server time from INFO commandstats (the server's
own clock), the median of `repeats` calls, with the M sizes interleaved so
a drifting machine slows them alike.

The forms run one after the other on the same sets: bare first, then the
same live entries with a job row each. They cannot be interleaved, since a
bare call beside the rows would no longer see a bare keyspace. The sizes
of one verb are all filled while it is measured, so in the rows form every
call sees the rows of every M: a keyspace of the sizes' sum.
"""

from __future__ import annotations

import math
import random
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import redis

from echomq import Queue
from echomq_bench.errors import MeasurementError
from echomq_bench.load.bulk import BulkFill, delete_keys, id_block, server_ms
from echomq_bench.load.calls import RedisCalls
from echomq_bench.load.engine import Event, Pump, PumpPolicy, Stop
from echomq_bench.progress import ProgressFn, prefixed
from echomq_bench.measurement.serverstats import command_stats, process_cpu_s, sample, usage
from echomq_bench.reapcost.curve import (FORM_LABELS, FORMS, FULL, Curve, CurveSettings, Drain, PacedDrain, Point,
                                         ReapCost)

__all__ = ["measure_curves", "LiveEntries", "reap_cost", "paced_drain", "PAYLOAD", "FAR_MS"]

PAYLOAD = b'{"order": "ORD0Nt6z93U3dY", "qty": 3}'
FAR_MS = 36_000_000  # live leases and run-ats: ten hours ahead, never due during a run


class LiveEntries:
    """reap or promote on one queue: where its entries live, how a due
    entry looks, and the call; and the live entries beside the due ones,
    bare or with their rows."""

    def __init__(self, verb: str, q: Queue, bulk: BulkFill) -> None:
        self.verb, self.q, self.bulk = verb, q, bulk
        k = q.keys
        self.zkey, self.state = (k.active, "active") if verb == "reap" else (k.schedule, "scheduled")
        self.live_ids: list[str] = []
        self.has_rows = False
        self._score0 = 0

    def live(self, n: int) -> None:
        """n entries that never fall due during the run, set members only
        (the bare form)."""
        self.live_ids = id_block(n)
        self._score0 = server_ms(self.q.client) + FAR_MS
        self.bulk.fill(self.zkey, self.live_ids, score0=self._score0, step=1)

    def add_rows(self) -> None:
        """A job row for every live entry, the hash a claimed job has (reap:
        state active, attempts 1, the payload) or a retried one (promote:
        state scheduled; its last_error is left out, as in the due rows).
        The members are written again at the scores they have, so the set
        stays as it was."""
        self.bulk.fill(self.zkey, self.live_ids, row_prefix=self.q.keys.job_prefix, state=self.state,
                       attempts=1, payload=PAYLOAD, score0=self._score0, step=1)
        self.has_rows = True

    def drop(self) -> None:
        """The live entries, their rows and what the calls left in pending."""
        if self.has_rows:
            delete_keys(self.q.client, map(self.q.keys.job, self.live_ids))
        self.q.client.unlink(self.zkey, self.q.keys.pending)
        self.live_ids, self.has_rows = [], False

    def due(self, k: int, at_ms: int | None = None) -> list[str]:
        """k rows due long ago (deadlines or run-ats 1..k), or all due together at
        `at_ms` on the server's clock: a mass crash of k claimed jobs."""
        ids = id_block(k)
        if ids:
            self.bulk.fill(self.zkey, ids, row_prefix=self.q.keys.job_prefix, state=self.state, attempts=1,
                           payload=PAYLOAD, score0=1 if at_ms is None else at_ms, step=1 if at_ms is None else 0)
        return ids

    def call(self, cap: int) -> int:
        return self.q.reap(cap) if self.verb == "reap" else self.q.promote(cap)

    def clean(self, ids: Sequence[str]) -> None:
        """Drop what the call moved (now in pending) and what it left due."""
        c = self.q.client
        c.unlink(self.q.keys.pending)
        c.zremrangebyscore(self.zkey, "-inf", len(ids) + 1)
        delete_keys(c, map(self.q.keys.job, ids))


def _one_call(v: LiveEntries, cap: int, k: int) -> tuple[int, float]:
    """Set k due entries, then one timed call; its server µs and round trip µs."""
    ids = v.due(k)
    calls0, usec0 = command_stats(v.q.client)
    t0 = time.perf_counter()
    moved = v.call(cap)
    rtt = (time.perf_counter() - t0) * 1e6
    calls1, usec1 = command_stats(v.q.client)
    v.clean(ids)
    if moved != min(k, cap):
        raise MeasurementError(f"{v.verb}({cap}) with {k} due moved {moved}, expected {min(k, cap)}")
    if calls1 - calls0 != 1:
        raise MeasurementError(f"the server counted {calls1 - calls0} EVALSHA calls where this process made one; "
                               "another client is using the server")
    return usec1 - usec0, rtt


def _drain(v: LiveEntries, cap: int, orphans: int, size: int) -> Drain:
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
            raise MeasurementError(f"{v.verb}({cap}) moved nothing with {left} still due")
    wall = (time.perf_counter() - t0) * 1000
    calls1, usec1 = command_stats(v.q.client)
    v.clean(ids)
    return Drain(v.verb, cap, orphans, size, n, wall, (usec1 - usec0) / 1000, worst)


def _say(progress: ProgressFn | None, text: str) -> None:
    if progress:
        progress(text)


@dataclass
class _Taken:
    """What one form's calls gave, and what the machine spent on them."""
    points: list[Point] = field(default_factory=list)
    drains: list[Drain] = field(default_factory=list)
    ratio_pairs: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    wall_s: float = 0.0
    server_main_cpu_s: float = 0.0
    client_cpu_s: float = 0.0


@contextmanager
def _charged(client: redis.Redis, taken: _Taken) -> Iterator[None]:
    """Charge the wall time and CPU of the block to this form."""
    s0, cpu0, t0 = sample(client), process_cpu_s(), time.perf_counter()
    yield
    spent = usage(s0, sample(client))
    taken.wall_s += time.perf_counter() - t0
    taken.server_main_cpu_s += spent.main_cpu_s
    taken.client_cpu_s += process_cpu_s() - cpu0


def measure_curves(client: redis.Redis, *, server: str = "?", version: str = "?",
                   settings: CurveSettings = FULL, progress: ProgressFn | None = None) -> dict[str, Curve]:
    """The whole grid for each verb on one server, in each of the settings'
    forms (bare first); one curve per form. Keys are removed after."""
    tag = f"rc{secrets.token_hex(3)}"
    bulk = BulkFill(client)
    forms = [f for f in FORMS if f in settings.forms]
    taken = {form: _Taken() for form in forms}
    try:
        for verb in settings.verbs:
            queues = {m: LiveEntries(verb, Queue(client, f"{tag}-{verb}-{m}", max_attempts=3), bulk)
                      for m in settings.sizes}
            for form in forms:
                say = prefixed(progress, f"[{FORM_LABELS[form]}]")
                with _charged(client, taken[form]):
                    _fill(verb, form, queues, say)
                    _measure_form(verb, queues, settings, taken[form], say)
            for v in queues.values():
                v.drop()
    finally:
        delete_keys(client, list(client.scan_iter(match=f"emq:{{{tag}-*", count=10_000)))
    return {form: Curve(server, version, settings, t.points, t.drains, t.ratio_pairs, form=form, wall_s=t.wall_s,
                        server_main_cpu_s=t.server_main_cpu_s, client_cpu_s=t.client_cpu_s)
            for form, t in taken.items()}


def _fill(verb: str, form: str, queues: dict[int, LiveEntries], progress: ProgressFn | None) -> None:
    """The live entries of the form: the members first (bare), then, when
    they are there already, their rows."""
    for m, v in queues.items():
        if not v.live_ids:
            _say(progress, f"{verb}: filling M={m:,}")
            v.live(m)
        if form == "rows":
            _say(progress, f"{verb}: writing {m:,} job rows")
            v.add_rows()


def _measure_form(verb: str, queues: dict[int, LiveEntries], settings: CurveSettings, taken: _Taken,
                  progress: ProgressFn | None) -> None:
    """Settle, then the grid, the ratio check and the drains, as they stand."""
    for v in queues.values():  # settle after the fill: the first calls read cold memory
        for _ in range(3):
            _one_call(v, settings.ratio_cap, 1)
    taken.points.extend(_grid(verb, queues, settings, progress))
    taken.ratio_pairs[verb] = _ratio_pairs(verb, queues, settings, progress)
    # The drain beside drain_size live entries (or the nearest measured M).
    near = min(settings.sizes, key=lambda m: abs(math.log(m) - math.log(settings.drain_size)))
    for cap in settings.caps:
        _say(progress, f"{verb}: draining {settings.orphans:,} at cap {cap:,}")
        taken.drains.append(_drain(queues[near], cap, settings.orphans, near))


def _grid(verb: str, queues: dict[int, LiveEntries], settings: CurveSettings,
          progress: ProgressFn | None) -> list[Point]:
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


def _ratio_pairs(verb: str, queues: dict[int, LiveEntries], settings: CurveSettings,
                 progress: ProgressFn | None) -> list[tuple[int, int]]:
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


def reap_cost(v: LiveEntries, cap: int, empty_calls: int, full_calls: int) -> ReapCost:
    """What one call costs the server beside v's live entries: the mean of
    `empty_calls` calls with nothing due, and of `full_calls` calls that move
    the cap; the difference over the cap is the cost per job moved."""
    empty = sum(_one_call(v, cap, 0)[0] for _ in range(empty_calls)) / max(1, empty_calls)
    full = sum(_one_call(v, cap, cap)[0] for _ in range(full_calls)) / max(1, full_calls)
    per_job = max(0.0, (full - empty) / cap)
    return ReapCost(empty, per_job, empty + per_job * cap, empty_calls + full_calls)


class _Drained:
    """Hears the pump draining the orphans; stops it when all k came back."""

    def __init__(self, k: int, stop: Stop) -> None:
        self.k, self.stop = k, stop
        self.moved, self.calls, self.end = 0, 0, math.nan

    def __call__(self, e: Event) -> None:
        if e.count:
            self.moved += e.count
            self.calls += 1
            self.end = e.t1
        if self.moved >= self.k:
            self.stop.set()


def paced_drain(v: LiveEntries, cap: int, orphans: int, lease_ms: float, interval_s: float,
                rng: random.Random) -> PacedDrain:
    """K orphans whose leases run out together `lease_ms` from now, drained by
    the load engine's pump, one call of `cap` per tick at a random phase: how
    long after the deadline the last came back, in how many calls (the
    back-to-back drain is `_drain`'s)."""
    # The server's clock sets the deadline; this process's clock times the drain from it.
    t0, at_ms = time.perf_counter(), server_ms(v.q.client)
    deadline = t0 + lease_ms / 1000.0
    ids = v.due(orphans, at_ms=at_ms + math.ceil(lease_ms))
    give_up = deadline + (orphans / cap + 5) * interval_s + 5
    stop = Stop(deadline=give_up)
    drained = _Drained(orphans, stop)
    policy = PumpPolicy(interval_s=interval_s, reap_limit=cap, promote=False, max_attempts=v.q.max_attempts,
                        random_phase=True)
    Pump(RedisCalls(v.q.client), [v.q.keys], policy, drained, rng, strict=True).run(stop)
    v.clean(ids)
    if drained.moved < orphans:
        raise MeasurementError(f"the pump moved {drained.moved} of {orphans} orphans before giving up")
    return PacedDrain(cap, orphans, drained.calls, (drained.end - deadline) * 1000)
