"""The lease sweep's record: its summary, tidy tables and files, and the check
run's verdict that goes into it. The recommendation itself is
`echomq_bench.lease.recommend`; what the terminal and the report show of the
record is `echomq_bench.report.kinds.lease`."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from echomq_bench.formatting import fmt_ms, fmt_pct
from echomq_bench.lease.analysis import LeaseResult, SweepResult, agreement
from echomq_bench.lease.recommend import Candidate, Recommendation, model_lease_for_budget, recommend, recommend_for
from echomq_bench.measurement.workdist import WORK_HISTOGRAM
from echomq_bench.records.kinds.lease import LeaseCheck, LeaseEntry, LeaseRecord, LeaseServer, RecommendationEntry
from echomq_bench.records.record import Record
from echomq_bench.records.files import write_record

__all__ = ["Candidate", "Recommendation", "recommend", "write_run",
           "model_lease_for_budget", "summary_dict", "verification_text", "recommend_for"]


# --------------------------------------------------------------------------
# The check run's verdict, kept in the record (summary servers[i]["check"])


def _ci_pct(iv: Any) -> str:
    return f"{fmt_pct(iv.value)} [{fmt_pct(iv.lo)}-{fmt_pct(iv.hi)}]"


def verification_text(rec: Recommendation, check: SweepResult, sweep: SweepResult | None = None) -> tuple[bool, str]:
    """Does a separate run at the recommended lease keep both limits (its false expiry and its p99
    recovery at scale 1, the points: a second run is a second occasion, not more evidence)? With
    the sweep, the text adds whether the sweep's model predicts this separate run."""
    r = check.leases[0]
    p99 = r.recovery_unscaled["p99"].value
    fe_ok = r.false_expiry.value <= rec.budget
    rec_ok = p99 <= rec.tolerance_ms
    holds = fe_ok and rec_ok
    text = (f"check run at {fmt_ms(r.lease_ms)}: false expiry {_ci_pct(r.false_expiry)} "
            f"({'within' if fe_ok else 'OVER'} {fmt_pct(rec.budget)}), p99 recovery {fmt_ms(p99)} "
            f"({'within' if rec_ok else 'OVER'} {fmt_ms(rec.tolerance_ms)}) over {r.executions} executions: "
            f"the recommendation {'holds' if holds else 'DOES NOT hold'}")
    fitted = next((x for x in sweep.leases if x.lease_ms == r.lease_ms), None) if sweep is not None else None
    if fitted is not None:
        text += "; " + _predicted_text(fitted, r)
    return holds, text


def _predicted_text(fitted: LeaseResult, separate: LeaseResult) -> str:
    """The sweep's model against the check run's whole window: out of sample, a separate run."""
    said = {True: "inside", False: "OUTSIDE", None: "not testable at this count"}
    verdicts = agreement(fitted.model, {"live": separate.live, "false_expiry": separate.false_expiry,
                                        "crashes": separate.crashes, "recovery_median": separate.recovery["median"]})
    return (f"the sweep's model (out of sample, a separate run) puts false expiry at "
            f"{fmt_pct(fitted.model['false_expiry'])} ({said[verdicts['false_expiry']]} its interval) and the "
            f"median recovery at {fmt_ms(fitted.model['recovery_median'])} ({said[verdicts['recovery_median']]} "
            f"its interval)")


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


def _plain_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) for k, v in fields.items()}


def _agreement_row(r: LeaseResult) -> dict[str, Any]:
    """One lease's verdicts, with the predicted half's figures they were reached on."""
    held = r.held_out
    return {"lease_ms": r.lease_ms, **r.agree,
            "live": held["live"],
            "refused": held["refused"],
            "model_false_expiry": r.model["false_expiry"],
            "model_expected_false_expiries": r.model["false_expiry"] * held["live"],
            "crashes": held["crashes"],
            "measured_false_expiry": held["false_expiry"].to_dict(),
            "model_recovery_median_ms": r.model["recovery_median"],
            "measured_recovery_median_ms": held["recovery_median"].to_dict()}


def _server(res: SweepResult, rec: Recommendation, check: tuple[bool, str] | None) -> LeaseServer:
    both, n = res.agreement_count()
    return LeaseServer(
        server=res.data.server_name, version=res.data.server_version,
        recommendation=RecommendationEntry.from_record(rec.to_dict()),
        leases=tuple(LeaseEntry.from_record(_plain(r.to_dict())) for r in res.leases),
        model_split=res.split.to_dict(), agreement=tuple(_plain(_agreement_row(r)) for r in res.leases),
        agreement_count=both, lease_count=n,
        mass_crash=None if res.mass is None else _plain({**asdict(res.mass), "agree": res.mass.agree}),
        reap_cost=None if res.data.reap_cost is None else asdict(res.data.reap_cost), bottleneck=res.bottleneck,
        server_utilization=res.data.server_utilization, client_cpu_s=res.data.client_cpu_s, wall_s=res.data.wall_s,
        check=None if check is None else LeaseCheck(holds=check[0], text=check[1]))


def summary_dict(results: Sequence[SweepResult], recs: Sequence[Recommendation],
                 checks: Sequence[tuple[bool, str] | None] = ()) -> dict[str, Any]:
    """The sweep as summary.json holds it (records.kinds.lease.LeaseRecord)."""
    per_server = tuple(_server(res, rec, checks[i] if i < len(checks) else None)
                       for i, (res, rec) in enumerate(zip(results, recs)))
    # One number for the team: the most cautious of the servers' picks.
    chosen = [(rec, res) for rec, res in zip(recs, results) if rec.lease_ms is not None]
    top = max(chosen, key=lambda x: x[0].lease_ms or 0.0)[0] if chosen else recs[0]
    s = results[0].settings
    record = LeaseRecord(
        recommended_lease_ms=top.lease_ms, false_expiry_rate=top.false_expiry_rate,
        recovery_p99_ms=top.recovery_p99_ms, confirmed=top.confirmed, recommendation=top.text, budget=s.budget,
        recovery_tolerance_ms=s.recovery_tolerance_ms, time_scale=s.time_scale, work=s.work,
        reap_every_ms=s.reap_every_ms, reap_cap=s.reap_cap, crash_rate=s.crash_rate, consumers=s.consumers,
        window_s=s.duration_s, servers=per_server)
    return _plain_fields(record.to_record())


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
        add(r, "overran_rate", r.overran_rate.value, "fraction", lo=r.overran_rate.lo, hi=r.overran_rate.hi)
        add(r, "overran_design_effect", r.blocks["overran"].design_effect, "ratio")
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
        iv = r.recovery_unscaled["p99"]
        add(r, "recovery_unscaled_p99", iv.value, "ms", lo=iv.lo, hi=iv.hi)
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
        for v in r.unscaled_samples_ms:
            rows.append({"server": res.data.server_name, "lease_ms": r.lease_ms, "metric": "crash_to_reclaim_unscaled",
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
                                 tables={"lease": tuple(row for res in results for row in _tidy_rows(res)),
                                         "recovery": tuple(row for res in results for row in _recovery_rows(res))}))
    lat = work_latency(results[0].data)
    for res in results[1:]:
        lat.merge(work_latency(res.data))
    (run_dir / WORK_HISTOGRAM).write_text(lat.encode() + "\n")
    lat.write_hgrm(run_dir / "work.hgrm")
    draw(run_dir / "lease.png", results, recs)
    return summary
