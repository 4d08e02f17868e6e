"""A `faults` record: each fault under load, the audit of every job and the
history check per fault kind; a soak's schedule, recovery and history check
per fault kind, and timeline.

Everything here is read from the record: summary.json holds each scenario's
outcome (its figures, its audit, its checks, or why it was skipped) and each
soak's totals; soak_kinds.csv the recovery per fault kind. The tables are
split so that each fits 100 columns of a terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table
from echomq_bench.report.historytables import LEGEND as HISTORY_LEGEND, cells, verdict
from echomq_bench.report.historytables import kinds as history_kinds

__all__ = ["section"]

LEGEND = ("refused ok: completes and retries refused from a holder whose lease had passed (EMQSTALE, as they must "
          "be); refused bad: those refused from the job's current holder (must be 0); zombie: zombie completes "
          "sent/accepted (accepted must be 0); lost replies: calls whose reply was lost, resolved/total (landed or "
          "not, read from the server's state); unanswered: calls that got no reply at all.")


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [x for x in value or () if isinstance(x, Mapping)]


def _s(value: Any) -> str:
    return "" if value is None else f"{float(value):.2f}"


def _verdict(o: Mapping[str, Any]) -> str:
    if o.get("skipped"):
        return "skipped"
    if o.get("passed"):
        return "PASS (loss detected)" if o.get("lost") else "PASS"
    return "FAIL"


def _audit_table(outcomes: list[Mapping[str, Any]]) -> pd.DataFrame:
    rows = []
    for o in outcomes:
        audit = o.get("audit") or {}
        ran = not o.get("skipped")
        rows.append({"scenario": o.get("scenario", "?"), "enqueued": o.get("jobs", "") if ran else "",
                     "completed": o.get("completed", "") if ran else "", "lost": o.get("lost", "") if ran else "",
                     "accepted twice": o.get("double_accepted", "") if ran else "",
                     "in two places": audit.get("in_two_places", ""), "verdict": _verdict(o)})
    return pd.DataFrame(rows)


def _fault_table(outcomes: list[Mapping[str, Any]]) -> pd.DataFrame:
    rows = []
    for o in outcomes:
        audit = o.get("audit") or {}
        rows.append({"scenario": o.get("scenario", "?"), "faults": o.get("faults", ""),
                     "recovery s": _s(o.get("recovery_s")), "refused ok": o.get("refused_expected", ""),
                     "refused bad": o.get("refused_unexpected", ""),
                     "zombie": f"{audit.get('zombie_sent', '?')}/{audit.get('zombie_accepted', '?')}" if audit else "",
                     "lost replies": f"{o.get('ambiguous_resolved', '?')}/{o.get('ambiguous', '?')}",
                     "unanswered": o.get("unanswered", "")})
    return pd.DataFrame(rows)


def _history_table(outcomes: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Per scenario, the jobs its fault struck and the others, each classified."""
    rows = []
    for o in outcomes:
        for kind, counts in history_kinds(o.get("history") or {}):
            rows.append({"scenario": o.get("scenario", "?"), "jobs": "no fault" if kind == "none" else "under fault",
                         **cells(counts)})
    return pd.DataFrame(rows)


def _check_lines(checks: Iterable[Mapping[str, Any]]) -> list[str]:
    return [f"   {'ok  ' if c.get('ok') else 'FAIL'} {c.get('text', '')}" for c in checks]


def _skipped(server: str, outcomes: list[Mapping[str, Any]]) -> list[Block]:
    reasons: dict[str, list[str]] = {}
    for o in outcomes:
        if o.get("skipped"):
            reasons.setdefault(str(o["skipped"]), []).append(str(o.get("scenario", "?")))
    return [Para(f"Skipped on {server}: {', '.join(names)}: {why}.") for why, names in reasons.items()]


def _server_blocks(server: str, outcomes: list[Mapping[str, Any]]) -> list[Block]:
    """One server's scenarios: the audit, the fault and its recovery, what was skipped, and every check."""
    build = next((str(o["build"]) for o in outcomes if o.get("build")), "?")
    ran = [o for o in outcomes if not o.get("skipped")]
    blocks: list[Block] = [Heading(f"{server}: {build}", level=3),
                           Table(_audit_table(outcomes), f"{server}: the audit of every job, per scenario")]
    if ran:
        blocks += [Table(_fault_table(ran), f"{server}: the fault, the recovery, and calls refused or unanswered"),
                   Notes([LEGEND])]
        history = _history_table(ran)
        if len(history):
            blocks += [Table(history, f"{server}: the history check, jobs under each scenario's fault and not"),
                       Notes([HISTORY_LEGEND])]
    blocks += _skipped(server, outcomes)
    lines = []
    for o in ran:
        lines.append(f"{o.get('scenario', '?')}: {o.get('fault', '?')}; recovery = {o.get('recovery_means') or '?'}")
        lines += _check_lines(_dicts(o.get("checks")))
    if lines:
        blocks.append(Notes(lines))
    return blocks


def _scenario_blocks(run: Run) -> list[Block]:
    outcomes = _dicts(run.summary.get("scenarios"))
    if not outcomes:
        return []
    servers = list(dict.fromkeys(str(o.get("server", "?")) for o in outcomes))
    blocks: list[Block] = [Para(
        "Each scenario starts its own server, runs a steady load of producers, consumers and a pump, injects its "
        "fault, drains the queue and audits every job minted against the server's sets (echomq-bench faults); "
        "apart from the audit, the history check classifies every job from the calls' own history. A scenario "
        "passes when its own checks, the audit and the history check hold; for restart-nopersist, detecting the "
        "loss exactly is the pass.")]
    for server in servers:
        blocks += _server_blocks(server, [o for o in outcomes if str(o.get("server", "?")) == server])
    return blocks


def _injected(soak: Mapping[str, Any]) -> str:
    injected = soak.get("injected") or {}
    planned = soak.get("planned") or {}
    kinds = ", ".join(f"{k} {n}" for k, n in injected.items()) or "none"
    return f"{kinds} ({sum(injected.values())} of {sum(planned.values())} planned)"


def _soak_totals(soaks: list[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per figure, one column per build: any number of builds stays narrow."""
    figures: list[tuple[str, Callable[[Mapping[str, Any]], Any]]] = [
        ("build", lambda s: s.get("build", "?")),
        ("seed", lambda s: f"{s.get('seed')} (replay with --seed {s.get('seed')})"),
        ("duration s", lambda s: f"{float(s.get('duration_s', 0)):g}"),
        ("faults injected", _injected),
        ("jobs enqueued", lambda s: s.get("jobs", "")), ("jobs completed", lambda s: s.get("completed", "")),
        ("lost", lambda s: s.get("lost", "")), ("accepted twice", lambda s: s.get("double_accepted", "")),
        ("calls whose reply was lost", lambda s: s.get("ambiguous", "")),
        ("lost replies resolved", lambda s: s.get("ambiguous_resolved", "")),
        ("lost replies unresolved", lambda s: s.get("ambiguous_unresolved", "")),
        ("history check", lambda s: verdict(s.get("history") or {}) or "not recorded"),
        ("verdict", lambda s: "PASS" if s.get("passed") else "FAIL"),
    ]
    return pd.DataFrame([{"figure": name, **{str(s.get("server", "?")): str(get(s)) for s in soaks}}
                         for name, get in figures])


def _soak_kinds(run: Run, soaks: list[Mapping[str, Any]]) -> pd.DataFrame:
    if "soak_kinds" in run.tables:
        rows: list[Mapping[str, Any]] = run.table("soak_kinds").to_dict("records")
    else:  # the same figures as summary.json keeps them
        rows = [{"server": s.get("server"), **k} for s in soaks for k in _dicts(s.get("kinds"))]
    return pd.DataFrame([{"server": r.get("server", "?"), "kind": r.get("kind", "?"), "family": r.get("family", "?"),
                          "injected": r.get("injected", ""), "recovered": r.get("recovered", ""),
                          "p50 s": _s(_num(r.get("recovery_p50_s"))), "p99 s": _s(_num(r.get("recovery_p99_s")))}
                         for r in rows])


def _soak_history(soaks: list[Mapping[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{"server": s.get("server", "?"), "fault": kind, **cells(counts)}
                         for s in soaks for kind, counts in history_kinds(s.get("history") or {})])


def _num(value: Any) -> float | None:
    """A figure, or None for one not measured (absent, or NaN as a CSV reads an empty cell)."""
    return None if value is None or value != value else float(value)


def _soak_blocks(run: Run) -> list[Block]:
    """A soak's totals, recovery per fault kind, checks and timeline, when the record holds a soak."""
    soaks = _dicts(run.summary.get("soak"))
    if not soaks:
        return []
    first = soaks[0]
    blocks: list[Block] = [
        Para(f"Soak: {float(first.get('duration_s', 0)):g} s per build under the steady load, seed "
             f"{first.get('seed')} (replay with --seed {first.get('seed')}), a random schedule of process and "
             "network faults with recovery gaps, audited and its history checked at the end. It passes when "
             "nothing is lost, nothing is accepted twice, every call whose reply was lost is resolved and the "
             "history check finds nothing lost, unexpected, duplicated or unfenced."),
        Table(_soak_totals(soaks), "Soak: faults, jobs and the audit per build", id="soak-table")]
    kinds = _soak_kinds(run, soaks)
    if len(kinds):
        blocks.append(Table(kinds, "Soak: faults injected and recovered per kind; recovery p50 and p99 (s)"))
    means = first.get("recovery_means", "as docs/guide/faults.md defines it")
    blocks.append(Notes([f"Recovery runs from {means}; a fault the load did not recover from before the next one "
                         "counts as not recovered (no p50 or p99 without a recovered fault)."]))
    history = _soak_history(soaks)
    if len(history):
        blocks += [Table(history, "Soak: the history check per fault kind (jobs under no fault: none)"),
                   Notes([HISTORY_LEGEND])]
    for soak in soaks:
        blocks.append(Notes([f"Soak on {soak.get('server', '?')}:", *_check_lines(_dicts(soak.get("checks")))]))
        png = run.path / str(soak.get("chart"))
        if soak.get("chart") and png.is_file():
            blocks.append(Image(png, f"Soak on {soak.get('server')}: completes per second, faults shaded by "
                                     "family and labelled by kind"))
    return blocks


def section(run: Run, out: Path) -> list[Block]:
    return [Heading("Faults", anchor="faults"), *_scenario_blocks(run), *_soak_blocks(run),
            Notes(context_lines(run))]
