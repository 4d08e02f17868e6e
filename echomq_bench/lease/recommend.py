"""The lease recommendation and the way its figures are written for people.

`recommend` is pure: it takes one row per swept lease (measured false expiry
with its interval, measured p99 recovery) and the two limits, and returns
what to set, or, when no lease fits both, which limit to relax.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from echomq_bench.lease.analysis import LeaseResult, SweepResult, pooled_inputs
from echomq_bench.lease.model import false_expiry

__all__ = ["Candidate", "Recommendation", "recommend", "recommend_for", "model_lease_for_budget", "fmt_ms",
           "fmt_pct"]


def fmt_ms(ms: float | None) -> str:
    """A duration as a person writes it: 250 ms, 2.5 s, 1.5 min."""
    if ms is None or not math.isfinite(ms):
        return "-"
    if ms >= 60_000:
        return f"{ms / 60_000:.3g} min"
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    if ms >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.2g} ms"


def fmt_pct(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "-"
    if p == 0:
        return "0%"
    pct = p * 100
    if pct >= 10:
        return f"{pct:.0f}%"
    if pct >= 1:
        return f"{pct:.1f}%"
    return f"{pct:.2g}%"


@dataclass(frozen=True)
class Candidate:
    """One swept lease as the recommendation sees it."""

    lease_ms: float
    false_expiry: float
    false_expiry_lo: float
    false_expiry_hi: float
    recovery_p99_ms: float
    overran: float                     # share of live executions that may have outlived the lease
    overran_hi: float                  # its 95% upper end: what confirms a lease
    executions: int = 0
    recovery_median_ms: float = math.nan
    recovery_max_ms: float = math.nan
    wasted_share: float = math.nan

    @classmethod
    def of(cls, r: LeaseResult) -> "Candidate":
        return cls(r.lease_ms, r.false_expiry.value, r.false_expiry.lo, r.false_expiry.hi,
                   r.recovery["p99"].value, r.overran_rate.value, r.overran_rate.hi, r.live,
                   r.recovery["median"].value, r.recovery["max"], r.wasted_share.value)


@dataclass(frozen=True)
class Recommendation:
    lease_ms: float | None
    confirmed: bool                  # the overrun's upper end is within the budget, not only the estimate
    false_expiry_rate: float | None
    false_expiry_hi: float | None
    recovery_p99_ms: float | None
    overran_hi: float | None
    relax: str | None                # None, "budget", "recovery_tolerance", "leases", "duration"
    relax_to: float | None
    text: str
    budget: float
    tolerance_ms: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def recommend(cands: Sequence[Candidate], budget: float, tolerance_ms: float,
              model_boundary_ms: float | None = None) -> Recommendation:
    """The smallest lease whose false-expiry rate is within `budget` and whose
    p99 recovery is within `tolerance_ms`.

    Only a confirmed lease is recommended: the upper end of the 95% interval
    of its overrun rate (executions that may have outlived the lease, a bound
    on false expiry at any time scale) fits the budget. When only the
    false-expiry estimate fits, nothing is recommended: less data must not
    give a shorter lease. The text names that lease and how much longer to run to confirm
    it (relax "duration", `relax_to` the factor). When none fits both limits,
    the text says so and names the limit whose relaxation is the smaller change.
    """
    rows = sorted(cands, key=lambda c: c.lease_ms)
    if not rows:
        raise ValueError("recommend: no leases to choose from")
    fits_rec = [c for c in rows if c.recovery_p99_ms <= tolerance_ms]
    sure = [c for c in fits_rec if c.overran_hi <= budget]
    likely = [c for c in fits_rec if c.false_expiry <= budget]
    if likely and not sure:
        factor = longer_by(likely[0], budget)
        return Recommendation(None, False, None, None, None, None, "duration", factor,
                              _unconfirmed_text(likely[0], budget, factor), budget, tolerance_ms)
    if sure:
        pick = sure[0]
        text = _chosen_text(pick, rows, budget, tolerance_ms)
        if model_boundary_ms is not None and model_boundary_ms < pick.lease_ms:
            text += (f" The model, fed this run's measured overheads, puts the edge of the budget at "
                     f"{fmt_ms(model_boundary_ms)}; a shorter lease than {fmt_ms(pick.lease_ms)} needs its own "
                     f"run (--leases {fmt_ms(model_boundary_ms).replace(' ', '')} --check) before you trust it.")
        return Recommendation(pick.lease_ms, True, pick.false_expiry, pick.false_expiry_hi,
                              pick.recovery_p99_ms, pick.overran_hi, None, None, text, budget, tolerance_ms)
    relax, relax_to, text = _none_text(rows, budget, tolerance_ms, model_boundary_ms)
    return Recommendation(None, False, None, None, None, None, relax, relax_to, text, budget, tolerance_ms)


def longer_by(c: Candidate, budget: float) -> float:
    """About how many times more executions would bring the overrun's upper end within the budget.

    An interval's half-width shrinks as 1/sqrt(n), so the factor is the square
    of the width there is over the width there may be; with no event observed
    the upper end falls as 1/n instead (Wilson: about z^2/n)."""
    if c.overran <= 0:
        return max(1.0, c.overran_hi / budget)
    if c.overran >= budget:
        return math.inf
    return max(1.0, ((c.overran_hi - c.overran) / (budget - c.overran)) ** 2)


def _unconfirmed_text(c: Candidate, budget: float, factor: float) -> str:
    how = (f"Run about {factor:.1f}x as long (--duration) to confirm it, or give the work more consumers."
           if math.isfinite(factor) else
           f"{fmt_pct(c.overran)} of its executions outlived it, so no longer run can confirm it: sweep longer leases.")
    return (f"No lease is confirmed. The shortest whose estimate fits, {fmt_ms(c.lease_ms)}, ran "
            f"{fmt_pct(c.false_expiry)} of executions twice, but its overrun's 95% upper bound is "
            f"{fmt_pct(c.overran_hi)}, over the {fmt_pct(budget)} budget. {how}")


def _chosen_text(c: Candidate, rows: list[Candidate], budget: float, tol: float) -> str:
    twice = (f"at most {fmt_pct(c.overran_hi)} of executions outlive it (95% upper bound over "
             f"{c.executions:,}), {fmt_pct(c.false_expiry)} ran twice")
    if math.isfinite(c.wasted_share) and c.false_expiry > 0:
        twice += f", wasting {fmt_pct(c.wasted_share)} of the work"
    text = (f"Set the lease to {fmt_ms(c.lease_ms)}: {twice}, and a crashed job waited at most "
            f"{fmt_ms(c.recovery_max_ms)} for another worker (p99 {fmt_ms(c.recovery_p99_ms)}, "
            f"median {fmt_ms(c.recovery_median_ms)}).")
    i = rows.index(c)
    if i > 0:
        s = rows[i - 1]
        why = []
        if s.false_expiry > budget:
            why.append(f"runs {fmt_pct(s.false_expiry)} twice, over the budget")
        elif s.overran_hi > budget:
            why.append(f"ran {fmt_pct(s.false_expiry)} twice, but the 95% upper bound of its overruns is "
                       f"{fmt_pct(s.overran_hi)}, so it is not shown to fit the budget")
        if s.recovery_p99_ms > tol:
            why.append(f"makes a crashed job wait {fmt_ms(s.recovery_p99_ms)} at p99, over the tolerance")
        text += f" One step shorter, {fmt_ms(s.lease_ms)}, {' and '.join(why) or 'fits too'}."
    if i + 1 < len(rows):
        longer = rows[i + 1]
        text += (f" One step longer, {fmt_ms(longer.lease_ms)}, runs {fmt_pct(longer.false_expiry)} twice "
                 f"and makes a crashed job wait {fmt_ms(longer.recovery_p99_ms)} at p99.")
    return text


def _none_text(rows: list[Candidate], budget: float, tol: float,
               boundary: float | None) -> tuple[str, float | None, str]:
    fits_fe = [c for c in rows if c.false_expiry <= budget]
    fits_rec = [c for c in rows if c.recovery_p99_ms <= tol]
    head = (f"No swept lease keeps both limits (false expiry <= {fmt_pct(budget)}, "
            f"p99 recovery <= {fmt_ms(tol)}).")
    if not fits_fe:
        longest = rows[-1]
        where = f" the model puts {fmt_pct(budget)} at about {fmt_ms(boundary)};" if boundary else ""
        ok_rec = fits_rec[-1] if fits_rec else None
        if ok_rec is not None and boundary is not None and boundary > longest.lease_ms:
            # Leases past the sweep may still recover in time: say so before asking for a looser budget.
            text = (f"{head} Even the longest, {fmt_ms(longest.lease_ms)}, runs {fmt_pct(longest.false_expiry)} "
                    f"of executions twice;{where} sweep longer leases (--leases), or relax the budget to "
                    f"{fmt_pct(ok_rec.false_expiry)}, which {fmt_ms(ok_rec.lease_ms)} meets.")
            return "leases", boundary, text
        target = ok_rec or longest
        text = (f"{head} Even the longest, {fmt_ms(longest.lease_ms)}, runs {fmt_pct(longest.false_expiry)} "
                f"of executions twice;{where} relax the budget to {fmt_pct(target.false_expiry)} "
                f"(lease {fmt_ms(target.lease_ms)}).")
        return "budget", target.false_expiry, text
    if not fits_rec:
        first = fits_fe[0]
        text = (f"{head} Even the shortest lease, {fmt_ms(rows[0].lease_ms)}, makes a crashed job wait "
                f"{fmt_ms(rows[0].recovery_p99_ms)} at p99, and the shortest within the budget, "
                f"{fmt_ms(first.lease_ms)}, {fmt_ms(first.recovery_p99_ms)}. Recovery cannot beat the lease "
                f"plus one reap interval: relax the recovery tolerance to {fmt_ms(first.recovery_p99_ms)} "
                f"(or reap more often with --reap-every).")
        return "recovery_tolerance", first.recovery_p99_ms, text
    need_lease = fits_fe[0]
    need_rec = fits_rec[-1]
    ratio_tol = need_lease.recovery_p99_ms / tol
    ratio_budget = need_rec.false_expiry / budget
    text = (f"{head} Keeping false expiry within {fmt_pct(budget)} takes at least {fmt_ms(need_lease.lease_ms)}, "
            f"where a crashed job waits {fmt_ms(need_lease.recovery_p99_ms)} at p99; within the "
            f"{fmt_ms(tol)} tolerance the longest lease, {fmt_ms(need_rec.lease_ms)}, runs "
            f"{fmt_pct(need_rec.false_expiry)} of executions twice. ")
    if ratio_tol <= ratio_budget:
        text += (f"Relax the recovery tolerance to {fmt_ms(need_lease.recovery_p99_ms)} "
                 f"({ratio_tol:.2g}x) and set {fmt_ms(need_lease.lease_ms)}; loosening the budget instead "
                 f"would take {ratio_budget:.2g}x.")
        return "recovery_tolerance", need_lease.recovery_p99_ms, text
    text += (f"Relax the budget to {fmt_pct(need_rec.false_expiry)} ({ratio_budget:.2g}x) and set "
             f"{fmt_ms(need_rec.lease_ms)}; loosening the tolerance instead would take {ratio_tol:.2g}x.")
    return "budget", need_rec.false_expiry, text


def model_lease_for_budget(result: SweepResult, budget: float) -> float | None:
    """The shortest lease the model (with this run's measured inputs) puts
    within the budget, by bisection; None if not below 100x the longest."""
    dist = result.settings.dist()
    inputs = pooled_inputs(result)
    lo, hi = 1.0, max(r.lease_ms for r in result.leases) * 100
    if false_expiry(dist, hi, inputs) > budget:
        return None
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if false_expiry(dist, mid, inputs) > budget:
            lo = mid
        else:
            hi = mid
    return hi


def recommend_for(result: SweepResult) -> Recommendation:
    s = result.settings
    return recommend([Candidate.of(r) for r in result.leases], s.budget, s.recovery_tolerance_ms,
                     model_lease_for_budget(result, s.budget))
