"""A crashed job's wait as the unscaled system would see it, from a run at a time scale.

At time scale S every nominal duration runs S times faster and the analysis
multiplies what it measured by S. A crashed job's wait (crash -> re-claim)
holds nominal parts, which scale exactly, and physical ones, which do not: the
reaper running late after its tick was due, the reap's and the re-claim's round
trips, a consumer held up between the end of its work and its next claim.
Multiplied by S, one physical millisecond reads as S nominal ones, and a busy
machine's few ms decide a lease at the edge of the recovery tolerance.

Per crash the run gives the nominal path and the physical rest apart (all on
the client's monotonic clock, real seconds):

    claim     when the server ran the claim: the claim's send + half its round trip, or half
              the lease's median round trip where this one took longer (a held-up client
              mostly waits after the reply, to be scheduled again)
    crash     the claim + the nominal crash point / S
    deadline  the server's claim + the real lease
    tick      the first tick of the pump's schedule at or after the deadline (when it
              was due, however late the reap ran; a schedule the pump reset after a
              stall is carried on at its interval)
    wait      from the tick to the m-th end of work after it, among every claimed job's
              nominal end of work (the consumers falling free), m the job's place among
              the jobs whose deadlines fall to the same tick, in the order they were re-claimed;
              at most the 99.9th percentile of the m-th of consumers falling free at the pace
              their work sets (a Poisson stream of consumers / mean work): a longer gap is a
              held-up client, whose consumers claimed late and so fell free late
    physical  the re-claim's answer - (tick + wait), at least 0

    at scale 1:  S * (tick + wait - crash) + physical

so the physical part is counted once, in real ms, and the nominal part S
times. Why this is no shorter than what the unscaled system would see (under
the assumption that delays at scale S are no smaller than at scale 1):
docs/design/lease-model.md, "Recovery at a time scale". A run that kept no
pump schedule or no ends of work (an older record's data) gets the measured
wait times S, `corrected` False.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats as st

from echomq_bench.lease.records import LeaseData

__all__ = ["ScaledRecovery", "first_ticks", "longest_wait_s", "measured_waits", "recovery_at_scale_one",
           "server_claims"]

# How far into its tail the nominal wait for a free consumer may reach before the rest is the client's.
WAIT_QUANTILE = 0.999


@dataclass(frozen=True)
class ScaledRecovery:
    """Per re-claimed crash: the wait at scale 1 (nominal ms), and the physical part counted once (real ms)."""

    corrected: bool
    wait_ms: np.ndarray = field(repr=False)
    physical_ms: np.ndarray = field(repr=False)


def first_ticks(deadlines: np.ndarray, dues: np.ndarray, interval_s: float) -> np.ndarray:
    """For each deadline, the first tick of the schedule at or after it: the last due tick
    at or before it, carried on at the interval (dues sorted; a deadline before the first
    due tick is carried back from it)."""
    if not dues.size:
        return np.full(deadlines.shape, np.nan)
    at = np.searchsorted(dues, deadlines, side="right") - 1
    base = dues[np.maximum(at, 0)]
    steps = np.ceil((deadlines - base) / interval_s)
    return np.asarray(base + steps * interval_s)


def _places(ticks: np.ndarray, reclaims: np.ndarray) -> np.ndarray:
    """Each job's 1-based place among the jobs of its tick, in the order they were re-claimed."""
    order = np.lexsort((reclaims, np.round(ticks, 6)))
    keys = np.round(ticks[order], 6)
    first_of_group = np.r_[True, keys[1:] != keys[:-1]]
    start = np.maximum.accumulate(np.where(first_of_group, np.arange(keys.size), 0))
    places = np.empty(keys.size, dtype=int)
    places[order] = np.arange(keys.size) - start + 1
    return places


def server_claims(t0: np.ndarray, t1: np.ndarray, usual_rtt_s: float) -> np.ndarray:
    """When the server ran each claim, as well as the client can tell (module docstring)."""
    return np.asarray(t0 + np.minimum(t1 - t0, usual_rtt_s) / 2)


def longest_wait_s(places: np.ndarray, consumers: int, mean_busy_s: float) -> np.ndarray:
    """The WAIT_QUANTILE of the wait for the m-th consumer to fall free, at the pace the work
    sets: consumers falling free as a Poisson stream of consumers / mean busy time (real s)."""
    return np.asarray(st.gamma.ppf(WAIT_QUANTILE, places, scale=mean_busy_s / consumers), dtype=float)


def _reaped(d: LeaseData, lease_s: float, dues: np.ndarray, interval_s: float,
            usual_rtt_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Every counted job reaped and re-claimed (crashed, or live and refused): its tick and its re-claim."""
    ticks, reclaims = [], []
    for table in (d.crashed, d.live):
        if not table["t0"].size:
            continue
        got = ~np.isnan(table["reclaim"])
        deadline = server_claims(table["t0"][got], table["t1"][got], usual_rtt_s) + lease_s
        ticks.append(first_ticks(deadline, dues, interval_s))
        reclaims.append(table["reclaim"][got])
    if not ticks:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(ticks), np.concatenate(reclaims)


def measured_waits(d: LeaseData, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per re-claimed crash, as measured (real times the scale, nominal ms): crash to re-claim,
    and lease deadline to re-claim."""
    crashed = d.crashed
    if not crashed["t0"].size:
        return np.zeros(0), np.zeros(0)
    got = ~np.isnan(crashed["reclaim"])
    waits = np.maximum(0.0, crashed["reclaim"][got] - crashed["tx"][got]) * 1000 * scale
    deadline = (crashed["t0"][got] + crashed["t1"][got]) / 2 + d.lease_real_ms / 1000
    return waits, (crashed["reclaim"][got] - deadline) * 1000 * scale


def recovery_at_scale_one(d: LeaseData, scale: float, reap_every_ms: float, consumers: int) -> ScaledRecovery:
    """The crashes' waits with the physical part counted once (module docstring)."""
    crashed = d.crashed
    if not crashed["t0"].size:
        return ScaledRecovery(True, np.zeros(0), np.zeros(0))
    got = ~np.isnan(crashed["reclaim"])
    t0, t1, c_ms, reclaim = (crashed[k][got] for k in ("t0", "t1", "c_ms", "reclaim"))
    dues = np.unique(d.reaps[:, 3][np.isfinite(d.reaps[:, 3])]) if d.reaps.ndim == 2 and d.reaps.shape[1] > 3 \
        else np.zeros(0)
    if not dues.size or not d.free_at.size:
        measured, _ = measured_waits(d, scale)
        return ScaledRecovery(False, measured, np.full(measured.shape, np.nan))
    interval_s = reap_every_ms / scale / 1000
    lease_s = d.lease_real_ms / 1000
    live = d.live
    usual_rtt_s = float(np.median(live["t1"] - live["t0"])) if live["t0"].size else 0.0
    claimed = server_claims(t0, t1, usual_rtt_s)
    ticks = first_ticks(claimed + lease_s, dues, interval_s)
    all_ticks, all_reclaims = _reaped(d, lease_s, dues, interval_s, usual_rtt_s)
    places = _places(all_ticks, all_reclaims)[: ticks.size]   # the crashed come first in _reaped
    free = d.free_at
    at = np.searchsorted(free, ticks, side="left") + places - 1
    known = at < free.size
    busy_ms = np.concatenate([live["w_ms"], d.crashed["c_ms"]])
    longest = longest_wait_s(places, consumers, float(busy_ms.mean()) / scale / 1000)
    free_end = ticks + np.minimum(free[np.minimum(at, free.size - 1)] - ticks, longest)
    nominal_end = np.where(known, free_end, reclaim)   # past the last end of work: all of it scaled
    physical = np.maximum(0.0, reclaim - nominal_end)
    crash = claimed + c_ms / scale / 1000
    wait = (scale * np.maximum(0.0, nominal_end - crash) + physical) * 1000
    return ScaledRecovery(True, wait, physical * 1000)
