"""One renderer per kind of results folder. A renderer reads a `Run` and
returns blocks; the kind is the one the folder's summary.json declares."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.report import charts
from echomq_bench.report.capacity import capacity_finding, capacity_section
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table
from echomq_bench.report.failover import failover_finding, failover_section
from echomq_bench.report.matrix import verbs_section
from echomq_bench.report.reapcost import reapcost_finding, reapcost_section

__all__ = ["RENDERERS", "headline_findings"]

Renderer = Callable[[Run, Path], list[Block]]


def _footer(run: Run, **kw: str) -> str:
    return " ".join(context_lines(run, **kw))


def check_section(run: Run, out: Path) -> list[Block]:
    t = run.table("check")
    per = t.groupby(["server", "version"], sort=False)["ok"].agg(["sum", "count"]).reset_index()
    per["result"] = [f"{'PASS' if s == c else 'FAIL'} {s}/{c}" for s, c in zip(per["sum"], per["count"])]
    failed = t[~t["ok"].astype(bool)]
    blocks: list[Block] = [
        Heading("Conformance", anchor="check"),
        Para("The course's stories J1-J5 and L1-L6 played on each server (echomq-bench check)."),
        Table(per[["server", "version", "result"]], "Conformance check", id="check-table"),
    ]
    if len(failed):
        blocks.append(Table(failed[["server", "story", "text"]], "Failed stories"))
    blocks.append(Notes(context_lines(run)))
    return blocks


def _spread_text(entry: dict[str, Any], key: str, fmt: str = ",.0f") -> str:
    s = entry.get(key) or {}
    if not isinstance(s, dict) or "median" not in s:
        return ""
    return f"{format(s['median'], fmt)} ({format(s['min'], fmt)}..{format(s['max'], fmt)})"


def _ratio_text(entry: dict[str, Any], key: str = "server_us") -> str:
    """A verdict as its label: ratio [CI; method, n, exclusions] verdict."""
    label = entry.get(f"{key}_label")
    if label:
        return str(label)
    text = (entry.get("verdicts") or {}).get(key, {}).get("text")
    return str(text or entry.get("verdict", "?"))


def _compare_rows(summary: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A row per build for the table, and a row per build and metric with an interval for the chart."""
    base = summary.get("baseline", "?")
    rows, ratio_rows = [], []
    # Builds run together share one core, so each one's rate is its share of
    # it; only the ratios and µs/cycle compare across builds.
    shared = summary.get("interleave") == "together"
    rate_label = "cycles/s, share of one core" if shared else "cycles/s median (min..max)"
    for name, e in summary.get("builds", {}).items():
        bound = e.get("bound", {})
        rows.append({
            "build": name, "version": e.get("version", "?"),
            rate_label: _spread_text(e, "cycles_per_s"),
            "server µs/cycle": _spread_text(e, "server_us_per_cycle", ".2f"),
            "claim p99 ms": _spread_text(e, "claim_p99_ms", ".2f"),
            "server busy": _spread_text(e, "server_utilization", ".0%"),
            "client CPU": _spread_text(e, "client_utilization", ".0%"),
            "bound (trials)": ", ".join(f"{k} {v}" for k, v in bound.items() if v),
            f"server µs/cycle vs {base}": "baseline" if name == base else _ratio_text(e),
        })
        if name != base:
            for metric, key in (("server µs/cycle", "server_us"), ("throughput", "throughput"), ("claim p99", "p99")):
                ratio, ci, verdict = e.get(f"{key}_ratio"), e.get(f"{key}_ci95"), e.get(f"{key}_verdict")
                if ratio is not None and ci:
                    ratio_rows.append({"build": name, "metric": metric, "ratio": ratio, "lo": ci[0], "hi": ci[1],
                                       "verdict": verdict})
    return rows, ratio_rows


def compare_section(run: Run, out: Path) -> list[Block]:
    summary = run.summary
    base = summary.get("baseline", "?")
    trials = summary.get("trials", "?")
    rows, ratio_rows = _compare_rows(summary)
    bound_text = "; ".join(r["build"] + ": " + r["bound (trials)"] + ", server busy " + r["server busy"] for r in rows)
    order = (run.meta.get("settings") or {}).get("order", "interleaved A B A B, a fresh server each")
    trials_text = f"{trials} per build, {order}; spread is min..max over trials"
    footer = _footer(run, trials=trials_text, bottleneck=bound_text)
    blocks: list[Block] = [
        Heading("Capacity: Redis against Valkey", anchor="compare"),
        Para("Claim+complete cycles at the server's limit, pipelined over several connections by "
             f"echomq-bench compare. The headline is server µs per cycle against {base}: the geometric mean "
             f"ratio over the trials in which both builds were server-bound, with a 95% t-interval on the log "
             f"ratios ({summary.get('method', 'see docs/design/compare.md')}). Fewer than "
             f"{summary.get('min_trials', 6)} such trials give 'inconclusive'; 'equivalent' means two one-sided "
             f"tests put the ratio within ±{summary.get('margin', 0.02):.0%}."),
    ]
    excluded = {n: e["trials_excluded"] for n, e in summary.get("builds", {}).items() if e.get("trials_excluded")}
    if excluded:
        blocks.append(Para("Trials left out because a build was not server-bound: "
                           + "; ".join(f"{n}: {k} of {trials}" for n, k in excluded.items()) + "."))
    if summary.get("rates_note"):
        blocks.append(Para("How the builds shared each trial: " + summary.get("order", "together") + "; "
                           + summary["rates_note"] + "."))
    blocks += [
        Table(pd.DataFrame(rows), "Capacity per build", id="headline"),
        Notes(context_lines(run, trials=trials_text, bottleneck=bound_text)),
    ]
    if ratio_rows:
        png = charts.ratio_cis(pd.DataFrame(ratio_rows), base, out / "compare_ratios.png", footer)
        blocks += [Image(png, f"Ratios to {base}: geometric means with 95% t-intervals"), Notes([footer])]
    curves = {}
    for name in summary.get("builds", {}):
        for verb in ("claim", "complete"):
            hgrm = run.path / f"{name}-{verb}.hgrm"
            if hgrm.is_file():
                curves[f"{name} {verb}"] = charts.read_hgrm(hgrm)
    if curves:
        png = charts.latency_quantiles(curves, out / "compare_latency.png", footer)
        blocks += [Image(png, "Latency by percentile, all trials merged (closed loop at saturation: "
                              "this is queueing inside pipelines, not an idle server's latency)"), Notes([footer])]
    # A trial's own warnings (an open loop short of its rate, replies timed out)
    # qualify the verdicts above, so the report repeats every one.
    for name, e in summary.get("builds", {}).items():
        blocks += [Para(f"Warning ({name}): {text}") for text in e.get("warnings") or []]
    return blocks


def consumers_section(run: Run, out: Path) -> list[Block]:
    t = run.table("consumers")
    wide = t[t["metric"].isin(["cycles_per_s", "server_utilization", "client_utilization"])]
    piv = wide.pivot_table(index=["build", "consumers"], columns="metric", values="value",
                           aggfunc="median").reset_index()
    bounds = t.groupby(["build", "consumers"])["bound"].first().reset_index()
    piv = piv.merge(bounds, on=["build", "consumers"])
    bound_text = "; ".join(f"{b}: {', '.join(f'{c}->{x}' for c, x in zip(g['consumers'], g['bound']))}"
                           for b, g in piv.groupby("build", sort=False))
    footer = _footer(run, trials="one trial per point", bottleneck=bound_text)
    png = charts.throughput_vs_consumers(piv, out / "consumers.png", footer)
    table = piv.rename(columns={"cycles_per_s": "cycles/s", "server_utilization": "server busy",
                                "client_utilization": "client CPU"})
    return [Heading("Throughput against consumers", anchor="consumers"),
            Para("Each consumer is one connection with one claim or complete in flight: the closed loop a worker "
                 "pool makes. Throughput climbs until the server's main thread or the client runs out."),
            Image(png, "Throughput against consumers, one line per build"),
            Table(table, "Throughput against consumers"), Notes([footer])]


def _lease_agreement(server: dict[str, Any]) -> str:
    """A server's agreement count and where the model's inputs came from; a record
    from before the split fed the model the very run it was compared with."""
    split = server.get("model_split")
    label = split["label"] if isinstance(split, dict) and "label" in split else "in sample (older record)"
    return (f"{server.get('server', '?')} {server['agreement_count']}/{server.get('lease_count', '?')} leases, "
            f"{label}")


def lease_section(run: Run, out: Path) -> list[Block]:
    s = run.summary
    blocks: list[Block] = [Heading("Lease sizing", anchor="lease"),
                           Para(s.get("recommendation", "No recommendation recorded."))]
    t = run.table("lease")
    wanted = ["executions", "false_expiry_rate", "duplicates", "refused_completes", "recovery_median", "recovery_p99",
              "throughput"]
    keep = t[t["metric"].isin(wanted)].copy()
    if len(keep):
        keep["column"] = keep["metric"] + " (" + keep["source"] + ")"
        piv = keep.pivot_table(index=["server", "lease_ms"], columns="column", values="value", aggfunc="first")
        order = [f"{m} ({src})" for m in wanted for src in ("measured", "model") if f"{m} ({src})" in piv.columns]
        blocks.append(Table(piv[order].reset_index(), "Measured beside the model, per lease (rates as fractions, "
                                                      "recovery in ms, throughput in executions/s)"))
    servers = s.get("servers", [])
    agreement = [_lease_agreement(x) for x in servers if isinstance(x, dict) and "agreement_count" in x]
    if agreement:
        blocks.append(Para("Model inside the measured 95% intervals (false expiry and median recovery): "
                           + "; ".join(agreement) + "."))
    png = run.path / "lease.png"
    bottleneck = "; ".join(f"{x.get('server')}: {x.get('bottleneck', '?')}" for x in servers if isinstance(x, dict))
    notes = context_lines(run, trials=f"work {s.get('work', '?')}, time scale {s.get('time_scale', 1)}; "
                                     "rates with 95% Wilson intervals", bottleneck=bottleneck or "see the lease report")
    if png.is_file():
        blocks.append(Image(png, "The lease trade-off: false expiry and recovery against the lease, "
                                 "recommendation marked"))
    blocks.append(Notes(notes))
    return blocks


def faults_section(run: Run, out: Path) -> list[Block]:
    t = run.table("faults")
    piv = t.pivot_table(index=[c for c in ("server", "scenario") if c in t.columns], columns="metric",
                        values="value", aggfunc="first").reset_index()
    return [Heading("Faults", anchor="faults"), Table(piv, "Fault scenarios and their audits"),
            *_soak_blocks(run), Notes(context_lines(run))]


def _soak_blocks(run: Run) -> list[Block]:
    """A soak's schedule, recovery per fault kind and timeline, when the record holds a soak."""
    soaks = run.summary.get("soak") or []
    if not soaks:
        return []
    first = soaks[0]
    blocks: list[Block] = [Para(
        f"Soak: {first.get('duration_s', 0):g} s per build under the steady load, seed {first.get('seed')} "
        f"(replay with --seed), a random schedule of process and network faults with recovery gaps, audited "
        f"at the end. Recovery runs from {first.get('recovery_means', 'as docs/guide/faults.md defines it')}; a "
        "fault the load did not recover from before the next one counts as not recovered.")]
    if "soak_kinds" in run.tables:
        blocks.append(Table(run.table("soak_kinds"), "Soak: faults injected and recovery (s) per kind"))
    for soak in soaks:
        png = run.path / str(soak.get("chart"))
        if soak.get("chart") and png.is_file():
            blocks.append(Image(png, f"Soak on {soak.get('server')}: completes per second, faults shaded by "
                                     "family and labelled by kind"))
    return blocks


def peers_section(run: Run, out: Path) -> list[Block]:
    t = run.table("peers")
    keep = t[t["metric"].isin(["server_us_per_job", "commands_per_job", "drain_jobs_per_s", "enqueue_jobs_per_s"])]
    idx = [c for c in ("server", "build", "queue", "mode") if c in keep.columns]
    piv = keep.pivot_table(index=idx, columns="metric", values="value", aggfunc="median").reset_index()
    return [Heading("Beside BullMQ and the Python queues", anchor="peers"), Table(piv, "Peers: the same no-op jobs"),
            Notes(context_lines(run, bottleneck="client (Python consumers); compare server µs per job"))]


def gate_section(run: Run, out: Path) -> list[Block]:
    return [Heading("Microbenchmarks", anchor="gate"), Table(run.table("microbench").head(60), "Per verb"),
            Notes(context_lines(run))]


RENDERERS: dict[str, Renderer] = {
    "check": check_section, "compare": compare_section, "consumers": consumers_section,
    "reapcost": reapcost_section, "lease": lease_section, "faults": faults_section,
    "peers": peers_section, "gate": gate_section, "capacity": capacity_section, "failover": failover_section,
    "verbs": verbs_section,
}


def _us_pair(summary: dict[str, Any], name: str, base: str | None) -> str:
    us = {b: (summary["builds"][b].get("server_us_per_cycle") or {}).get("median", float("nan")) for b in (name, base)}
    return f"{us[name]:.1f} against {us[base]:.1f} server µs per cycle"


def _rate_text(summary: dict[str, Any], entry: dict[str, Any]) -> str:
    rate = (entry.get("cycles_per_s") or {}).get("median", float("nan"))
    if summary.get("interleave") == "together":
        others = len(summary.get("builds") or ()) - 1
        return (f"{rate:,.0f} cycles/s as its share of one core shared with the other "
                f"{'build' if others == 1 else f'{others} builds'}")
    return f"median {rate:,.0f} cycles/s"


def headline_findings(runs: dict[str, Run]) -> list[str]:
    """Three sentences a team lead reads first."""
    out = []
    if "compare" in runs:
        s = runs["compare"].summary
        base = s.get("baseline")
        for name, e in s.get("builds", {}).items():
            if name == base:
                continue
            out.append(f"{name} ({e.get('version')}) against {base}: {e.get('verdict')} — server µs/cycle ratio "
                       f"{_ratio_text(e)}; throughput ratio {_ratio_text(e, 'throughput')}; "
                       f"{_us_pair(s, name, base)}; {_rate_text(s, e)}, "
                       f"bound {', '.join(k for k, v in e.get('bound', {}).items() if v)}.")
    if "reapcost" in runs:
        reap = reapcost_finding(runs["reapcost"])
        if reap:
            out.append(reap)
    if "lease" in runs:
        rec = runs["lease"].summary.get("recommendation")
        if rec:
            out.append("Lease: " + rec.split(". One step")[0].rstrip(".") + ".")
    for kind, finding in (("capacity", capacity_finding), ("failover", failover_finding)):
        text = finding(runs[kind]) if kind in runs else None
        if text:
            out.append(text)
    return out[:3] if len(out) > 3 else out
