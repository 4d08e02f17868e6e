"""The lease recommendation's sentences. Each says where a lease stands against the budget and
the recovery tolerance by its interval (echomq_bench.lease.verdict), in one form per state, so
two runs that differ by noise alone word the same answer the same way."""

from __future__ import annotations

import math
from dataclasses import dataclass

from echomq_bench.formatting import fmt_ms, fmt_pct
from echomq_bench.lease.verdict import EDGE, FEW, MIN_CRASHES, OVER, UNMEASURED, more_to_decide

__all__ = ["Row", "chosen_text", "decision", "open_text"]


@dataclass(frozen=True)
class Row:
    """One swept lease as the sentences need it (recommend.Candidate's figures and its two states)."""

    lease_ms: float
    false_expiry: float
    overran: float
    overran_lo: float
    overran_hi: float
    overruns: int
    executions: int
    blocks: int
    design_effect: float
    p99_ms: float
    p99_lo: float
    p99_hi: float
    crashes: int
    budget_state: str
    tolerance_state: str


def _budget_part(r: Row, budget: float) -> str:
    if r.budget_state == EDGE:
        return (f"sits at the edge of the {fmt_pct(budget)} budget (the 95% interval of its overruns, "
                f"{fmt_pct(r.overran_lo)}-{fmt_pct(r.overran_hi)}, {r.overruns:,} of {r.executions:,} at design "
                f"effect {r.design_effect:.2g}, holds it)")
    return (f"is within the {fmt_pct(budget)} budget only if its overruns are independent ({r.overruns:,} of "
            f"{r.executions:,}, in too few blocks of time to show how they cluster)")


def _tolerance_part(r: Row, tolerance_ms: float) -> str:
    if r.tolerance_state == EDGE:
        return (f"sits at the edge of the {fmt_ms(tolerance_ms)} recovery tolerance (the 95% interval of its "
                f"p99 recovery, {fmt_ms(r.p99_lo)}-{fmt_ms(r.p99_hi)} over {r.crashes:,} crashes, holds it)")
    return (f"has too few crashes to judge its recovery ({r.crashes:,}; a 95% upper bound on the p99 needs "
            f"{MIN_CRASHES})")


def decision(r: Row, budget: float, tolerance_ms: float) -> tuple[str, float, str]:
    """What would decide a lease not shown over either limit: (relax, factor, words). A longer run
    gives more executions and more crashes at once; more crashes alone, a higher crash rate."""
    if r.budget_state == UNMEASURED:
        return "duration", math.nan, "run longer (--duration): a window of several blocks of twice the real lease"
    runs = more_to_decide(r.overran, r.overran_lo, r.overran_hi, budget) if r.budget_state == EDGE else 1.0
    crashes = 1.0
    if r.tolerance_state == EDGE:
        crashes = more_to_decide(r.p99_ms, r.p99_lo, r.p99_hi, tolerance_ms)
    elif r.tolerance_state == FEW:
        crashes = MIN_CRASHES / max(1, r.crashes)
    if not math.isfinite(max(runs, crashes)):
        return "leases", math.inf, "sweep leases around it (--leases): it sits on the limit"
    if r.budget_state == EDGE:
        return "duration", max(runs, crashes), f"run about {max(runs, crashes):.1f}x as long (--duration)"
    return "crashes", crashes, f"crash about {crashes:.1f}x as many jobs (--crash-rate or --duration)"


def open_text(r: Row, budget: float, tolerance_ms: float) -> tuple[str, str, str, float]:
    """No lease confirmed: the lease named, at the edge of which limit, and what would decide it.
    Returns the text, the sentence saying what would decide it, its relax and its factor."""
    parts = ([_budget_part(r, budget)] if r.budget_state in (EDGE, UNMEASURED) else []) + \
            ([_tolerance_part(r, tolerance_ms)] if r.tolerance_state in (EDGE, FEW) else [])
    relax, factor, words = decision(r, budget, tolerance_ms)
    sentence = f"To decide it, {words}."
    return f"No lease is confirmed. {fmt_ms(r.lease_ms)} " + " and ".join(parts) + ". " + sentence, sentence, \
        relax, factor


def _shorter_words(s: Row, budget: float, tolerance_ms: float) -> str:
    why = []
    if s.budget_state == OVER:
        why.append(f"ran {fmt_pct(s.false_expiry)} twice, and the 95% interval of its overruns, "
                   f"{fmt_pct(s.overran_lo)}-{fmt_pct(s.overran_hi)}, lies over the budget")
    elif s.budget_state in (EDGE, UNMEASURED):
        why.append(f"ran {fmt_pct(s.false_expiry)} twice, but {_budget_part(s, budget)}")
    if s.tolerance_state == OVER:
        why.append(f"makes a crashed job wait {fmt_ms(s.p99_ms)} at p99, over the tolerance")
    elif s.tolerance_state in (EDGE, FEW):
        why.append(_tolerance_part(s, tolerance_ms))
    text = " and ".join(why) or "fits too"
    if s.budget_state != OVER and s.tolerance_state != OVER:
        text += f"; to decide it, {decision(s, budget, tolerance_ms)[2]}"
    return text


def chosen_text(c: Row, shorter: Row | None, longer: Row | None, wasted_share: float, median_ms: float,
                budget: float, tolerance_ms: float) -> str:
    """The confirmed lease, with the step shorter (why not it) and the step longer (what it costs)."""
    twice = (f"at most {fmt_pct(c.overran_hi)} of executions outlive it (95% upper bound over "
             f"{c.executions:,} in {c.blocks} blocks of time, design effect {c.design_effect:.2g}), "
             f"{fmt_pct(c.false_expiry)} ran twice")
    if math.isfinite(wasted_share) and c.false_expiry > 0:
        twice += f", wasting {fmt_pct(wasted_share)} of the work"
    text = (f"Set the lease to {fmt_ms(c.lease_ms)}: {twice}, and a crashed job is claimed again within "
            f"{fmt_ms(c.p99_hi)} at p99 (95% upper bound over {c.crashes:,} crashes; p99 {fmt_ms(c.p99_ms)}, "
            f"median {fmt_ms(median_ms)}).")
    if shorter is not None:
        text += f" One step shorter, {fmt_ms(shorter.lease_ms)}, {_shorter_words(shorter, budget, tolerance_ms)}."
    if longer is not None:
        text += (f" One step longer, {fmt_ms(longer.lease_ms)}, runs {fmt_pct(longer.false_expiry)} twice "
                 f"and makes a crashed job wait {fmt_ms(longer.p99_ms)} at p99.")
    return text

