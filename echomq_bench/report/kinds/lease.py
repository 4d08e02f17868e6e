"""A `lease` record: how long should the lease be for my work times? The
confirmed lease, the false-expiry and recovery trade-off around it, and the
reap interval it assumes; then every swept lease beside the model."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from echomq_bench.formatting import fmt_ms, fmt_pct
from echomq_bench.lease.blocks import DEFF_EVENTS, LONGEST
from echomq_bench.records.files import Run
from echomq_bench.records.kinds.lease import IntervalEntry, LeaseEntry, LeaseRecord, LeaseServer, interval_of
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table

__all__ = ["section", "answer"]

QUESTION = "How long should my lease be?"


def _sweep(run: Run) -> LeaseRecord:
    """The record, with the sweep's settings a record that kept fewer in its summary took from meta.json."""
    record = LeaseRecord.from_record(run.summary)
    meta: Mapping[str, Any] = (run.meta.get("settings") or {}).get("lease") or {}
    kept = {"reap_every_ms": record.reap_every_ms, "reap_cap": record.reap_cap, "crash_rate": record.crash_rate,
            "consumers": record.consumers, "window_s": record.window_s}
    taken = {name: meta.get("duration_s" if name == "window_s" else name) for name, value in kept.items()
             if value is None}
    return replace(record, **{k: v for k, v in taken.items() if v is not None})


def _judged_recovery(x: LeaseEntry) -> Mapping[str, Any]:
    """The recovery the tolerance is held against: at scale 1, or as measured in an older record."""
    return x.recovery_unscaled or x.recovery


def _tradeoff(server: LeaseServer) -> pd.DataFrame:
    return pd.DataFrame([{
        "lease_ms": x.lease_ms, "false_expiry": x.false_expiry.part("value"),
        "fe_lo": x.false_expiry.part("lo"), "fe_hi": x.false_expiry.part("hi"),
        "overran_hi": (x.overran_rate or IntervalEntry()).part("hi"),
        "recovery_p99_ms": interval_of(_judged_recovery(x).get("p99")).part("value")} for x in server.leases])


def _reap_cap(s: LeaseRecord) -> int:
    return s.reap_cap if s.reap_cap is not None else 100


def _sentence(s: LeaseRecord, server: LeaseServer) -> str:
    rec = server.recommendation
    reap = f"a reap every {fmt_ms(s.reap_every_ms)} (cap {_reap_cap(s)})"
    if rec.lease_ms is None or not rec.confirmed:
        if rec.decide:   # the leases at the edge, each said the same way every time, then what decides them
            return f"{rec.text or ''} With {reap}."
        said = str(rec.text or "No lease is confirmed.").split(". ")
        return ". ".join(said[:2]).rstrip(".") + f"; with {reap}."
    chosen = server.lease(rec.lease_ms)
    n = chosen.live if chosen else 0
    if rec.recovery_p99_hi is None:   # an older record: the p99 itself was judged
        recovery = (f"within {fmt_ms(rec.recovery_p99_ms)} at p99 (tolerance {fmt_ms(s.recovery_tolerance_ms)})")
        bound = f"95% upper bound, n = {n:,}"
    else:
        blocks = chosen.blocks.get("overran", {}) if chosen else {}
        recovery = (f"within {fmt_ms(rec.recovery_p99_hi)} at p99 (95% upper bound over {rec.crashes or 0:,} "
                    f"crashes; tolerance {fmt_ms(s.recovery_tolerance_ms)})")
        bound = (f"95% upper bound over n = {n:,} in {blocks.get('blocks', '?')} blocks of time, design effect "
                 f"{float(blocks.get('design_effect') or 1):.2g}")
    return (f"Set the lease to {fmt_ms(rec.lease_ms)}: at most {fmt_pct(rec.overran_hi)} of executions "
            f"outlive it ({bound}; budget {fmt_pct(s.budget)}), and a crashed job is claimed again {recovery}, "
            f"with {reap}.")


def _scale_text(s: LeaseRecord, unscaled: bool) -> str:
    scale = float(s.time_scale or 1)
    if scale == 1:
        return "run in real time"
    text = f"run {scale:g}x faster, which can only overstate false expiry"
    if unscaled:
        text += ", its recovery read at scale 1 (the physical delays counted once, not {:g}x)".format(scale)
    return text + " (docs/design/lease-model.md)"


def answer(run: Run, out: Path) -> Answer | None:
    s = _sweep(run)
    if not s.servers or not s.servers[0].leases:
        return None
    server = s.servers[0]
    rec = server.recommendation
    frame = _tradeoff(server)
    png = charts.lease_tradeoff(frame, rec.lease_ms if rec.confirmed else None,
                                float(s.budget if s.budget is not None else 0.001),
                                float(s.recovery_tolerance_ms if s.recovery_tolerance_ms is not None else 3000),
                                out / "answer_lease.png")
    executions = sum(x.live for x in server.leases)
    blocked = any(x.blocks for x in server.leases)
    confirmed = ("the 95% upper bound of executions that outlived the lease, over blocks of time, is within the "
                 "budget, and the p99 recovery's 95% upper bound within the tolerance" if blocked else
                 "the Wilson 95% upper bound of executions that outlived the lease is within the budget")
    foot = (f"Work {s.work}, {fmt_pct(s.crash_rate)} of executions crash; {len(frame)} leases side "
            f"by side on {server.server}, {s.consumers} consumers each, {executions:,} executions, "
            f"{_scale_text(s, any(x.recovery_unscaled for x in server.leases))}. Confirmed: {confirmed}. "
            f"Bound: the consumer pool, a closed loop of sleeping consumers.")
    return Answer(QUESTION, [_sentence(s, server)], png, foot, "answer-lease")


def _ci(iv: IntervalEntry, fmt: Callable[[float | None], str]) -> str:
    """value [lo-hi], or the value alone where the interval is open."""
    value, lo, hi = (iv.part(part) for part in ("value", "lo", "hi"))
    return fmt(value) + (f" [{fmt(lo)}-{fmt(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else "")


def _verdict(v: Any) -> str:
    return "n/a" if v is None else ("ok" if v else "NO")


def _expiry_table(server: LeaseServer) -> pd.DataFrame:
    """Per lease: how often a job ran twice, the overrun bound, the model, and what it cost."""
    rows = []
    for x in server.leases:
        rows.append({
            "lease": fmt_ms(x.lease_ms),
            "executions": f"{int(x.executions if x.executions is not None else x.live):,}",
            "ran twice [95% CI]": _ci(x.false_expiry, fmt_pct),
            "outlived, upper": fmt_pct((x.overran_rate or IntervalEntry()).part("hi")),
            "model": fmt_pct(x.model.get("false_expiry")),
            "dup": f"{x.duplicates:,}", "wasted": fmt_pct(x.wasted_share.part("value")),
            "model agrees": (f"fe {_verdict(x.agree.get('false_expiry'))}, "
                             f"p50 {_verdict(x.agree.get('recovery_median'))}"),
        })
    return pd.DataFrame(rows)


def _recovery_row(x: LeaseEntry) -> dict[str, str]:
    unscaled = x.recovery_unscaled
    return {
        "lease": fmt_ms(x.lease_ms), "recovery p50 [95% CI]": _ci(interval_of(x.recovery.get("median")), fmt_ms),
        "model": fmt_ms(x.model.get("recovery_median")),
        "p99": fmt_ms(interval_of(x.recovery.get("p99")).part("value")),
        "model p99": fmt_ms(x.model.get("recovery_p99")),
        "at 1:1, p99 [95% CI]": _ci(interval_of(unscaled.get("p99")), fmt_ms) if unscaled else "-",
        "crashes": f"{int(unscaled.get('n') or 0):,}" if unscaled else "-",
    }


def _cost_row(x: LeaseEntry) -> dict[str, str]:
    usec = x.reap.get("server_usec_per_call")
    return {
        "lease": fmt_ms(x.lease_ms), "jobs/s": f"{x.throughput.part('value'):.1f}",
        "reaps/s": f"{float(x.reap.get('calls_per_s', math.nan)):.2f}",
        "µs/reap": "-" if usec is None else f"{float(usec):.1f}",
        "overhead p50": fmt_ms(x.overhead_ms.get("median")),
    }


def _recovery_table(server: LeaseServer) -> pd.DataFrame:
    """Per lease: how long a crashed job waited as measured, beside the model, and at scale 1 (what is judged)."""
    return pd.DataFrame([_recovery_row(x) for x in server.leases])


def _cost_table(server: LeaseServer) -> pd.DataFrame:
    """Per lease: what the sweep ran and what its reaping cost."""
    return pd.DataFrame([_cost_row(x) for x in server.leases])


def _agreement(server: LeaseServer) -> str:
    return (f"{server.server} {server.agreement_count}/{server.lease_count if server.lease_count is not None else '?'} "
            f"leases, {server.model_split.get('label')}")


def _mass_crash(m: Mapping[str, Any]) -> str:
    lo, _, hi = (list(m.get("model_drain_ms") or ()) + [math.nan] * 3)[:3]
    drains = ", ".join(fmt_ms(d) for d in m.get("drain_ms") or ())
    return (f"Mass crash of {int(m['k']):,} jobs, cap {m.get('cap')} per call: drained {drains} after the deadline "
            f"in {'/'.join(str(t) for t in m.get('ticks') or ())} reap calls; model {m.get('model_ticks')} calls, "
            f"{fmt_ms(lo)}-{fmt_ms(hi)} ({'agrees' if m.get('agree') else 'DIFFERS'}).")


def _findings(s: LeaseRecord, server: LeaseServer) -> list[str]:
    """The lines under the tables: agreement, the mass crash, the reap cost, the bottleneck, the check."""
    lines = _method_lines(s, server)
    if server.agreement_count is not None:
        lines.append("Model inside the measured 95% intervals (false expiry and median recovery): "
                     + _agreement(server) + ".")
    if server.mass_crash is not None:
        lines.append(_mass_crash(server.mass_crash))
    cost = server.reap_cost
    if cost is not None:
        lines.append(f"Server cost of one reap call: {float(cost['empty_usec']):.1f} µs empty, "
                     f"{float(cost['full_call_usec']):.0f} µs at the cap of {_reap_cap(s)} "
                     f"({float(cost['per_job_usec']):.2f} µs per job), from commandstats.")
    lines.append(f"Bottleneck: {server.bottleneck or '?'}.")
    if server.check is not None and server.check.text:
        lines.append(_sentence_case(server.check.text) + ".")
    return lines


def _method_lines(s: LeaseRecord, server: LeaseServer) -> list[str]:
    """How the intervals were taken: the blocks of time and their design effect, the physical delays."""
    lines = []
    if server.leases and server.leases[0].blocks:
        lengths = [float(x.blocks.get("length_real_s") or 0) for x in server.leases]
        own, lent = [], []
        for x in server.leases:
            over, longest = x.blocks.get("overran") or {}, x.blocks.get("longest") or {}
            if int(over.get("events") or 0) >= DEFF_EVENTS:
                own.append(f"{float(over['design_effect']):.2g} at {fmt_ms(x.lease_ms)}")
            elif longest.get("measured") is not None:
                lent.append(f"{max(1.0, float(longest['measured'])):.2g} at {fmt_ms(x.lease_ms)}")
        said = [f"of overruns {', '.join(own)}"] if own else []
        if lent:
            said.append(f"with fewer than {DEFF_EVENTS} overruns, of the {LONGEST} longest executions "
                        + ", ".join(lent))
        lines.append(f"Rates over blocks of time (twice the real lease, {min(lengths):g}-{max(lengths):g} s). "
                     f"Design effect {'; '.join(said) or 'not measured'}.")
    physical = [float(v) for x in server.leases
                if (v := x.recovery_unscaled.get("physical_p99_real_ms")) is not None]
    if physical and float(s.time_scale or 1) != 1:
        lines.append(f"Recovery at 1:1: the physical part of a crashed job's wait (the reaper late, round trips, "
                     f"a held-up client), up to {max(physical):.3g} ms real at p99, counted once, not "
                     f"{float(s.time_scale or 1):g}x.")
    return lines


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def _settings(s: LeaseRecord) -> str:
    parts = [f"work {s.work}" if s.work is not None else "",
             f"crash rate {fmt_pct(s.crash_rate)}" if s.crash_rate is not None else "",
             f"reap every {fmt_ms(s.reap_every_ms)} (cap {_reap_cap(s)})" if s.reap_every_ms is not None else "",
             f"{s.consumers} consumers per lease" if s.consumers is not None else "",
             f"time scale 1:{float(s.time_scale or 1):g}",
             f"{float(s.window_s):g} s window" if s.window_s is not None else ""]
    return (_sentence_case("; ".join(p for p in parts if p)) + ". jobs/s and reaps/s are per nominal second; overhead "
            "is claim to complete beyond the work; the measured columns are the whole window; at 1:1 is the "
            "wait as the unscaled system would see it, what the tolerance is held against.")


def section(run: Run, out: Path) -> list[Block]:
    s = _sweep(run)
    blocks: list[Block] = [Heading("Lease sizing", anchor="lease"), Para(_settings(s))]
    for server in s.servers:
        name = f"{server.server} ({server.version})"
        blocks += [Table(_expiry_table(server), f"{name}: each swept lease, how often a job ran twice"),
                   Table(_recovery_table(server), f"{name}: recovery after a crash beside the model, and at 1:1"),
                   Table(_cost_table(server), f"{name}: throughput and the cost of reaping"),
                   *(Para(line) for line in _findings(s, server)),
                   Para(f"{server.server}: " + str(server.recommendation.text or "no recommendation recorded"))]
    if len(s.servers) > 1:
        blocks.append(Para(f"Across servers: {fmt_ms(s.recommended_lease_ms)} (the most cautious pick)."))
    png = run.path / "lease.png"
    if png.is_file():
        blocks.append(Image(png, "The lease trade-off: false expiry and recovery against the lease, model beside"))
    method = ("rates with 95% intervals over blocks of time (Wilson's on the effective sample)"
              if any(x.blocks for srv in s.servers for x in srv.leases) else "rates with 95% Wilson intervals")
    blocks.append(Notes(context_lines(run, trials=f"work {s.work or '?'}, time scale {s.time_scale}; {method}")))
    return blocks
