"""From a sweep's raw data to measured rates with intervals, the model's
values for the same leases, and whether the two agree.

Everything here is nominal milliseconds (the run's real durations times
the time scale), except the fields whose names say `real`. The rates
(false expiry, overruns, duplicates, wasted work) have their intervals over
blocks of time (echomq_bench.lease.blocks); the recovery is given twice, as
measured (real times the scale, beside the model, which takes the measured
overheads times the scale too) and at scale 1 (echomq_bench.lease.rescale),
which the recommendation reads.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from echomq_bench.lease.blocks import BlockCounts, BlockRate, block_counts, block_length_s, block_rate, \
    lent_design_effect, longest
from echomq_bench.lease.figures import Interval, finite, quantile_figures
from echomq_bench.lease.model import drain_time_ms
from echomq_bench.lease.modelfit import agreement, held_out_figures, model_figures, model_inputs, pooled_inputs
from echomq_bench.lease.records import LeaseData, SweepData
from echomq_bench.lease.rescale import measured_waits, recovery_at_scale_one
from echomq_bench.lease.split import ModelSplit, fit_part, model_split, predicted_part
from echomq_bench.measurement.intervals import rate_ci
from echomq_bench.measurement.stats import bootstrap_ci, quantile
from echomq_bench.measurement.workdist import Distribution

__all__ = ["Interval", "LeaseResult", "MassResult", "SweepResult", "agreement", "analyse", "held_out_figures",
           "model_inputs", "overran_mask", "pooled_inputs"]

THROUGHPUT_BATCHES = 10


@dataclass(frozen=True)
class LeaseResult:
    lease_ms: float
    lease_real_ms: int
    executions: int
    live: int
    crashes: int
    refused: int
    false_expiry: Interval            # refused completes / live executions
    overran: int                      # live executions whose claim-sent to complete-answered span passed the lease
    overran_rate: Interval            # overran / live: an upper bound on false expiry at any time scale
    duplicates: int
    duplicate_rate: Interval          # executions that ran a job someone else also ran / executions
    wasted_work_s: float              # nominal work seconds whose complete was refused
    wasted_share: Interval            # of all live work
    blocks: dict[str, Any]            # per rate: its blocks of time and the design effect its interval took
    recovery: dict[str, Any]          # crash -> re-claim as measured: n, censored, median, p99 (Interval), max
    recovery_unscaled: dict[str, Any]  # the same at scale 1, the physical delays counted once: what is judged
    deadline_to_claim: dict[str, Any] # lease deadline -> re-claim: median, p99 (Interval)
    throughput: Interval              # completed jobs per nominal second
    reap: dict[str, Any]
    overhead_ms: dict[str, float]     # claim -> complete beyond the work, nominal (and real), fit half
    model: dict[str, Any]             # fed the fit half's inputs (echomq_bench.lease.split)
    held_out: dict[str, Any]          # the held-out half: live, refused, false_expiry, crashes, recovery_median
    agree: dict[str, bool | None]     # the model against the held-out half's intervals
    recovery_samples_ms: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    unscaled_samples_ms: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    deadline_samples_ms: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key.endswith("_samples_ms"):
                continue
            out[key] = value
        for key in ("false_expiry", "overran_rate", "duplicate_rate", "wasted_share", "throughput"):
            out[key] = getattr(self, key).to_dict()
        for group in ("recovery", "recovery_unscaled", "deadline_to_claim", "held_out", "blocks"):
            out[group] = {k: (v.to_dict() if isinstance(v, (Interval, BlockRate)) else finite(v))
                          for k, v in getattr(self, group).items()}
        return out


@dataclass(frozen=True)
class MassResult:
    k: int
    cap: int
    reps: int
    drain_ms: list[float]
    ticks: list[int]
    spread_ms: list[float]
    model_ticks: int
    model_drain_ms: tuple[float, float, float]   # earliest, mean, latest

    @property
    def agree(self) -> bool:
        lo, _, hi = self.model_drain_ms
        # A deadline spread across a tick boundary can take one extra tick.
        slack = max(self.spread_ms, default=0.0)
        return bool(self.drain_ms) and all(lo - slack <= d <= hi + slack for d in self.drain_ms) and \
            all(t == self.model_ticks for t in self.ticks)


@dataclass(frozen=True)
class SweepResult:
    data: SweepData
    leases: list[LeaseResult]
    mass: MassResult | None
    bottleneck: str
    split: ModelSplit

    @property
    def settings(self) -> Any:
        return self.data.settings

    def agreement_count(self) -> tuple[int, int]:
        both = sum(r.agree["false_expiry"] is True and r.agree["recovery_median"] is True for r in self.leases)
        return both, len(self.leases)


def overran_mask(live: Any, lease_real_ms: int) -> np.ndarray:
    """Live executions that may have outlived their lease: from the claim's
    send to the complete's reply, on the client's clock, longer than the
    lease the server gave. The server ran the claim after it was sent and
    the complete before it answered, so every execution whose complete
    landed past its deadline is counted, and with it every false expiry
    (a refused complete came after a reap, which came after the deadline).
    Why this bounds the false expiry of the unscaled system from above:
    docs/design/lease-model.md, "Confirming at a time scale"."""
    if not live["t0"].size:
        return np.zeros(0, dtype=bool)
    return np.asarray((live["t3"] - live["t0"]) > lease_real_ms / 1000)


def _overrun_counts(d: LeaseData) -> BlockCounts:
    return block_counts(d.live["t0"], overran_mask(d.live, d.lease_real_ms), d.window,
                        block_length_s(d.lease_real_ms))


def _duplicates(d: LeaseData) -> tuple[np.ndarray, np.ndarray]:
    """Claim times of every execution and whether it ran a job that was claimed again while its
    worker lived: a live worker refused at complete, or a crash after someone had re-claimed the job."""
    live, crashed = d.live, d.crashed
    dup_live = (~live["ok"] & ~np.isnan(live["reclaim"])) if live["t0"].size else np.zeros(0, dtype=bool)
    dup_crash = (crashed["reclaim"] < crashed["tx"]) if crashed["t0"].size else np.zeros(0, dtype=bool)
    return np.concatenate([live["t0"], crashed["t0"]]), np.concatenate([dup_live, dup_crash])


def _rates(d: LeaseData, lent: float | None) -> dict[str, BlockRate]:
    length = block_length_s(d.lease_real_ms)
    refused = ~d.live["ok"] if d.live["t0"].size else np.zeros(0, dtype=bool)
    times, dups = _duplicates(d)
    return {"false_expiry": block_rate(block_counts(d.live["t0"], refused, d.window, length), lent),
            "overran": block_rate(_overrun_counts(d), lent),
            "duplicates": block_rate(block_counts(times, dups, d.window, length), lent),
            "longest": block_rate(_longest_counts(d), None)}


def _longest_counts(d: LeaseData) -> BlockCounts:
    live = d.live
    return longest(live["t0"], live["t3"] - live["t0"], d.window, block_length_s(d.lease_real_ms))


def _recoveries(d: LeaseData, settings: Any) -> tuple[dict[str, Any], dict[str, Any], tuple[np.ndarray, ...]]:
    """The crash -> re-claim figures as measured and at scale 1, and their samples."""
    s = settings.time_scale
    measured, to_claim = measured_waits(d, s)
    recovery = {**quantile_figures(measured), "censored": d.censored_crashed}
    scaled = recovery_at_scale_one(d, s, settings.reap_every_ms, settings.consumers)
    physical = scaled.physical_ms[np.isfinite(scaled.physical_ms)]
    unscaled = {**quantile_figures(scaled.wait_ms), "censored": d.censored_crashed, "corrected": scaled.corrected,
                "physical_p50_real_ms": quantile(physical, 0.5), "physical_p99_real_ms": quantile(physical, 0.99)}
    return recovery, unscaled, (measured, scaled.wait_ms, to_claim)


def _lease_result(d: LeaseData, data: SweepData, dist: Distribution) -> LeaseResult:
    settings = data.settings
    lent = lent_design_effect(_longest_counts(d))
    rates = _rates(d, lent)
    fe, over, dup = rates["false_expiry"], rates["overran"], rates["duplicates"]
    wasted, wasted_share = _wasted(d, settings.seed)
    recovery, unscaled, (measured, scaled, to_claim) = _recoveries(d, settings)
    overhead, model = model_figures(fit_part(d), settings, dist)
    held_out = held_out_figures(predicted_part(d), settings.time_scale, lent)
    return LeaseResult(
        lease_ms=d.lease_ms, lease_real_ms=d.lease_real_ms, executions=dup.executions, live=fe.executions,
        crashes=int(d.crashed["t0"].size), refused=fe.events,
        false_expiry=Interval(fe.value, fe.lo, fe.hi), overran=over.events,
        overran_rate=Interval(over.value, over.lo, over.hi), duplicates=dup.events,
        duplicate_rate=Interval(dup.value, dup.lo, dup.hi), wasted_work_s=wasted, wasted_share=wasted_share,
        blocks={"length_real_s": block_length_s(d.lease_real_ms), **rates}, recovery=recovery,
        recovery_unscaled=unscaled, deadline_to_claim=quantile_figures(to_claim),
        throughput=_throughput(d, settings.time_scale), reap=_reap_figures(d, data), overhead_ms=overhead,
        model=model, held_out=held_out, agree=agreement(model, held_out),
        recovery_samples_ms=measured, unscaled_samples_ms=scaled, deadline_samples_ms=to_claim,
    )


def _wasted(d: LeaseData, seed: int) -> tuple[float, Interval]:
    """Nominal work seconds whose complete was refused, and their share of all live work, with a
    bootstrap interval that resamples blocks of time (a stall wastes several at once)."""
    live = d.live
    if not live["t0"].size:
        return 0.0, Interval(math.nan, math.nan, math.nan)
    refused = ~live["ok"]
    w = live["w_ms"]
    start, end = d.window
    blocks = max(1, int((end - start) // block_length_s(d.lease_real_ms)))
    which = np.clip(((live["t0"] - start) / (end - start) * blocks).astype(int), 0, blocks - 1)
    work = np.bincount(which, weights=w, minlength=blocks).astype(float)
    lost = np.bincount(which, weights=w * refused, minlength=blocks).astype(float)
    total = float(w.sum())
    value = float(w[refused].sum()) / total if total else math.nan
    share = bootstrap_ci(work, lost, stat=lambda ww, ll: float(ll.sum() / ww.sum()) if ww.sum() else math.nan,
                         n_boot=400, seed=seed)
    return float(w[refused].sum()) / 1000, Interval(value, share[1], share[2])


def _throughput(d: LeaseData, s: float) -> Interval:
    """Completed jobs per nominal second, with an interval from THROUGHPUT_BATCHES slices of the window."""
    live = d.live
    start, end = d.window
    edges = np.linspace(start, end, THROUGHPUT_BATCHES + 1)
    done_t = live["t3"][live["ok"]] if live["t0"].size else np.zeros(0)
    counts, _ = np.histogram(done_t, bins=edges)
    mean, lo, hi = rate_ci(counts.tolist(), (end - start) / THROUGHPUT_BATCHES)
    return Interval(mean / s, lo / s, hi / s)


def _reap_figures(d: LeaseData, data: SweepData) -> dict[str, Any]:
    """The reaper's calls inside the window: rate, jobs moved, round trips, and their server cost."""
    settings = data.settings
    s = settings.time_scale
    start, end = d.window
    window = end - start
    reaps = d.reaps
    rw = reaps[(reaps[:, 0] >= start) & (reaps[:, 0] < end)] if reaps.size else np.zeros((0, 3))
    calls = int(rw.shape[0])
    reaped = int(rw[:, 2].sum()) if calls else 0
    rtt = (rw[:, 1] - rw[:, 0]) * 1000 if calls else np.zeros(0)
    reap = {
        "calls": calls,
        "nonempty_calls": int((rw[:, 2] > 0).sum()) if calls else 0,
        "jobs_reaped": reaped,
        "jobs_per_nonempty_call": reaped / max(1, int((rw[:, 2] > 0).sum())) if calls else 0.0,
        "calls_per_s": calls / window / s,
        "rtt_p50_real_ms": quantile(rtt, 0.5),
        "rtt_p99_real_ms": quantile(rtt, 0.99),
        "at_cap_calls": int((rw[:, 2] >= settings.reap_cap).sum()) if calls else 0,
    }
    if rw.shape[1] > 3 and calls:
        # How late each reap ran after its tick was due: a physical delay (echomq_bench.lease.rescale).
        reap["late_p99_real_ms"] = quantile((rw[:, 0] - rw[:, 3]) * 1000, 0.99)
    cost = data.reap_cost
    if cost is not None and calls:
        usec = calls * cost.empty_usec + reaped * cost.per_job_usec
        reap["server_usec_per_call"] = usec / calls
        # At the nominal rate of calls: what the pump costs the server's main thread.
        reap["server_share_nominal"] = usec / (window * s) / 1e6
    return reap


def _bottleneck(data: SweepData) -> str:
    import os

    cores = os.cpu_count() or 1
    client = data.client_cpu_s / data.window_s
    server = data.server_utilization
    text = (f"the consumer pool (a closed loop of {data.settings.consumers} sleeping consumers per lease); "
            f"server main thread {server:.0%} busy, lease clients {client:.2f} of {cores} cores")
    if server >= 0.85:
        text += " -- WARNING: the server was saturated, so the overheads are inflated"
    elif client >= 0.8 * cores:
        text += " -- WARNING: the client CPU was saturated, so the overheads are inflated"
    return text


def analyse(data: SweepData) -> SweepResult:
    dist = data.settings.dist()
    leases = [_lease_result(d, data, dist) for d in data.leases]
    mass = None
    if data.mass is not None:
        m = data.mass
        mass = MassResult(k=m.k, cap=m.cap, reps=len(m.drain_ms), drain_ms=m.drain_ms, ticks=m.ticks,
                          spread_ms=m.spread_ms, model_ticks=math.ceil(m.k / m.cap),
                          model_drain_ms=drain_time_ms(m.k, m.cap, data.settings.reap_every_ms))
    return SweepResult(data=data, leases=leases, mass=mass, bottleneck=_bottleneck(data),
                       split=model_split(data.server_name, data.window_s))
