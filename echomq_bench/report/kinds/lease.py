"""A `lease` record: how long should the lease be for my work times? The
confirmed lease, the false-expiry and recovery trade-off around it, and the
reap interval it assumes; then every swept lease beside the model."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from echomq_bench.lease.recommend import fmt_ms, fmt_pct
from echomq_bench.records.files import Run
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table

__all__ = ["section", "answer"]

QUESTION = "How long should my lease be?"


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
    return f"run {scale:g}x faster, which can only overstate both (docs/design/lease-model.md)"


def answer(run: Run, out: Path) -> Answer | None:
    servers = _servers(run)
    if not servers or not servers[0].get("leases"):
        return None
    s = run.summary
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


def _table(server: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for x in server.get("leases") or ():
        rec = x.get("recovery") or {}
        rows.append({
            "lease": fmt_ms(x["lease_ms"]), "executions": int(x.get("live", 0)),
            "ran twice [95% CI]": f"{fmt_pct(_rate(x, 'false_expiry'))} [{fmt_pct(_rate(x, 'false_expiry', 'lo'))}"
                                  f"-{fmt_pct(_rate(x, 'false_expiry', 'hi'))}]",
            "outlived, upper": fmt_pct(_rate(x, "overran_rate", "hi")),
            "model": fmt_pct((x.get("model") or {}).get("false_expiry")),
            "recovery p50": fmt_ms(_rate(rec, "median")), "p99": fmt_ms(_rate(rec, "p99")),
            "model p99": fmt_ms((x.get("model") or {}).get("recovery_p99")),
        })
    return pd.DataFrame(rows)


def _agreement(server: dict[str, Any]) -> str:
    split = server.get("model_split")
    label = split["label"] if isinstance(split, dict) and "label" in split else "in sample"
    return (f"{server.get('server', '?')} {server.get('agreement_count')}/{server.get('lease_count', '?')} leases, "
            f"{label}")


def section(run: Run, out: Path) -> list[Block]:
    s = run.summary
    blocks: list[Block] = [Heading("Lease sizing", anchor="lease")]
    for server in _servers(run):
        rec = server.get("recommendation") or {}
        blocks += [Para(f"{server.get('server')} ({server.get('version')}): "
                        + str(rec.get("text") or "no recommendation recorded")),
                   Table(_table(server), f"Each swept lease on {server.get('server')}, measured beside the model")]
        if "agreement_count" in server:
            blocks.append(Para("Model inside the measured 95% intervals (false expiry and median recovery): "
                               + _agreement(server) + "."))
    png = run.path / "lease.png"
    if png.is_file():
        blocks.append(Image(png, "The lease trade-off: false expiry and recovery against the lease, model beside"))
    bottleneck = "; ".join(f"{x.get('server')}: {x.get('bottleneck', '?')}" for x in _servers(run))
    blocks.append(Notes(context_lines(run, trials=f"work {s.get('work', '?')}, time scale {s.get('time_scale', 1)}; "
                                                  "rates with 95% Wilson intervals", bottleneck=bottleneck)))
    return blocks
