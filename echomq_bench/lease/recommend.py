"""The lease recommendation.

`recommend` is pure: it takes one row per swept lease (the overrun rate's 95%
interval over blocks of time, the p99 recovery's at scale 1, and the points)
and the two limits, and returns what to set; or, when no lease is confirmed,
the leases at the edge of a limit and what would decide them; or, when every
lease is shown over a limit, which limit to relax. Where each lease stands is
`echomq_bench.lease.verdict`; the sentences are `echomq_bench.lease.wording`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from echomq_bench.formatting import fmt_ms, fmt_pct
from echomq_bench.lease.analysis import LeaseResult, SweepResult, pooled_inputs
from echomq_bench.lease.model import false_expiry
from echomq_bench.lease.verdict import FITS, OVER, budget_state, tolerance_state
from echomq_bench.lease.wording import Row, chosen_text, open_text

__all__ = ["Candidate", "Recommendation", "recommend", "recommend_for", "model_lease_for_budget"]

CONFIRMED, EDGE_ANSWER, NONE_ANSWER = "confirmed", "edge", "none"


@dataclass(frozen=True)
class Candidate:
    """One swept lease as the recommendation sees it. The recovery figures are at scale 1
    (echomq_bench.lease.rescale); the overrun interval is over blocks of time."""

    lease_ms: float
    false_expiry: float
    overran: float                     # share of live executions that may have outlived the lease
    overran_lo: float
    overran_hi: float                  # its 95% upper end: what confirms a lease
    recovery_p99_ms: float
    recovery_p99_lo: float
    recovery_p99_hi: float             # its 95% upper end: what the tolerance is held against
    executions: int = 0
    crashes: int = 0                   # re-claimed crashes, the recovery figures' n
    overruns: int = 0
    blocks: int = 0
    design_effect: float = 1.0
    supported: bool = True             # how overruns cluster was measured (echomq_bench.lease.blocks)
    recovery_median_ms: float = math.nan
    wasted_share: float = math.nan
    false_expiry_hi: float = math.nan   # refused completes' 95% upper end (over blocks), for the record

    @classmethod
    def of(cls, r: LeaseResult) -> "Candidate":
        p99 = r.recovery_unscaled["p99"]
        over = r.blocks["overran"]
        return cls(r.lease_ms, r.false_expiry.value, r.overran_rate.value, r.overran_rate.lo, r.overran_rate.hi,
                   p99.value, p99.lo, p99.hi, executions=r.live, crashes=int(r.recovery_unscaled["n"]),
                   overruns=r.overran, blocks=over.blocks, design_effect=over.design_effect,
                   supported=over.supported, recovery_median_ms=r.recovery_unscaled["median"].value,
                   wasted_share=r.wasted_share.value, false_expiry_hi=r.false_expiry.hi)

    def budget_state(self, budget: float) -> str:
        return budget_state(self.overran_lo, self.overran_hi, self.supported, budget)

    def tolerance_state(self, tolerance_ms: float) -> str:
        return tolerance_state(self.recovery_p99_lo, self.recovery_p99_hi, tolerance_ms)

    def row(self, budget: float, tolerance_ms: float) -> Row:
        return Row(self.lease_ms, self.false_expiry, self.overran, self.overran_lo, self.overran_hi, self.overruns,
                   self.executions, self.blocks, self.design_effect, self.recovery_p99_ms, self.recovery_p99_lo,
                   self.recovery_p99_hi, self.crashes, self.budget_state(budget), self.tolerance_state(tolerance_ms))


@dataclass(frozen=True)
class Recommendation:
    lease_ms: float | None
    confirmed: bool                  # both intervals lie within their limits, not only the points
    false_expiry_rate: float | None
    false_expiry_hi: float | None
    recovery_p99_ms: float | None    # at scale 1
    overran_hi: float | None
    relax: str | None                # None, "budget", "recovery_tolerance", "leases", "duration", "crashes"
    relax_to: float | None
    text: str
    budget: float
    tolerance_ms: float
    verdict: str = NONE_ANSWER       # confirmed, edge (leases at the edge of a limit, or not yet judged), none
    decide: str | None = None        # with the edge: what would decide it
    recovery_p99_hi: float | None = None
    crashes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def recommend(cands: Sequence[Candidate], budget: float, tolerance_ms: float,
              model_boundary_ms: float | None = None) -> Recommendation:
    """The smallest lease confirmed within both limits: its overrun rate's 95% upper end
    within `budget` (overruns bound false expiry at any time scale) and its p99 recovery's
    95% upper end within `tolerance_ms`. Less data never gives a shorter lease.

    With none confirmed, a lease shown over neither limit is at the edge of one, or not yet
    judged (too few crashes, or no lease overran often enough to show how overruns cluster):
    the text names the longest such lease (the one the shorter ones' noise does not move: a
    lease at the edge of the budget in one run and over it in the next leaves it named), says
    which limit it sits at the edge of, and what would decide it (`relax` "duration",
    "crashes" or "leases", `relax_to` the factor). When every lease is shown over a limit, the
    text names the limit whose relaxation is the smaller change.
    """
    rows = sorted(cands, key=lambda c: c.lease_ms)
    if not rows:
        raise ValueError("recommend: no leases to choose from")
    states = [(c.budget_state(budget), c.tolerance_state(tolerance_ms)) for c in rows]
    sure = [i for i, st in enumerate(states) if st == (FITS, FITS)]
    if sure:
        return _confirmed(rows, sure[0], budget, tolerance_ms, model_boundary_ms)
    undecided = [c.row(budget, tolerance_ms) for c, st in zip(rows, states) if OVER not in st]
    if undecided:
        text, decide, relax, factor = open_text(undecided[-1], budget, tolerance_ms)
        return Recommendation(None, False, None, None, None, None, relax, factor, text, budget, tolerance_ms,
                              EDGE_ANSWER, decide)
    relax, relax_to, text = _none_text(rows, budget, tolerance_ms, model_boundary_ms)
    return Recommendation(None, False, None, None, None, None, relax, relax_to, text, budget, tolerance_ms)


def _confirmed(rows: list[Candidate], i: int, budget: float, tolerance_ms: float,
               model_boundary_ms: float | None) -> Recommendation:
    pick = rows[i]
    shorter = rows[i - 1].row(budget, tolerance_ms) if i > 0 else None
    longer = rows[i + 1].row(budget, tolerance_ms) if i + 1 < len(rows) else None
    text = chosen_text(pick.row(budget, tolerance_ms), shorter, longer, pick.wasted_share, pick.recovery_median_ms,
                       budget, tolerance_ms)
    if model_boundary_ms is not None and model_boundary_ms < pick.lease_ms:
        text += (f" The model, fed this run's measured overheads, puts the edge of the budget at "
                 f"{fmt_ms(model_boundary_ms)}; a shorter lease than {fmt_ms(pick.lease_ms)} needs its own "
                 f"run (--leases {fmt_ms(model_boundary_ms).replace(' ', '')} --check) before you trust it.")
    return Recommendation(pick.lease_ms, True, pick.false_expiry, pick.false_expiry_hi, pick.recovery_p99_ms,
                          pick.overran_hi, None, None, text, budget, tolerance_ms, CONFIRMED, None,
                          pick.recovery_p99_hi, pick.crashes)


def _none_text(rows: list[Candidate], budget: float, tol: float,
               boundary: float | None) -> tuple[str, float | None, str]:
    # Every lease is shown over one limit at least: these are not shown over the other.
    fits_fe = [c for c in rows if c.budget_state(budget) != OVER]
    fits_rec = [c for c in rows if c.tolerance_state(tol) != OVER]
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
    inputs = pooled_inputs(result.data)
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
