"""The model fed this run's measured inputs, and judged on the attempts it was not fed.

`model_inputs` reads the model's inputs off one lease's attempts (the
claim-to-complete overheads, the crash gap, the claim rate, the tick sizes);
`model_figures` runs the model with them; `held_out_figures` and `agreement`
put the model's figures against the held-out half of the window
(echomq_bench.lease.split says which attempts fit and which are held out).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from echomq_bench.lease.blocks import block_counts, block_length_s, block_rate
from echomq_bench.lease.figures import Interval, interval
from echomq_bench.lease.model import (ModelInputs, deadline_samples, false_expiry, lease_expiry,
                                      recovery_samples)
from echomq_bench.lease.records import LeaseData, SweepData
from echomq_bench.lease.rescale import measured_waits
from echomq_bench.lease.split import fit_part
from echomq_bench.measurement.intervals import quantile_ci
from echomq_bench.measurement.stats import median, quantile
from echomq_bench.measurement.workdist import Distribution

__all__ = ["MIN_EXPECTED", "agreement", "held_out_figures", "model_figures", "model_inputs", "pooled_inputs"]

# Model and measurement are compared only where the model expects at least this many events.
MIN_EXPECTED = 5


def _ahead_weights(counts: list[int]) -> tuple[tuple[int, float], ...]:
    """A random reaped job sits in a tick with probability in proportion to the tick's size,
    at a uniform place in it: the weight of each number of jobs ahead of it."""
    if not counts:
        return ((0, 1.0),)
    weights: dict[int, float] = {}
    total = sum(counts)
    for c in counts:
        for ahead in range(c):
            weights[ahead] = weights.get(ahead, 0.0) + 1.0 / total
    return tuple(sorted(weights.items()))


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
    return ModelInputs(
        reap_every_ms=settings.reap_every_ms,
        overheads_ms=overheads,
        crash_gap_ms=crash_gap,
        claim_rate_per_ms=rate_real_per_ms / s if rate_real_per_ms > 0 else math.inf,
        ahead_weights=_ahead_weights(counts),
    )


def model_figures(d: LeaseData, settings: Any, dist: Distribution) -> tuple[dict[str, float], dict[str, float]]:
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


def held_out_figures(d: LeaseData, s: float, lent_deff: float | None = None) -> dict[str, Any]:
    """What the model is compared with: the held-out half's false expiry (over blocks of time,
    with the design effect the sweep lends the lease) and median recovery."""
    live = int(d.live["t0"].size)
    refused = ~d.live["ok"] if live else np.zeros(0, dtype=bool)
    counts = block_counts(d.live["t0"], refused, d.window, block_length_s(d.lease_real_ms))
    fe = block_rate(counts, lent_deff)
    rec, _ = measured_waits(d, s)
    return {"live": live, "refused": int(refused.sum()),
            "false_expiry": Interval(fe.value, fe.lo, fe.hi),
            "crashes": int(d.crashed["t0"].size),
            "recovery_median": interval(quantile(rec, 0.5), quantile_ci(rec, 0.5))}


def agreement(model: dict[str, Any], held_out: dict[str, Any]) -> dict[str, bool | None]:
    """Is the model's figure inside the held-out half's 95% interval? None, not True, where
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


def pooled_inputs(data: SweepData) -> ModelInputs:
    """One set of model inputs for drawing the model as a curve between the
    swept leases: the overheads of all leases' fit halves together, the middle
    lease's claim rate and tick sizes (they change with the lease; the curve says so)."""
    ins = [model_inputs(fit_part(d), data.settings) for d in data.leases]
    mid = ins[len(ins) // 2]
    overheads: Sequence[float] = tuple(x for i in ins for x in i.overheads_ms)
    return ModelInputs(reap_every_ms=mid.reap_every_ms, overheads_ms=tuple(overheads),
                       crash_gap_ms=float(np.mean([i.crash_gap_ms for i in ins])),
                       claim_rate_per_ms=mid.claim_rate_per_ms, ahead_weights=mid.ahead_weights)
