"""From a sweep's raw data to measured rates with intervals, the model's
values for the same leases, and whether the two agree.

Everything here is nominal milliseconds (the run's real durations times
the time scale), except the fields whose names say `real`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from echomq_bench.measurement.workdist import Distribution
from echomq_bench.lease.model import (
    ModelInputs,
    deadline_samples,
    drain_time_ms,
    false_expiry,
    lease_expiry,
    recovery_samples,
)
from echomq_bench.lease.split import ModelSplit, fit_part, model_split, predicted_part
from echomq_bench.measurement.intervals import quantile_ci, rate_ci, wilson
from echomq_bench.measurement.stats import bootstrap_ci, median, quantile
from echomq_bench.lease.sweep import LeaseData, SweepData

__all__ = ["Interval", "LeaseResult", "MassResult", "SweepResult", "agreement", "analyse", "held_out_figures",
           "model_inputs", "pooled_inputs"]

THROUGHPUT_BATCHES = 10
# Model and measurement are compared only where the model expects at least this many events.
MIN_EXPECTED = 5


@dataclass(frozen=True)
class Interval:
    value: float
    lo: float
    hi: float

    def contains(self, x: float) -> bool:
        # bool(): a numpy bool is not JSON's, and is never `is True`.
        return bool(self.lo <= x <= self.hi)

    def to_dict(self) -> dict[str, float | None]:
        return {k: (None if v is None or not math.isfinite(v) else v)
                for k, v in (("value", self.value), ("lo", self.lo), ("hi", self.hi))}


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
    recovery: dict[str, Any]          # crash -> re-claim: n, censored, median, p99 (Interval), max
    deadline_to_claim: dict[str, Any] # lease deadline -> re-claim: median, p99 (Interval)
    throughput: Interval              # completed jobs per nominal second
    reap: dict[str, Any]
    overhead_ms: dict[str, float]     # claim -> complete beyond the work, nominal (and real), fit half
    model: dict[str, Any]             # fed the fit half's inputs (echomq_bench.lease.split)
    held_out: dict[str, Any]          # the predicted half: live, refused, false_expiry, crashes, recovery_median
    agree: dict[str, bool | None]     # the model against the predicted half's intervals
    recovery_samples_ms: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    deadline_samples_ms: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key.endswith("_samples_ms"):
                continue
            out[key] = value
        for key in ("false_expiry", "overran_rate", "duplicate_rate", "wasted_share", "throughput"):
            out[key] = getattr(self, key).to_dict()
        for group in ("recovery", "deadline_to_claim", "held_out"):
            out[group] = {k: (v.to_dict() if isinstance(v, Interval) else _finite(v))
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


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _interval(value: float, lo_hi: tuple[float, float]) -> Interval:
    return Interval(float(value), float(lo_hi[0]), float(lo_hi[1]))


def _quantiles(xs: np.ndarray) -> dict[str, Any]:
    n = int(xs.size)
    return {
        "n": n,
        "median": _interval(quantile(xs, 0.5), quantile_ci(xs, 0.5)),
        "p99": _interval(quantile(xs, 0.99), quantile_ci(xs, 0.99)),
        "max": float(xs.max()) if n else math.nan,
        "mean": float(xs.mean()) if n else math.nan,
    }


def model_inputs(d: LeaseData, settings: Any) -> ModelInputs:
    """The model's measured inputs for one lease, in nominal ms."""
    s = settings.time_scale
    live, crashed = d.live, d.crashed
    if live["t0"].size:
        o_real = ((live["t2"] + live["t3"]) / 2 - (live["t0"] + live["t1"]) / 2) * 1000 - live["w_ms"] / s
        overheads = tuple(float(x) * s for x in o_real)
    else:
        overheads = (0.0,)
    if crashed["t0"].size:
        e_real = (crashed["tx"] - (crashed["t0"] + crashed["t1"]) / 2) * 1000 - crashed["c_ms"] / s
        crash_gap = float(np.mean(e_real)) * s
    else:
        crash_gap = median(overheads) / 2
    start, end = d.window
    window_claims = int(((d.claim_t1 >= start) & (d.claim_t1 < end)).sum())
    rate_real_per_ms = window_claims / ((end - start) * 1000)
    reaps = d.reaps
    in_window = reaps[(reaps[:, 0] >= start) & (reaps[:, 0] < end)] if reaps.size else reaps
    counts = [int(c) for c in (in_window[:, 2] if in_window.size else []) if c > 0]
    if counts:
        # A random reaped job sits in a tick with probability in proportion to
        # the tick's size, at a uniform place in it.
        weights: dict[int, float] = {}
        total = sum(counts)
        for c in counts:
            for ahead in range(c):
                weights[ahead] = weights.get(ahead, 0.0) + 1.0 / total
        ahead_weights = tuple(sorted(weights.items()))
    else:
        ahead_weights = ((0, 1.0),)
    return ModelInputs(
        reap_every_ms=settings.reap_every_ms,
        overheads_ms=overheads,
        crash_gap_ms=crash_gap,
        claim_rate_per_ms=rate_real_per_ms / s if rate_real_per_ms > 0 else math.inf,
        ahead_weights=ahead_weights,
    )


def _lease_result(d: LeaseData, data: SweepData, dist: Distribution) -> LeaseResult:
    settings = data.settings
    live, crashed = d.live, d.crashed
    n_live = int(live["t0"].size)
    n_crash = int(crashed["t0"].size)
    refused_mask = ~live["ok"] if n_live else np.zeros(0, dtype=bool)
    refused = int(refused_mask.sum())
    fe = _interval(refused / n_live if n_live else math.nan, wilson(refused, n_live))
    overran = _overran(live, d.lease_real_ms) if n_live else 0
    overran_rate = _interval(overran / n_live if n_live else math.nan, wilson(overran, n_live))

    # A duplicate: the job was claimed again while this execution's worker
    # was alive (a live worker refused at complete, or a crash that came
    # after someone else had already re-claimed the job).
    dup_live = int((refused_mask & ~np.isnan(live["reclaim"])).sum()) if n_live else 0
    dup_crash = int((crashed["reclaim"] < crashed["tx"]).sum()) if n_crash else 0
    dups = dup_live + dup_crash
    executions = n_live + n_crash
    dup_rate = _interval(dups / executions if executions else math.nan, wilson(dups, executions))
    wasted, wasted_share = _wasted(live, refused_mask, n_live, settings.seed)
    rec, to_claim = _recovery_samples(d, settings.time_scale)
    recovery = _quantiles(rec)
    recovery["censored"] = d.censored_crashed
    overhead, model = _model(fit_part(d), settings, dist)
    held_out = held_out_figures(predicted_part(d), settings.time_scale)
    return LeaseResult(
        lease_ms=d.lease_ms, lease_real_ms=d.lease_real_ms, executions=executions, live=n_live,
        crashes=n_crash, refused=refused, false_expiry=fe, overran=overran, overran_rate=overran_rate,
        duplicates=dups, duplicate_rate=dup_rate,
        wasted_work_s=wasted, wasted_share=wasted_share, recovery=recovery,
        deadline_to_claim=_quantiles(to_claim), throughput=_throughput(d, settings.time_scale),
        reap=_reap_figures(d, data), overhead_ms=overhead, model=model, held_out=held_out,
        agree=agreement(model, held_out),
        recovery_samples_ms=rec, deadline_samples_ms=to_claim,
    )


def _overran(live: Any, lease_real_ms: int) -> int:
    """Live executions that may have outlived their lease: from the claim's
    send to the complete's reply, on the client's clock, longer than the
    lease the server gave. The server ran the claim after it was sent and
    the complete before it answered, so every execution whose complete
    landed past its deadline is counted, and with it every false expiry
    (a refused complete came after a reap, which came after the deadline).
    Why this bounds the false expiry of the unscaled system from above:
    docs/design/lease-model.md, "Confirming at a time scale"."""
    span_s = live["t3"] - live["t0"]
    return int((span_s > lease_real_ms / 1000).sum())


def held_out_figures(d: LeaseData, s: float) -> dict[str, Any]:
    """What the model is compared with: the predicted half's false expiry and median recovery."""
    live = int(d.live["t0"].size)
    refused = int((~d.live["ok"]).sum()) if live else 0
    rec, _ = _recovery_samples(d, s)
    return {"live": live, "refused": refused,
            "false_expiry": _interval(refused / live if live else math.nan, wilson(refused, live)),
            "crashes": int(d.crashed["t0"].size),
            "recovery_median": _interval(quantile(rec, 0.5), quantile_ci(rec, 0.5))}


def agreement(model: dict[str, Any], held_out: dict[str, Any]) -> dict[str, bool | None]:
    """Is the model's figure inside the predicted half's 95% interval? None, not True, where
    the sample could not have refuted the model: fewer than MIN_EXPECTED events expected
    (a model of 0.01% over 1,000 executions "agrees" with the 0 seen whatever it says),
    or an unbounded interval."""
    fe, med = held_out["false_expiry"], held_out["recovery_median"]
    expected_fe = model["false_expiry"] * held_out["live"]
    bounded = held_out["crashes"] >= MIN_EXPECTED and math.isfinite(med.lo) and math.isfinite(med.hi)
    return {
        "false_expiry": fe.contains(model["false_expiry"]) if expected_fe >= MIN_EXPECTED else None,
        "recovery_median": med.contains(model["recovery_median"]) if bounded else None,
    }


def _wasted(live: Any, refused_mask: np.ndarray, n_live: int, seed: int) -> tuple[float, Interval]:
    """Nominal work seconds whose complete was refused, and their share of all live work."""
    w = live["w_ms"] if n_live else np.zeros(0)
    wasted = float(w[refused_mask].sum()) / 1000 if n_live else 0.0
    total_work = float(w.sum()) / 1000 if n_live else 0.0
    share_value = wasted / total_work if total_work else math.nan
    share_ci = bootstrap_ci(w, refused_mask.astype(float),
                            stat=lambda ww, rr: float((ww * rr).sum() / ww.sum()) if ww.sum() else math.nan,
                            n_boot=400, seed=seed)[1:] if n_live else (math.nan, math.nan)
    return wasted, _interval(share_value, share_ci)


def _recovery_samples(d: LeaseData, s: float) -> tuple[np.ndarray, np.ndarray]:
    """Per reclaimed crash, nominal ms: crash to reclaim, and lease deadline to reclaim."""
    crashed = d.crashed
    if not crashed["t0"].size:
        return np.zeros(0), np.zeros(0)
    got = ~np.isnan(crashed["reclaim"])
    rec = np.maximum(0.0, crashed["reclaim"][got] - crashed["tx"][got]) * 1000 * s
    deadline = (crashed["t0"][got] + crashed["t1"][got]) / 2 + d.lease_real_ms / 1000
    return rec, (crashed["reclaim"][got] - deadline) * 1000 * s


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
    cost = data.reap_cost
    if cost is not None and calls:
        usec = calls * cost.empty_usec + reaped * cost.per_job_usec
        reap["server_usec_per_call"] = usec / calls
        # At the nominal rate of calls: what the pump costs the server's main thread.
        reap["server_share_nominal"] = usec / (window * s) / 1e6
    return reap


def _model(d: LeaseData, settings: Any, dist: Distribution) -> tuple[dict[str, float], dict[str, float]]:
    """The measured overheads, and the model's figures for this lease fed with them."""
    s = settings.time_scale
    inputs = model_inputs(d, settings)
    o = np.asarray(inputs.overheads_ms)
    overhead = {"median": median(o), "p99": quantile(o, 0.99),
                "p999": quantile(o, 0.999), "max": float(o.max()),
                "mean": float(o.mean()), "median_real": median(o) / s, "crash_gap": inputs.crash_gap_ms}
    m_rec = recovery_samples(dist, d.lease_ms, inputs, seed=settings.seed)
    m_dl = deadline_samples(inputs, seed=settings.seed)
    model = {
        "false_expiry": false_expiry(dist, d.lease_ms, inputs),
        "lease_expiry": lease_expiry(dist, d.lease_ms, float(o.mean())),
        "recovery_median": median(m_rec),
        "recovery_p99": quantile(m_rec, 0.99),
        "recovery_mean": float(m_rec.mean()),
        "deadline_to_claim_median": median(m_dl),
        "claim_wait_mean": float(np.mean(m_dl)) - settings.reap_every_ms / 2,
        "claim_rate_per_s": inputs.claim_rate_per_ms * 1000,
    }
    return overhead, model


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


def pooled_inputs(result: SweepResult) -> ModelInputs:
    """One set of model inputs for drawing the model as a curve between the
    swept leases: the overheads of all leases' fit halves together, the middle
    lease's claim rate and tick sizes (they change with the lease; the curve says so)."""
    ins = [model_inputs(fit_part(d), result.data.settings) for d in result.data.leases]
    mid = ins[len(ins) // 2]
    overheads: Sequence[float] = tuple(x for i in ins for x in i.overheads_ms)
    return ModelInputs(reap_every_ms=mid.reap_every_ms, overheads_ms=tuple(overheads),
                       crash_gap_ms=float(np.mean([i.crash_gap_ms for i in ins])),
                       claim_rate_per_ms=mid.claim_rate_per_ms, ahead_weights=mid.ahead_weights)
