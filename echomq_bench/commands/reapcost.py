"""`echomq-bench reapcost`: what one reap (or promote) call costs the server,
against the size of the set it scans and the cap on what it moves.

For an active set of M live leases plus k expired ones, one `reap(cap)`
call blocks the server for the time it takes to move min(k, cap) jobs: every
other client's command waits behind it, so this is the latency spike the
cap bounds. The scripts find the expired leases as the lowest deadlines
(ZRANGE BYSCORE LIMIT, ZREMRANGEBYRANK), so the cost should grow like
log M + k, not like M; `run_reap_curve` checks that with the ratio of one
reap of 100 at the largest M to the same call at the smallest.

The cap also sets how fast a mass crash drains: K orphans need ceil(K/cap)
calls, one per tick of the reaper's cadence. The drain is measured
back to back (the reaper's own limit) and computed for given cadences.

Promote (due retries from the schedule) runs the same curve.

Every point is one call's server time from INFO commandstats (the server's
own clock), the median of `repeats` calls, with the M sizes interleaved so
a drifting machine slows them alike.
"""

from __future__ import annotations

import argparse
import math
import secrets
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import redis

from echomq_bench.load.bulk import BulkFill, delete_keys, id_block, server_ms
from echomq.queue import Queue
from echomq_bench.measurement.serverstats import bound, command_stats, process_cpu_s, sample, usage
from echomq_bench.progress import Progress

__all__ = ["CurveSettings", "FULL", "QUICK", "Point", "Drain", "Curve", "measure_curve", "run_reap_curve",
           "format_curve", "configure", "run"]

PAYLOAD = b'{"order": "ORD0Nt6z93U3dY", "qty": 3}'
FAR_MS = 36_000_000  # live leases and run-ats: ten hours ahead, never due during a run
VERBS = ("reap", "promote")


@dataclass(frozen=True)
class CurveSettings:
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)   # M, live entries
    caps: tuple[int, ...] = (10, 100, 1_000, 10_000)
    repeats: int = 5
    orphans: int = 10_000                      # K, the mass crash to drain
    cadences_ms: tuple[int, ...] = (100, 1_000)
    drain_size: int = 100_000                  # M beside the orphans while draining
    verbs: tuple[str, ...] = VERBS
    ratio_cap: int = 100                       # the check: one call of this cap, k = cap
    ratio_repeats: int = 21                    # ... at the smallest and largest M, A B A B

    def ks(self, cap: int) -> list[int]:
        """k from 0 to the cap: none, one, a tenth of the cap, the cap."""
        return sorted({0, 1, max(1, cap // 10), cap})


FULL = CurveSettings()
QUICK = CurveSettings(sizes=(1_000, 100_000, 1_000_000), caps=(10, 100, 1_000), repeats=3)


@dataclass(frozen=True)
class Point:
    verb: str
    size: int      # M
    cap: int
    k: int         # expired (reap) or due (promote) entries before the call
    server_us: list[int]
    client_us: list[float]

    @property
    def moved(self) -> int:
        return min(self.k, self.cap)

    @property
    def median_us(self) -> float:
        return float(statistics.median(self.server_us))


@dataclass(frozen=True)
class Drain:
    verb: str
    cap: int
    orphans: int
    size: int
    calls: int
    wall_ms: float            # back to back, measured
    server_ms: float          # sum of the calls' server time
    max_call_us: int

    def at_cadence_ms(self, cadence_ms: float, call_us: float) -> float:
        """One call per tick: the last of ceil(K/cap) calls starts (calls-1)
        ticks after the first."""
        return (self.calls - 1) * cadence_ms + self.calls * call_us / 1000


@dataclass(frozen=True)
class Curve:
    server: str
    version: str
    settings: CurveSettings
    points: list[Point] = field(default_factory=list)
    drains: list[Drain] = field(default_factory=list)
    # verb -> (µs at the smallest M, µs at the largest M) of the ratio check's pairs
    ratio_pairs: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    wall_s: float = 0.0
    server_main_cpu_s: float = 0.0
    client_cpu_s: float = 0.0

    def point(self, verb: str, size: int, cap: int, k: int) -> Point | None:
        for p in self.points:
            if (p.verb, p.size, p.cap, p.k) == (verb, size, cap, k):
                return p
        return None

    def ratio(self, verb: str, k: int | None = None) -> float | None:
        """One call of ratio_cap with k (default: the cap) at the largest M
        over the same at the smallest: from the ratio check's pairs when
        k is the cap, else from the grid's medians."""
        s = self.settings
        pairs = self.ratio_pairs.get(verb)
        if k is None and pairs:
            lo = statistics.median(p[0] for p in pairs)
            return statistics.median(p[1] for p in pairs) / lo if lo > 0 else None
        k = s.ratio_cap if k is None else k
        lo_p = self.point(verb, min(s.sizes), s.ratio_cap, k)
        hi_p = self.point(verb, max(s.sizes), s.ratio_cap, k)
        if not lo_p or not hi_p or lo_p.median_us <= 0:
            return None
        return hi_p.median_us / lo_p.median_us

    def paired_ratio(self, verb: str) -> tuple[float, float, float] | None:
        """The per-pair ratios of the check (median, and the interquartile
        range): each pair is two calls taken side by side."""
        r = sorted(hi / lo for lo, hi in self.ratio_pairs.get(verb, []) if lo > 0)
        if not r:
            return None
        if len(r) < 4:
            return float(statistics.median(r)), r[0], r[-1]
        q1, q2, q3 = statistics.quantiles(r, n=4)
        return float(q2), q1, q3

    def fit(self, verb: str) -> dict[str, float]:
        """Least squares of server µs = a + b*moved + c*log2(M): b is the
        cost per job moved, c the cost per doubling of the set."""
        import numpy as np

        pts = [p for p in self.points if p.verb == verb]
        if len({p.size for p in pts}) < 2:
            return {}
        X = np.array([[1.0, p.moved, math.log2(p.size)] for p in pts])
        y = np.array([p.median_us for p in pts])
        # Weighted by 1/y: the points span 10 µs to 50 ms, and their noise is
        # relative; an unweighted fit would let the 10,000-job calls' noise
        # decide the log M term.
        w = 1 / np.maximum(y, 1.0)
        (a, b, c), *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
        return {"base_us": float(a), "us_per_job": float(b), "us_per_doubling_of_M": float(c)}

    def tidy_rows(self) -> Iterable[dict[str, Any]]:
        for p in self.points:
            for rep, (srv, cli) in enumerate(zip(p.server_us, p.client_us)):
                base = {"build": self.server, "verb": p.verb, "M": p.size, "cap": p.cap, "k": p.k,
                        "moved": p.moved, "repeat": rep}
                yield {**base, "metric": "server_us", "value": srv, "unit": "us"}
                yield {**base, "metric": "client_us", "value": round(cli, 2), "unit": "us"}

    def ratio_rows(self) -> Iterable[dict[str, Any]]:
        s = self.settings
        for verb, pairs in self.ratio_pairs.items():
            for rep, (lo, hi) in enumerate(pairs):
                for m, us in ((min(s.sizes), lo), (max(s.sizes), hi)):
                    yield {"build": self.server, "verb": verb, "M": m, "cap": s.ratio_cap, "k": s.ratio_cap,
                           "moved": s.ratio_cap, "repeat": rep, "metric": "ratio_check_server_us", "value": us,
                           "unit": "us"}

    def drain_rows(self) -> Iterable[dict[str, Any]]:
        for d in self.drains:
            base = {"build": self.server, "verb": d.verb, "cap": d.cap, "K": d.orphans, "M": d.size}
            yield {**base, "metric": "calls", "value": d.calls, "unit": "calls"}
            yield {**base, "metric": "drain_back_to_back_ms", "value": round(d.wall_ms, 3), "unit": "ms"}
            yield {**base, "metric": "drain_server_ms", "value": round(d.server_ms, 3), "unit": "ms"}
            yield {**base, "metric": "max_call_us", "value": d.max_call_us, "unit": "us"}
            for cadence in self.settings.cadences_ms:
                yield {**base, "cadence_ms": cadence, "metric": "drain_at_cadence_ms",
                       "value": round(d.at_cadence_ms(cadence, self.call_us(d.verb, d.cap)), 1), "unit": "ms"}

    def call_us(self, verb: str, cap: int) -> float:
        """One full call (k = cap) at the drain's M, or the nearest M measured."""
        s = self.settings
        near = min(s.sizes, key=lambda m: abs(math.log(m) - math.log(s.drain_size)))
        p = self.point(verb, near, cap, cap)
        return p.median_us if p else float("nan")

    def summary(self) -> dict[str, Any]:
        s = self.settings
        out: dict[str, Any] = {"build": self.server, "version": self.version, "verbs": {},
                               "server_main_thread_busy": round(self.server_main_cpu_s / self.wall_s, 3)
                               if self.wall_s else None,
                               "client_busy": round(self.client_cpu_s / self.wall_s, 3) if self.wall_s else None}
        for verb in s.verbs:
            table = {f"M={p.size},cap={p.cap},k={p.k}": round(p.median_us, 1) for p in self.points if p.verb == verb}
            paired = self.paired_ratio(verb)
            out["verbs"][verb] = {
                "median_server_us": table,
                "ratio_largest_to_smallest_M": _round(self.ratio(verb)),
                "ratio_pairs": len(self.ratio_pairs.get(verb, [])),
                "ratio_per_pair_median_q1_q3": [round(x, 3) for x in paired] if paired else None,
                "ratio_k0": _round(self.ratio(verb, 0)),
                "ratio_target": 2.0,
                "fit": {k: round(v, 3) for k, v in self.fit(verb).items()},
                "drain": [{"cap": d.cap, "K": d.orphans, "M": d.size, "calls": d.calls,
                           "back_to_back_ms": round(d.wall_ms, 2), "server_ms": round(d.server_ms, 2),
                           "max_call_us": d.max_call_us,
                           **{f"at_{c}ms_cadence_s": round(d.at_cadence_ms(c, self.call_us(verb, d.cap)) / 1000, 2)
                              for c in s.cadences_ms}}
                          for d in self.drains if d.verb == verb],
            }
        return out


def _round(x: float | None, d: int = 3) -> float | None:
    return None if x is None else round(x, d)


# -- measuring -----------------------------------------------------------------------------


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
                if progress:
                    progress(f"{verb}: filling M={m:,}")
                v.live(m)
            for v in queues.values():  # settle after the fill: the first calls read cold memory
                for _ in range(3):
                    _one_call(v, settings.ratio_cap, 1)
            grid = [(cap, k) for cap in settings.caps for k in settings.ks(cap)]
            order = list(settings.sizes)
            for n, (cap, k) in enumerate(grid):
                if progress:
                    progress(f"{verb}: cap {cap:,} k {k:,} ({n + 1}/{len(grid)})")
                got: dict[int, tuple[list[int], list[float]]] = {m: ([], []) for m in order}
                for rep in range(settings.repeats):
                    shift = rep % len(order)   # interleave the sizes, rotating which goes first
                    for m in order[shift:] + order[:shift]:
                        usec, rtt = _one_call(queues[m], cap, k)
                        got[m][0].append(usec)
                        got[m][1].append(rtt)
                for m in order:
                    points.append(Point(verb, m, cap, k, *got[m]))
            # The check: one full call of ratio_cap at the smallest and the
            # largest M, side by side, many times (a median of five would let
            # one preempted call decide it).
            lo_v, hi_v = queues[min(order)], queues[max(order)]
            pairs = []
            for rep in range(settings.ratio_repeats):
                if progress and rep == 0:
                    progress(f"{verb}: ratio check, {settings.ratio_repeats} pairs")
                first, second = (lo_v, hi_v) if rep % 2 == 0 else (hi_v, lo_v)
                a = _one_call(first, settings.ratio_cap, settings.ratio_cap)[0]
                b = _one_call(second, settings.ratio_cap, settings.ratio_cap)[0]
                pairs.append((a, b) if rep % 2 == 0 else (b, a))
            ratio_pairs[verb] = pairs
            # The drain beside drain_size live entries (or the nearest measured M).
            near = min(settings.sizes, key=lambda m: abs(math.log(m) - math.log(settings.drain_size)))
            for cap in settings.caps:
                if progress:
                    progress(f"{verb}: draining {settings.orphans:,} at cap {cap:,}")
                drains.append(_drain(queues[near], cap, settings.orphans, near))
            for v in queues.values():
                client.unlink(v.zkey, v.q.keys.pending)
    finally:
        for key in list(client.scan_iter(match=f"emq:{{{tag}-*", count=10_000)):
            client.unlink(key)
    use = usage(s0, sample(client))
    return Curve(server, version, settings, points, drains, ratio_pairs, wall_s=time.perf_counter() - t0,
                 server_main_cpu_s=use.main_cpu_s, client_cpu_s=process_cpu_s() - cpu0)


# -- reporting -----------------------------------------------------------------------------


def format_curve(c: Curve) -> str:
    s = c.settings
    lines = [f"== {c.server}: {c.version} -- server µs of one call (median of {s.repeats}), by M live entries"]
    for verb in s.verbs:
        head = f"{verb:<8} {'cap':>6} {'k':>6} " + " ".join(f"{'M=' + _si(m):>9}" for m in s.sizes)
        lines += [head, "-" * len(head)]
        for cap in s.caps:
            for k in s.ks(cap):
                cells = []
                for m in s.sizes:
                    p = c.point(verb, m, cap, k)
                    cells.append(f"{p.median_us:>9.0f}" if p else f"{'-':>9}")
                lines.append(f"{'':<8} {cap:>6,} {k:>6,} " + " ".join(cells))
        ratio, paired, r0 = c.ratio(verb), c.paired_ratio(verb), c.ratio(verb, 0)
        fit = c.fit(verb)
        if ratio is not None:
            verdict = "ok" if ratio <= 2.0 else "OVER"
            pr = (f" (median of {len(c.ratio_pairs.get(verb, []))} side-by-side pairs; per pair "
                  f"{paired[0]:.2f}, IQR {paired[1]:.2f}..{paired[2]:.2f})" if paired else "")
            r0_text = f"{r0:.2f}x" if r0 is not None else "-"
            lines.append(f"{verb}: one call of {s.ratio_cap} at M={_si(max(s.sizes))} / at M={_si(min(s.sizes))}: "
                         f"{ratio:.2f}x{pr}; k=0: {r0_text} (grid medians); target <= 2x: {verdict} "
                         f"(a cost linear in M would give {max(s.sizes) / min(s.sizes):,.0f}x)")
        if fit:
            lines.append(f"{verb}: fit µs = {fit['base_us']:.1f} + {fit['us_per_job']:.2f}*moved + "
                         f"{fit['us_per_doubling_of_M']:.2f}*log2(M)")
        drains = [d for d in c.drains if d.verb == verb]
        if drains:
            lines.append(f"{verb}: drain of a mass crash, K={drains[0].orphans:,} at once beside "
                         f"M={_si(drains[0].size)}; one call per tick at each cadence")
            head = (f"{'cap':>8} {'calls':>6} {'µs/call':>8} {'max µs':>7} {'back-to-back':>12} "
                    + " ".join(f"{'@' + _ms(cd):>9}" for cd in s.cadences_ms))
            lines.append(head)
            for d in drains:
                call = c.call_us(verb, d.cap)
                lines.append(f"{d.cap:>8,} {d.calls:>6,} {call:>8.0f} {d.max_call_us:>7,} {d.wall_ms:>10.0f}ms "
                             + " ".join(f"{_dur(d.at_cadence_ms(cd, call)):>9}" for cd in s.cadences_ms))
    side = bound(c.server_main_cpu_s / c.wall_s if c.wall_s else 0, c.client_cpu_s / c.wall_s if c.wall_s else 0)
    lines.append(f"server main thread busy {c.server_main_cpu_s / c.wall_s:.0%}, client "
                 f"{c.client_cpu_s / c.wall_s:.0%} over {c.wall_s:.0f} s: {side}-bound (the client fills and "
                 "cleans between calls; the figures are the server's own clock)")
    return "\n".join(lines)


def _si(n: int) -> str:
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def _dur(ms: float) -> str:
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s"


def _ms(ms: int) -> str:
    return f"{ms // 1000}s" if ms >= 1000 and ms % 1000 == 0 else f"{ms}ms"


def chart(curves: Sequence[Curve], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    verbs = curves[0].settings.verbs
    fig, axes = plt.subplots(len(verbs), 2, figsize=(15, 4.4 * len(verbs)), squeeze=False)
    styles = ["-", "--", ":", "-."]
    from matplotlib.lines import Line2D

    build_keys = [Line2D([], [], color="black", linestyle=styles[i % len(styles)], label=f"{c.server} ({c.version})")
                  for i, c in enumerate(curves)]
    for row, verb in enumerate(verbs):
        left, right = axes[row]
        for ci, c in enumerate(curves):
            s = c.settings
            first = ci == 0
            for mi, m in enumerate(s.sizes):
                xs = [cap for cap in s.caps if c.point(verb, m, cap, cap)]
                ys = [c.point(verb, m, cap, cap).median_us / 1000 for cap in xs]  # type: ignore[union-attr]
                left.plot(xs, ys, marker="o", linestyle=styles[ci % len(styles)], color=f"C{mi}",
                          label=f"M={_si(m)}" if first else None)
            for ki, cap in enumerate(s.caps):
                xs = [m for m in s.sizes if c.point(verb, m, cap, cap)]
                ys = [c.point(verb, m, cap, cap).median_us / 1000 for m in xs]  # type: ignore[union-attr]
                right.plot(xs, ys, marker="o", linestyle=styles[ci % len(styles)], color=f"C{ki}",
                           label=f"cap={cap:,}, k=cap" if first else None)
            empty = [m for m in s.sizes if c.point(verb, m, s.ratio_cap, 0)]
            right.plot(empty, [c.point(verb, m, s.ratio_cap, 0).median_us / 1000 for m in empty],  # type: ignore[union-attr]
                       marker="x", linestyle=styles[ci % len(styles)], color="grey",
                       label="k=0 (nothing due)" if first else None)
        left.set(xscale="log", yscale="log", xlabel="cap (k = cap expired)" if verb == "reap" else "cap (k = cap due)",
                 ylabel="server ms, one call", title=f"{verb}: one full call blocks the server for")
        right.set(xscale="log", yscale="log", xlabel="M (live entries in the set)", ylabel="server ms, one call",
                  title=f"{verb}: flat in M means log M, not M")
        for ax in (left, right):
            ax.grid(True, which="both", alpha=0.3)
            handles, _ = ax.get_legend_handles_labels()
            ax.legend(handles=handles + build_keys, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("echomq reap/promote cost: server time of one call (median), commandstats")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_reap_curve(servers: Sequence[Any], *, quick: bool = False, out_dir: Path | str | None = None,
                   settings: CurveSettings | None = None, verbose: bool = True) -> dict[str, Any]:
    """Measure the curves on each server and write results/<run-id>/ with
    meta.json, reapcost.csv, drain.csv, summary.json and reapcost.png.
    Returns the summary (with "run_dir")."""
    from echomq_bench.records import meta, files as results

    settings = settings or (QUICK if quick else FULL)
    curves = []
    for server in servers:
        progress = Progress(label=f"reapcost {server.name}") if verbose else None
        with server.client() as client:
            curves.append(measure_curve(client, server=server.name, version=server.version(),
                                        settings=settings, progress=progress))
        if progress:
            progress.done()
    run_dir = results.new_run_dir("reapcost", out_dir)
    info = meta.collect(servers, reapcost={
        "sizes": list(settings.sizes), "caps": list(settings.caps), "repeats": settings.repeats,
        "orphans": settings.orphans, "cadences_ms": list(settings.cadences_ms), "drain_size": settings.drain_size,
        "verbs": list(settings.verbs), "quick": quick})
    summary: dict[str, Any] = {"builds": [c.summary() for c in curves]}
    ratios = [b["verbs"]["reap"]["ratio_largest_to_smallest_M"] for b in summary["builds"] if "reap" in b["verbs"]]
    summary["reap_ratio_target_met"] = all(r is not None and r <= 2.0 for r in ratios) if ratios else None
    results.write_record(run_dir, results.Record(
        kind="reapcost", summary=summary, meta=info,
        tables={"reapcost": [r for c in curves for r in (*c.tidy_rows(), *c.ratio_rows())],
                "drain": [r for c in curves for r in c.drain_rows()]}))
    chart(curves, run_dir / "reapcost.png")
    summary["run_dir"] = str(run_dir)
    summary["text"] = "\n".join(format_curve(c) for c in curves)
    return summary


# -- CLI -----------------------------------------------------------------------------------


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x.replace("_", "")) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"want comma-separated integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"want positive integers, got {text!r}")
    return values


def _verbs(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    if not values or any(v not in VERBS for v in values):
        raise argparse.ArgumentTypeError(f"want reap and/or promote, got {text!r}")
    return values


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("--quick", action="store_true", help="M up to 1M in 3 steps, caps up to 1,000, 3 repeats")
    parser.add_argument("--sizes", type=_int_list, default=None, metavar="M,...", help="live entries M")
    parser.add_argument("--caps", type=_int_list, default=None, metavar="CAP,...", help="caps (at most 100000)")
    parser.add_argument("--repeats", type=int, default=None, help="calls per point (median)")
    parser.add_argument("--orphans", type=int, default=None, metavar="K", help="mass crash size to drain")
    parser.add_argument("--cadence-ms", type=_int_list, default=None, metavar="MS,...", help="reaper cadences")
    parser.add_argument("--verbs", type=_verbs, default=None, help="reap,promote (default both)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default results/<run-id>)")


def run(args: argparse.Namespace) -> int:
    from echomq_bench.servers.embedded import running

    settings = QUICK if args.quick else FULL
    changes: dict[str, Any] = {}
    for name, value in (("sizes", args.sizes), ("caps", args.caps), ("repeats", args.repeats),
                        ("orphans", args.orphans), ("cadences_ms", args.cadence_ms), ("verbs", args.verbs)):
        if value is not None:
            changes[name] = value
    if args.caps and max(args.caps) > 100_000:
        print("echomq-bench reapcost: error: a cap is at most 100000 (the scripts' limit)", file=sys.stderr)
        return 2
    for name in ("repeats", "orphans"):
        if changes.get(name) is not None and changes[name] < 1:
            print(f"echomq-bench reapcost: error: --{name} must be at least 1", file=sys.stderr)
            return 2
    settings = replace(settings, **changes)
    if settings.ratio_cap not in settings.caps:
        settings = replace(settings, ratio_cap=min(settings.caps, key=lambda c: abs(c - 100)))
    with running(*args.server) as servers:
        summary = run_reap_curve(servers, quick=args.quick, out_dir=args.out, settings=settings)
    print(summary["text"])
    print(f"results: {summary['run_dir']}")
    return 0
