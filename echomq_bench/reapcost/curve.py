"""The reap/promote curve's data: settings, one call's points, the mass-crash drains (back
to back, or paced by a pump), the cost of one reap call, and the curve that reads ratios,
a fit and tidy rows from them.

A curve is taken in one form of the live entries beside the due ones:
"bare", sorted-set members with no job rows (a tiny keyspace, the best
case), or "rows", each with the job row a real queue holds for it. The
verbs never read a live entry's row, so a difference between the forms is
what the larger keyspace costs: the rows a call does read and write are
looked up in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from echomq_bench.measurement.stats import median, quartiles
from echomq_bench.records.kinds.reapcost import (RATIO_TARGET, BuildEntry, FitEntry, FormEntry, ReapcostRecord,
                                                SideBySideEntry, VerbEntry)

__all__ = ["CurveSettings", "FULL", "QUICK", "VERBS", "FORMS", "FORM_LABELS", "FORM_MEANINGS", "Point", "Drain",
           "PacedDrain", "ReapCost", "Curve", "side_by_side", "run_record"]

VERBS = ("reap", "promote")
# In the order they are measured: the rows are added to the bare form's own
# entries, so the sets are the same ones, member for member, in both forms.
FORMS = ("bare", "rows")
FORM_LABELS = {"bare": "bare", "rows": "with job rows"}
FORM_MEANINGS = {
    "bare": "sorted-set members only, with no job rows: a tiny keyspace, the best case",
    "rows": "each with its job row, the hash a real claimed (or scheduled) job has: the keyspace of a real queue",
}


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
    forms: tuple[str, ...] = FORMS             # bare, then with job rows

    def __post_init__(self) -> None:
        unknown = [f for f in self.forms if f not in FORMS]
        if unknown or not self.forms:
            raise ValueError(f"forms must be some of {', '.join(FORMS)}, got {', '.join(self.forms) or 'none'}")

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
        return median(self.server_us)


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
class PacedDrain:
    """K orphans with one deadline drained by a pump, one call of `cap` per tick."""
    cap: int
    orphans: int
    calls: int                # calls that moved jobs
    after_deadline_ms: float  # the deadline -> the answer of the call that moved the last


@dataclass(frozen=True)
class ReapCost:
    """What one reap call costs the server (commandstats), in µs."""
    empty_usec: float                  # a call that finds nothing
    per_job_usec: float                # per job moved, beyond the call
    full_call_usec: float              # a call that moves the cap
    calls: int                         # the calls measured


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
    form: str = "bare"   # one of FORMS: the live entries bare, or with their job rows

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
            lo = median(p[0] for p in pairs)
            return median(p[1] for p in pairs) / lo if lo > 0 else None
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
            return median(r), r[0], r[-1]
        q1, q3 = quartiles(r, method="weibull")   # the stdlib's exclusive quartiles
        return median(r), q1, q3

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
                base = {"build": self.server, "form": self.form, "verb": p.verb, "M": p.size, "cap": p.cap,
                        "k": p.k, "moved": p.moved, "repeat": rep}
                yield {**base, "metric": "server_us", "value": srv, "unit": "us"}
                yield {**base, "metric": "client_us", "value": round(cli, 2), "unit": "us"}

    def ratio_rows(self) -> Iterable[dict[str, Any]]:
        s = self.settings
        for verb, pairs in self.ratio_pairs.items():
            for rep, (lo, hi) in enumerate(pairs):
                for m, us in ((min(s.sizes), lo), (max(s.sizes), hi)):
                    yield {"build": self.server, "form": self.form, "verb": verb, "M": m, "cap": s.ratio_cap,
                           "k": s.ratio_cap, "moved": s.ratio_cap, "repeat": rep,
                           "metric": "ratio_check_server_us", "value": us, "unit": "us"}

    def drain_rows(self) -> Iterable[dict[str, Any]]:
        for d in self.drains:
            base = {"build": self.server, "form": self.form, "verb": d.verb, "cap": d.cap, "K": d.orphans,
                    "M": d.size}
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

    def entry(self) -> BuildEntry:
        """The curve as the record keeps it: per verb the grid's medians, the ratio check, the fit, the drains."""
        s = self.settings
        verbs = {}
        for verb in s.verbs:
            paired = self.paired_ratio(verb)
            verbs[verb] = VerbEntry(
                median_server_us={f"M={p.size},cap={p.cap},k={p.k}": round(p.median_us, 1)
                                  for p in self.points if p.verb == verb},
                ratio_largest_to_smallest_M=_round(self.ratio(verb)),
                ratio_pairs=len(self.ratio_pairs.get(verb, [])),
                ratio_per_pair_median_q1_q3=(round(paired[0], 3), round(paired[1], 3), round(paired[2], 3))
                if paired else None,
                ratio_k0=_round(self.ratio(verb, 0)),
                fit=FitEntry(**{k: round(v, 3) for k, v in self.fit(verb).items()}),
                drain=tuple({"cap": d.cap, "K": d.orphans, "M": d.size, "calls": d.calls,
                             "back_to_back_ms": round(d.wall_ms, 2), "server_ms": round(d.server_ms, 2),
                             "max_call_us": d.max_call_us,
                             **{f"at_{c}ms_cadence_s": round(d.at_cadence_ms(c, self.call_us(verb, d.cap)) / 1000, 2)
                                for c in s.cadences_ms}}
                            for d in self.drains if d.verb == verb))
        wall = self.wall_s
        return BuildEntry(build=self.server, version=self.version, form=self.form, form_label=FORM_LABELS[self.form],
                          verbs=verbs,
                          server_main_thread_busy=round(self.server_main_cpu_s / wall, 3) if wall else None,
                          client_busy=round(self.client_cpu_s / wall, 3) if wall else None)


def side_by_side(bare: Curve, rows: Curve) -> list[SideBySideEntry]:
    """One full call (k = cap) in both forms at each verb, M and cap: the
    median server µs of each and the rows form's over the bare form's."""
    out = []
    s = bare.settings
    for verb in s.verbs:
        for cap in s.caps:
            for m in s.sizes:
                b, r = bare.point(verb, m, cap, cap), rows.point(verb, m, cap, cap)
                if b is None or r is None:
                    continue
                out.append(SideBySideEntry(build=bare.server, verb=verb, M=m, cap=cap, k=cap,
                                           bare_us=round(b.median_us, 1), rows_us=round(r.median_us, 1),
                                           rows_over_bare=_round(r.median_us / b.median_us if b.median_us > 0
                                                                 else None)))
    return out


def run_record(curves: Sequence[Curve]) -> ReapcostRecord:
    """The run's record: each form named and explained, a build entry per
    server and form, the full calls of both forms side by side, and whether
    reap met the ratio target per form."""
    forms = list(dict.fromkeys(c.form for c in curves))
    builds = [c.entry() for c in curves]
    by_form: dict[str, list[Curve]] = {f: [c for c in curves if c.form == f] for f in forms}
    pairs = zip(by_form.get("bare", []), by_form.get("rows", []))
    target: dict[str, bool | None] = {}
    for form in forms:
        ratios = [b.verbs["reap"].ratio_largest_to_smallest_M for b in builds if b.form == form and "reap" in b.verbs]
        target[form] = all(r is not None and r <= RATIO_TARGET for r in ratios) if ratios else None
    return ReapcostRecord(forms={f: FormEntry(FORM_LABELS[f], FORM_MEANINGS[f]) for f in forms},
                          builds=tuple(builds),
                          side_by_side=tuple(row for bare, rows in pairs for row in side_by_side(bare, rows)),
                          reap_ratio_target_met=target)


def _round(x: float | None, d: int = 3) -> float | None:
    return None if x is None else round(x, d)

