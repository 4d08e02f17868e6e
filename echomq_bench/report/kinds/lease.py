"""A `lease` record: how long should the lease be for my work times? The
confirmed lease, the false-expiry and recovery trade-off around it, and the
reap interval it assumes; then every swept lease beside the model."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from echomq_bench.lease.recommend import fmt_ms, fmt_pct
from echomq_bench.records.files import Run
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table

__all__ = ["section", "answer"]

QUESTION = "How long should my lease be?"


def _sweep(run: Run) -> dict[str, Any]:
    """The sweep's settings: the summary's, and for a record that kept fewer there, the meta's."""
    meta = dict(((run.meta.get("settings") or {}).get("lease")) or {})
    if "duration_s" in meta:
        meta["window_s"] = meta["duration_s"]
    return {**meta, **run.summary}


def _servers(run: Run) -> list[dict[str, Any]]:
    return [x for x in run.summary.get("servers") or () if isinstance(x, dict)]


def _rate(entry: dict[str, Any], key: str, part: str = "value") -> float:
    value = (entry.get(key) or {}).get(part)
    return float(value) if value is not None else math.nan


def _tradeoff(server: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{
        "lease_ms": x["lease_ms"], "false_expiry": _rate(x, "false_expiry"),
        "fe_lo": _rate(x, "false_expiry", "lo"), "fe_hi": _rate(x, "false_expiry", "hi"),
        "overran_hi": _rate(x, "overran_rate", "hi"),
        "recovery_p99_ms": _rate(x.get("recovery") or {}, "p99")} for x in server.get("leases") or ()])


def _sentence(s: dict[str, Any], rec: dict[str, Any], server: dict[str, Any]) -> str:
    reap = f"a reap every {fmt_ms(s.get('reap_every_ms'))} (cap {s.get('reap_cap', 100)})"
    if rec.get("lease_ms") is None or not rec.get("confirmed"):
        said = str(rec.get("text") or "No lease is confirmed.").split(". ")
        return ". ".join(said[:2]).rstrip(".") + f"; with {reap}."
    chosen: dict[str, Any] = next((x for x in server.get("leases") or () if x.get("lease_ms") == rec["lease_ms"]), {})
    return (f"Set the lease to {fmt_ms(rec['lease_ms'])}: at most {fmt_pct(rec.get('overran_hi'))} of executions "
            f"outlive it (95% upper bound, n = {int(chosen.get('live', 0)):,}; budget {fmt_pct(s.get('budget'))}), "
            f"and a crashed job is claimed again within {fmt_ms(rec.get('recovery_p99_ms'))} at p99 (tolerance "
            f"{fmt_ms(s.get('recovery_tolerance_ms'))}), with {reap}.")


def _scale_text(s: dict[str, Any]) -> str:
    scale = float(s.get("time_scale") or 1)
    if scale == 1:
        return "run in real time"
    return f"run {scale:g}x faster, which can only overstate false expiry (docs/design/lease-model.md)"


def answer(run: Run, out: Path) -> Answer | None:
    servers = _servers(run)
    if not servers or not servers[0].get("leases"):
        return None
    s = _sweep(run)
    server = servers[0]
    rec = server.get("recommendation") or {}
    frame = _tradeoff(server)
    png = charts.lease_tradeoff(frame, rec.get("lease_ms") if rec.get("confirmed") else None,
                                float(s.get("budget", 0.001)), float(s.get("recovery_tolerance_ms", 3000)),
                                out / "answer_lease.png")
    executions = sum(int(x.get("live", 0)) for x in server.get("leases") or ())
    foot = (f"Work {s.get('work')}, {fmt_pct(s.get('crash_rate'))} of executions crash; {len(frame)} leases side "
            f"by side on {server.get('server')}, {s.get('consumers')} consumers each, {executions:,} executions, "
            f"{_scale_text(s)}. Confirmed: the Wilson 95% upper bound of executions that outlived the lease is "
            f"within the budget. Bound: the consumer pool, a closed loop of sleeping consumers.")
    return Answer(QUESTION, [_sentence(s, rec, server)], png, foot, "answer-lease")


def _ci(entry: dict[str, Any], key: str, fmt: Callable[[float | None], str]) -> str:
    """value [lo-hi], or the value alone where the interval is open."""
    value, lo, hi = (_rate(entry, key, part) for part in ("value", "lo", "hi"))
    return fmt(value) + (f" [{fmt(lo)}-{fmt(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else "")


def _verdict(v: Any) -> str:
    return "n/a" if v is None else ("ok" if v else "NO")


def _expiry_table(server: dict[str, Any]) -> pd.DataFrame:
    """Per lease: how often a job ran twice, the overrun bound, the model, and what it cost."""
    rows = []
    for x in server.get("leases") or ():
        agree = x.get("agree") or {}
        rows.append({
            "lease": fmt_ms(x["lease_ms"]), "executions": f"{int(x.get('executions', x.get('live', 0))):,}",
            "ran twice [95% CI]": _ci(x, "false_expiry", fmt_pct),
            "outlived, upper": fmt_pct(_rate(x, "overran_rate", "hi")),
            "model": fmt_pct((x.get("model") or {}).get("false_expiry")),
            "dup": f"{int(x.get('duplicates', 0)):,}", "wasted": fmt_pct(_rate(x, "wasted_share")),
            "model agrees": f"fe {_verdict(agree.get('false_expiry'))}, p50 {_verdict(agree.get('recovery_median'))}",
        })
    return pd.DataFrame(rows)


def _recovery_table(server: dict[str, Any]) -> pd.DataFrame:
    """Per lease: how long a crashed job waited, beside the model, and what the sweep cost."""
    rows = []
    for x in server.get("leases") or ():
        rec, model, reap = x.get("recovery") or {}, x.get("model") or {}, x.get("reap") or {}
        usec = reap.get("server_usec_per_call")
        rows.append({
            "lease": fmt_ms(x["lease_ms"]), "recovery p50 [95% CI]": _ci(rec, "median", fmt_ms),
            "model": fmt_ms(model.get("recovery_median")), "p99": fmt_ms(_rate(rec, "p99")),
            "model p99": fmt_ms(model.get("recovery_p99")),
            "jobs/s": f"{_rate(x, 'throughput'):.1f}", "reaps/s": f"{float(reap.get('calls_per_s', math.nan)):.2f}",
            "µs/reap": "-" if usec is None else f"{float(usec):.1f}",
            "overhead p50": fmt_ms((x.get("overhead_ms") or {}).get("median")),
        })
    return pd.DataFrame(rows)


def _agreement(server: dict[str, Any]) -> str:
    split = server.get("model_split")
    label = split["label"] if isinstance(split, dict) and "label" in split else "in sample (older record)"
    return (f"{server.get('server', '?')} {server.get('agreement_count')}/{server.get('lease_count', '?')} leases, "
            f"{label}")


def _mass_crash(m: dict[str, Any]) -> str:
    lo, _, hi = (list(m.get("model_drain_ms") or ()) + [math.nan] * 3)[:3]
    drains = ", ".join(fmt_ms(d) for d in m.get("drain_ms") or ())
    return (f"Mass crash of {int(m['k']):,} jobs, cap {m.get('cap')} per call: drained {drains} after the deadline "
            f"in {'/'.join(str(t) for t in m.get('ticks') or ())} reap calls; model {m.get('model_ticks')} calls, "
            f"{fmt_ms(lo)}-{fmt_ms(hi)} ({'agrees' if m.get('agree') else 'DIFFERS'}).")


def _findings(s: dict[str, Any], server: dict[str, Any]) -> list[str]:
    """The lines under the tables: agreement, the mass crash, the reap cost, the bottleneck, the check."""
    lines = []
    if "agreement_count" in server:
        lines.append("Model inside the measured 95% intervals (false expiry and median recovery): "
                     + _agreement(server) + ".")
    if isinstance(server.get("mass_crash"), dict):
        lines.append(_mass_crash(server["mass_crash"]))
    cost = server.get("reap_cost")
    if isinstance(cost, dict):
        lines.append(f"Server cost of one reap call: {float(cost['empty_usec']):.1f} µs empty, "
                     f"{float(cost['full_call_usec']):.0f} µs at the cap of {s.get('reap_cap', 100)} "
                     f"({float(cost['per_job_usec']):.2f} µs per job), from commandstats.")
    lines.append(f"Bottleneck: {server.get('bottleneck', '?')}.")
    check = server.get("check")
    if isinstance(check, dict) and check.get("text"):
        lines.append(_sentence_case(str(check["text"])) + ".")
    return lines


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def _settings(s: dict[str, Any]) -> str:
    parts = [f"work {s['work']}" if "work" in s else "",
             f"crash rate {fmt_pct(s['crash_rate'])}" if "crash_rate" in s else "",
             f"reap every {fmt_ms(s['reap_every_ms'])} (cap {s.get('reap_cap', 100)})" if "reap_every_ms" in s else "",
             f"{s['consumers']} consumers per lease" if "consumers" in s else "",
             f"time scale 1:{float(s.get('time_scale') or 1):g}",
             f"{float(s['window_s']):g} s window" if "window_s" in s else ""]
    return (_sentence_case("; ".join(p for p in parts if p)) + ". jobs/s and reaps/s are per nominal second; overhead "
            "is claim to complete beyond the work; the measured columns are the whole window.")


def section(run: Run, out: Path) -> list[Block]:
    s = _sweep(run)
    blocks: list[Block] = [Heading("Lease sizing", anchor="lease"), Para(_settings(s))]
    for server in _servers(run):
        name = f"{server.get('server')} ({server.get('version')})"
        rec = server.get("recommendation") or {}
        blocks += [Table(_expiry_table(server), f"{name}: each swept lease, how often a job ran twice"),
                   Table(_recovery_table(server), f"{name}: recovery after a crash beside the model, and the cost"),
                   *(Para(line) for line in _findings(s, server)),
                   Para(f"{server.get('server')}: " + str(rec.get("text") or "no recommendation recorded"))]
    if len(_servers(run)) > 1:
        blocks.append(Para(f"Across servers: {fmt_ms(s.get('recommended_lease_ms'))} (the most cautious pick)."))
    png = run.path / "lease.png"
    if png.is_file():
        blocks.append(Image(png, "The lease trade-off: false expiry and recovery against the lease, model beside"))
    blocks.append(Notes(context_lines(run, trials=f"work {s.get('work', '?')}, time scale {s.get('time_scale', 1)}; "
                                                  "rates with 95% Wilson intervals")))
    return blocks
