"""The analytical model of the lease trade-off, beside which the sweep's
measurements are drawn.

All durations are milliseconds on one clock (nominal or real, as long as the
caller does not mix them). The model's pieces:

False expiry. A live worker's job is reaped when a reap tick falls after its
lease deadline and before its complete reaches the server. With work W, the
overhead o between the server's claim and the server's complete beyond W
(round trips, sleep overshoot, scheduling), and a reap tick whose phase U
after the deadline is uniform on [0, R) for a pump every R,

    P(false expiry) = E_o E_U [ sf(L + U - o) ]          (sf(x) = P(W > x))

`lease_expiry` is the first-order form, P(W > L - gap): the chance
the lease runs out, reaped or not; it is the limit R -> 0 and an upper bound.

Recovery after a crash. The worker claims at server time 0, starts work
after a gap e, and dies at V*W (V uniform on [0, 1]: the crash falls
uniformly within the work). The lease runs out at L, the next tick reaps the
job at L + U, and the job waits Q for a consumer to claim it:

    crash -> re-claim     = max(0, L + U + Q - e - V*W)
    deadline -> re-claim  = U + Q

Q is the wait for the k-th free consumer, k-1 being the jobs reaped in the
same tick ahead of this one (they go back in id order, ahead of the
backlog): Gamma(k, claim rate) when consumers free up as a Poisson stream.
With idle consumers Q is ~0 and recovery is "remaining lease + reap phase".

Mass crash. K jobs whose leases run out together drain at `cap` per reap
call, one call per tick: the last leaves after ceil(K/cap) ticks, between
(n-1)*R and n*R after the deadline.

The recovery distribution has no closed form once W is lognormal or
empirical, so its quantiles are read from `RECOVERY_SAMPLES` stratified draws
of the formula above (not of the queue); `recovery_mean` gives the exact
mean for tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from echomq_bench.measurement.stats import FloatArray, quantiles
from echomq_bench.measurement.workdist import Distribution

__all__ = [
    "ModelInputs",
    "lease_expiry",
    "false_expiry",
    "recovery_samples",
    "recovery_mean",
    "deadline_samples",
    "drain_ticks",
    "drain_time_ms",
    "RECOVERY_SAMPLES",
]

RECOVERY_SAMPLES = 40_000
PHASE_POINTS = 64       # midpoints of the reap phase U on [0, R)
OVERHEAD_POINTS = 40    # quantiles of the measured overhead o, for its body and its top 1% each


@dataclass(frozen=True)
class ModelInputs:
    """What the model needs beyond the work distribution and the lease; the
    sweep measures each of them on the first half of its window and compares
    the model with the second half (echomq_bench.lease.split)."""

    reap_every_ms: float
    overheads_ms: tuple[float, ...] = (0.0,)   # o per live attempt (or one typical value)
    crash_gap_ms: float = 0.0                  # e: server claim -> work start, for crashed attempts
    claim_rate_per_ms: float = math.inf        # claims per ms on the queue (free consumers per ms)
    ahead_weights: tuple[tuple[int, float], ...] = field(default=((0, 1.0),))  # (jobs ahead, probability)


def lease_expiry(dist: Distribution, lease_ms: float, gap_ms: float = 0.0) -> float:
    """P(work > lease - gap): the chance a live worker outlives its lease."""
    return dist.sf(lease_ms - gap_ms)


def _overhead_points(values: Sequence[float]) -> tuple[FloatArray, FloatArray]:
    """The measured overheads as weighted points: the body (p0-p99) and the
    top 1% each as OVERHEAD_POINTS equal-mass quantiles. The top 1% gets its
    own points because rare stalls (a descheduled worker) are what makes a
    long lease expire; an even grid would round them away."""
    arr = np.sort(np.asarray(values, dtype=float))
    if arr.size <= 2 * OVERHEAD_POINTS:
        return arr, np.full(arr.size, 1.0 / arr.size)
    k = OVERHEAD_POINTS
    body = quantiles(arr, (np.arange(k) + 0.5) / k * 0.99)
    tail = quantiles(arr, 0.99 + (np.arange(k) + 0.5) / k * 0.01)
    return np.concatenate([body, tail]), np.concatenate([np.full(k, 0.99 / k), np.full(k, 0.01 / k)])


def false_expiry(dist: Distribution, lease_ms: float, inputs: ModelInputs) -> float:
    """P(a live worker's job is reaped before its complete arrives)."""
    r = inputs.reap_every_ms
    phases = (np.arange(PHASE_POINTS) + 0.5) / PHASE_POINTS * r if r > 0 else np.zeros(1)
    points, weights = _overhead_points(inputs.overheads_ms)
    total = 0.0
    for o, wt in zip(points, weights):
        total += float(wt) * math.fsum(dist.sf(lease_ms + float(u - o)) for u in phases) / len(phases)
    return total


def _work_draws(dist: Distribution, n: int, rng: np.random.Generator) -> FloatArray:
    # Stratified: one draw per 1/n slice of probability, shuffled, so the
    # model's quantiles do not wobble with the seed.
    p = (np.arange(n) + rng.random(n)) / n
    w = np.fromiter((dist.quantile_ms(min(pi, 1 - 1e-12)) for pi in p), dtype=float, count=n)
    rng.shuffle(w)
    return w


def _claim_wait(inputs: ModelInputs, n: int, rng: np.random.Generator) -> FloatArray:
    if not math.isfinite(inputs.claim_rate_per_ms) or inputs.claim_rate_per_ms <= 0:
        return np.zeros(n)
    ahead, prob = zip(*inputs.ahead_weights)
    p = np.asarray(prob, dtype=float)
    k = rng.choice(np.asarray(ahead, dtype=int), size=n, p=p / p.sum()) + 1
    return rng.gamma(shape=k, scale=1.0 / inputs.claim_rate_per_ms)


def recovery_samples(dist: Distribution, lease_ms: float, inputs: ModelInputs,
                     n: int = RECOVERY_SAMPLES, seed: int = 0) -> FloatArray:
    """Draws of crash -> re-claim (ms) from the model's formula."""
    rng = np.random.default_rng(seed)
    w = _work_draws(dist, n, rng)
    v = rng.random(n)
    u = rng.random(n) * inputs.reap_every_ms
    q = _claim_wait(inputs, n, rng)
    return np.maximum(0.0, lease_ms + u + q - inputs.crash_gap_ms - v * w)


def deadline_samples(inputs: ModelInputs, n: int = RECOVERY_SAMPLES, seed: int = 0) -> FloatArray:
    """Draws of lease deadline -> re-claim (ms): reap phase plus claim wait."""
    rng = np.random.default_rng(seed)
    return rng.random(n) * inputs.reap_every_ms + _claim_wait(inputs, n, rng)


def recovery_mean(lease_ms: float, mean_work_ms: float, reap_every_ms: float,
                  crash_gap_ms: float = 0.0, mean_claim_wait_ms: float = 0.0) -> float:
    """Exact mean of crash -> re-claim when every crash falls inside the
    lease (V*W + e <= L always, so the max(0, .) never bites):
    L - E[W]/2 + R/2 + E[Q] - e."""
    return lease_ms - mean_work_ms / 2 + reap_every_ms / 2 + mean_claim_wait_ms - crash_gap_ms


def drain_ticks(k: int, cap: int) -> int:
    """Reap calls needed to return K expired jobs at `cap` per call."""
    if k < 0 or cap < 1:
        raise ValueError(f"drain_ticks: want k >= 0 and cap >= 1, got k={k} cap={cap}")
    return math.ceil(k / cap)


def drain_time_ms(k: int, cap: int, reap_every_ms: float) -> tuple[float, float, float]:
    """(earliest, mean, latest) time from the common deadline until the last
    of K jobs is back in pending, one reap call per tick at uniform phase."""
    n = drain_ticks(k, cap)
    if n == 0:
        return 0.0, 0.0, 0.0
    return (n - 1) * reap_every_ms, (n - 0.5) * reap_every_ms, n * reap_every_ms
