"""The lease recommendation, the printed table, and the run's files.

`recommend` is pure: it takes one row per swept lease (measured false expiry
with its interval, measured p99 recovery) and the two limits, and returns
what to set, or, when no lease fits both, which limit to relax.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from echomq_bench.measurement.workdist import WORK_HISTOGRAM
from echomq_bench.records.record import Record, write_record
from echomq_bench.lease.analysis import LeaseResult, SweepResult, pooled_inputs
from echomq_bench.lease.model import false_expiry

__all__ = ["Candidate", "Recommendation", "recommend", "fmt_ms", "fmt_pct", "table", "write_run",
           "model_lease_for_budget", "summary_dict", "verification_text", "recommend_for"]


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
    recovery_median_ms: float = math.nan
    recovery_max_ms: float = math.nan
    wasted_share: float = math.nan

    @classmethod
    def of(cls, r: LeaseResult) -> "Candidate":
        return cls(r.lease_ms, r.false_expiry.value, r.false_expiry.lo, r.false_expiry.hi,
                   r.recovery["p99"].value, r.recovery["median"].value, r.recovery["max"],
                   r.wasted_share.value)


@dataclass(frozen=True)
class Recommendation:
    lease_ms: float | None
    confirmed: bool                  # the interval's upper end is within the budget, not only the estimate
    false_expiry_rate: float | None
    false_expiry_hi: float | None
    recovery_p99_ms: float | None
    relax: str | None                # None, "budget", "recovery_tolerance", "leases"
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

    A lease is preferred when the upper end of its false-expiry interval fits
    the budget (shown with 95% confidence); failing that, one whose estimate
    fits is recommended as unconfirmed. When none fits both limits, the text
    says so and names the limit whose relaxation is the smaller change.
    """
    rows = sorted(cands, key=lambda c: c.lease_ms)
    if not rows:
        raise ValueError("recommend: no leases to choose from")
    fits_rec = [c for c in rows if c.recovery_p99_ms <= tolerance_ms]
    sure = [c for c in fits_rec if c.false_expiry_hi <= budget]
    likely = [c for c in fits_rec if c.false_expiry <= budget]
    pick = sure[0] if sure else (likely[0] if likely else None)
    if pick is not None:
        confirmed = bool(sure)
        text = _chosen_text(pick, rows, budget, tolerance_ms, confirmed)
        if model_boundary_ms is not None and model_boundary_ms < pick.lease_ms:
            text += (f" The model, fed this run's measured overheads, puts the edge of the budget at "
                     f"{fmt_ms(model_boundary_ms)}; a shorter lease than {fmt_ms(pick.lease_ms)} needs its own "
                     f"run (--leases {fmt_ms(model_boundary_ms).replace(' ', '')} --check) before you trust it.")
        return Recommendation(pick.lease_ms, confirmed, pick.false_expiry, pick.false_expiry_hi,
                              pick.recovery_p99_ms, None, None, text, budget, tolerance_ms)
    relax, relax_to, text = _none_text(rows, budget, tolerance_ms, model_boundary_ms)
    return Recommendation(None, False, None, None, None, relax, relax_to, text, budget, tolerance_ms)


def _chosen_text(c: Candidate, rows: list[Candidate], budget: float, tol: float, confirmed: bool) -> str:
    twice = (f"{fmt_pct(c.false_expiry)} of executions (95% CI {fmt_pct(c.false_expiry_lo)}-"
             f"{fmt_pct(c.false_expiry_hi)}) outlived their lease and ran twice")
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
        elif s.false_expiry_hi > budget:
            why.append(f"measured {fmt_pct(s.false_expiry)} run twice, but its 95% interval reaches "
                       f"{fmt_pct(s.false_expiry_hi)}, so it is not shown to fit the budget")
        if s.recovery_p99_ms > tol:
            why.append(f"makes a crashed job wait {fmt_ms(s.recovery_p99_ms)} at p99, over the tolerance")
        text += f" One step shorter, {fmt_ms(s.lease_ms)}, {' and '.join(why) or 'fits too'}."
    if i + 1 < len(rows):
        longer = rows[i + 1]
        text += (f" One step longer, {fmt_ms(longer.lease_ms)}, runs {fmt_pct(longer.false_expiry)} twice "
                 f"and makes a crashed job wait {fmt_ms(longer.recovery_p99_ms)} at p99.")
    if not confirmed:
        text += (f" The estimate is within the {fmt_pct(budget)} budget but its interval reaches "
                 f"{fmt_pct(c.false_expiry_hi)}: run longer (--duration) to confirm it.")
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


# --------------------------------------------------------------------------
# Printed output


def _ci_pct(iv: Any) -> str:
    return f"{fmt_pct(iv.value)} [{fmt_pct(iv.lo)}-{fmt_pct(iv.hi)}]"


def _verdict(v: bool | None) -> str:
    return "n/a" if v is None else ("ok" if v else "NO")


def _us(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.1f}"


def _ci_ms(iv: Any, n: int) -> str:
    if not (math.isfinite(iv.lo) and math.isfinite(iv.hi)):
        return f"{fmt_ms(iv.value)} (n={n}, no CI)"
    return f"{fmt_ms(iv.value)} [{fmt_ms(iv.lo)}-{fmt_ms(iv.hi)}]"


def table(result: SweepResult) -> str:
    """Two tables: the trade-off with the model beside it, then the costs."""
    s = result.settings
    head = (f"{'lease':>8} {'runs':>6} {'false expiry [95% CI]':>25} {'model':>7} {'dup':>5} {'wasted':>6} "
            f"{'recovery p50 [95% CI]':>26} {'model':>7} {'p99':>7} {'model':>7}  agree")
    lines = [head]
    for r in result.leases:
        rec = r.recovery
        med = rec["median"]
        agree = f"fe {_verdict(r.agree['false_expiry'])}, p50 {_verdict(r.agree['recovery_median'])}"
        lines.append(
            f"{fmt_ms(r.lease_ms):>8} {r.executions:>6} {_ci_pct(r.false_expiry):>25} "
            f"{fmt_pct(r.model['false_expiry']):>7} {r.duplicates:>5} {fmt_pct(r.wasted_share.value):>6} "
            f"{_ci_ms(med, rec['n']):>26} "
            f"{fmt_ms(r.model['recovery_median']):>7} {fmt_ms(rec['p99'].value):>7} "
            f"{fmt_ms(r.model['recovery_p99']):>7}  {agree}")
    lines.append("")
    lines.append(f"{'lease':>8} {'jobs/s [95% CI]':>20} {'deadline->claim p50':>20} {'model':>7} "
                 f"{'reaps/s':>8} {'reaped/call':>11} {'at cap':>6} {'reap us/call':>12} {'reap cpu':>8} "
                 f"{'overhead p50':>12}")
    for r in result.leases:
        tp = r.throughput
        rp = r.reap
        lines.append(
            f"{fmt_ms(r.lease_ms):>8} {f'{tp.value:.1f} [{tp.lo:.1f}-{tp.hi:.1f}]':>20} "
            f"{fmt_ms(r.deadline_to_claim['median'].value):>20} {fmt_ms(r.model['deadline_to_claim_median']):>7} "
            f"{rp['calls_per_s']:>8.2f} {rp['jobs_per_nonempty_call']:>11.1f} {rp['at_cap_calls']:>6} "
            f"{_us(rp.get('server_usec_per_call')):>12} {fmt_pct(rp.get('server_share_nominal')):>8} "
            f"{fmt_ms(r.overhead_ms['median']):>12}")
    both, n = result.agreement_count()
    lines.append(f"model inside the measured 95% intervals (false expiry and median recovery) for {both}/{n} leases")
    lines.append(f"jobs/s and reaps/s are per nominal second; overhead = claim->complete beyond the work "
                 f"(round trips, sleep overshoot), nominal at time scale 1:{s.time_scale:g}")
    if result.mass is not None:
        m = result.mass
        lo, mean, hi = m.model_drain_ms
        drains = ", ".join(fmt_ms(d) for d in m.drain_ms)
        lines.append(f"mass crash of {m.k} jobs, cap {m.cap}/call: drained {drains} after the deadline in "
                     f"{'/'.join(str(t) for t in m.ticks)} reap calls; model {m.model_ticks} calls, "
                     f"{fmt_ms(lo)}-{fmt_ms(hi)} ({'agrees' if m.agree else 'DIFFERS'})")
    cost = result.data.reap_cost
    if cost is not None:
        lines.append(f"server cost of one reap call: {cost.empty_usec:.1f} us empty, {cost.full_call_usec:.0f} us "
                     f"at the cap of {s.reap_cap} ({cost.per_job_usec:.2f} us per job), from commandstats")
    lines.append(f"bottleneck: {result.bottleneck}")
    return "\n".join(lines)


def verification_text(rec: Recommendation, check: SweepResult) -> tuple[bool, str]:
    """Does a separate run at the recommended lease keep both limits?"""
    r = check.leases[0]
    fe_ok = r.false_expiry.value <= rec.budget
    rec_ok = r.recovery["p99"].value <= rec.tolerance_ms
    holds = fe_ok and rec_ok
    text = (f"check run at {fmt_ms(r.lease_ms)}: false expiry {_ci_pct(r.false_expiry)} "
            f"({'within' if fe_ok else 'OVER'} {fmt_pct(rec.budget)}), p99 recovery {fmt_ms(r.recovery['p99'].value)} "
            f"({'within' if rec_ok else 'OVER'} {fmt_ms(rec.tolerance_ms)}) over {r.executions} executions: "
            f"the recommendation {'holds' if holds else 'DOES NOT hold'}")
    return holds, text


# --------------------------------------------------------------------------
# Files


def _plain(obj: Any) -> Any:
    """Numpy scalars as the Python numbers and bools JSON knows (the shared
    writer would otherwise turn a numpy bool into the string "True")."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and type(obj).__module__ == "numpy":
        return obj.item()
    return obj


def summary_dict(results: Sequence[SweepResult], recs: Sequence[Recommendation],
                 checks: Sequence[tuple[bool, str] | None] = ()) -> dict[str, Any]:
    per_server = []
    for i, (res, rec) in enumerate(zip(results, recs)):
        both, n = res.agreement_count()
        entry: dict[str, Any] = {
            "server": res.data.server_name,
            "version": res.data.server_version,
            "recommendation": rec.to_dict(),
            "leases": [r.to_dict() for r in res.leases],
            "agreement": [{"lease_ms": r.lease_ms, **r.agree,
                           "model_false_expiry": r.model["false_expiry"],
                           "measured_false_expiry": r.false_expiry.to_dict(),
                           "model_recovery_median_ms": r.model["recovery_median"],
                           "measured_recovery_median_ms": r.recovery["median"].to_dict()} for r in res.leases],
            "agreement_count": both,
            "lease_count": n,
            "mass_crash": None if res.mass is None else {**asdict(res.mass), "agree": res.mass.agree},
            "reap_cost": None if res.data.reap_cost is None else asdict(res.data.reap_cost),
            "bottleneck": res.bottleneck,
            "server_utilization": res.data.server_utilization,
            "client_cpu_s": res.data.client_cpu_s,
            "wall_s": res.data.wall_s,
        }
        if i < len(checks) and checks[i] is not None:
            entry["check"] = {"holds": checks[i][0], "text": checks[i][1]}
        per_server.append(entry)
    # One number for the team: the most cautious of the servers' picks.
    chosen = [(rec, res) for rec, res in zip(recs, results) if rec.lease_ms is not None]
    top = max(chosen, key=lambda x: x[0].lease_ms or 0.0)[0] if chosen else recs[0]
    s = results[0].settings
    return _plain({
        "recommended_lease_ms": top.lease_ms,
        "false_expiry_rate": top.false_expiry_rate,
        "recovery_p99_ms": top.recovery_p99_ms,
        "confirmed": top.confirmed,
        "recommendation": top.text,
        "budget": s.budget,
        "recovery_tolerance_ms": s.recovery_tolerance_ms,
        "time_scale": s.time_scale,
        "work": s.work,
        "servers": per_server,
    })


def _tidy_rows(res: SweepResult) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    base = {"server": res.data.server_name, "version": res.data.server_version,
            "time_scale": res.settings.time_scale, "work": res.settings.work,
            "crash_rate": res.settings.crash_rate, "reap_every_ms": res.settings.reap_every_ms,
            "consumers": res.settings.consumers}

    def add(r: LeaseResult, metric: str, value: float, unit: str, source: str = "measured",
            lo: float | None = None, hi: float | None = None) -> None:
        rows.append({**base, "lease_ms": r.lease_ms, "source": source,
                     "lo": None if lo is None or not math.isfinite(lo) else lo,
                     "hi": None if hi is None or not math.isfinite(hi) else hi,
                     "metric": metric, "value": value, "unit": unit})

    for r in res.leases:
        add(r, "executions", r.executions, "count")
        add(r, "crashes", r.crashes, "count")
        add(r, "refused_completes", r.refused, "count")
        add(r, "duplicates", r.duplicates, "count")
        add(r, "false_expiry_rate", r.false_expiry.value, "fraction", lo=r.false_expiry.lo, hi=r.false_expiry.hi)
        add(r, "false_expiry_rate", r.model["false_expiry"], "fraction", "model")
        add(r, "lease_expiry_rate", r.model["lease_expiry"], "fraction", "model")
        add(r, "duplicate_rate", r.duplicate_rate.value, "fraction", lo=r.duplicate_rate.lo, hi=r.duplicate_rate.hi)
        add(r, "wasted_work", r.wasted_work_s, "s")
        add(r, "wasted_share", r.wasted_share.value, "fraction", lo=r.wasted_share.lo, hi=r.wasted_share.hi)
        for q in ("median", "p99"):
            iv = r.recovery[q]
            add(r, f"recovery_{q}", iv.value, "ms", lo=iv.lo, hi=iv.hi)
            add(r, f"recovery_{q}", r.model[f"recovery_{q}"], "ms", "model")
            dv = r.deadline_to_claim[q]
            add(r, f"deadline_to_claim_{q}", dv.value, "ms", lo=dv.lo, hi=dv.hi)
        add(r, "deadline_to_claim_median", r.model["deadline_to_claim_median"], "ms", "model")
        add(r, "recovery_max", r.recovery["max"], "ms")
        add(r, "recovery_censored", r.recovery["censored"], "count")
        add(r, "throughput", r.throughput.value, "jobs/s", lo=r.throughput.lo, hi=r.throughput.hi)
        add(r, "reap_calls", r.reap["calls"], "count")
        add(r, "reap_calls_per_s", r.reap["calls_per_s"], "1/s")
        add(r, "jobs_reaped", r.reap["jobs_reaped"], "count")
        add(r, "reap_rtt_p50", r.reap["rtt_p50_real_ms"], "ms_real")
        if "server_usec_per_call" in r.reap:
            add(r, "reap_server_usec_per_call", r.reap["server_usec_per_call"], "us")
            add(r, "reap_server_share", r.reap["server_share_nominal"], "fraction")
        add(r, "overhead_median", r.overhead_ms["median"], "ms")
    return rows


def _recovery_rows(res: SweepResult) -> list[dict[str, Any]]:
    rows = []
    for r in res.leases:
        for v in r.recovery_samples_ms:
            rows.append({"server": res.data.server_name, "lease_ms": r.lease_ms, "metric": "crash_to_reclaim",
                         "value": round(float(v), 3), "unit": "ms"})
        for v in r.deadline_samples_ms:
            rows.append({"server": res.data.server_name, "lease_ms": r.lease_ms, "metric": "deadline_to_reclaim",
                         "value": round(float(v), 3), "unit": "ms"})
    return rows


def write_run(run_dir: Path, results: Sequence[SweepResult], recs: Sequence[Recommendation],
              meta: dict[str, Any], checks: Sequence[tuple[bool, str] | None] = ()) -> dict[str, Any]:
    from echomq_bench.lease.chart import draw
    from echomq_bench.lease.sweep import work_latency

    summary = summary_dict(results, recs, checks)
    write_record(run_dir, Record(kind="lease", summary=summary, meta=meta,
                                 tables={"lease": [row for res in results for row in _tidy_rows(res)],
                                         "recovery": [row for res in results for row in _recovery_rows(res)]}))
    lat = work_latency(results[0].data)
    for res in results[1:]:
        lat.merge(work_latency(res.data))
    (run_dir / WORK_HISTOGRAM).write_text(lat.encode() + "\n")
    lat.write_hgrm(run_dir / "work.hgrm")
    draw(run_dir / "lease.png", results, recs)
    return summary
