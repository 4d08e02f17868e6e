"""A `faults` record: each fault under load, the audit of every job and the
call-log check per fault kind; a soak's schedule, recovery and call-log check
per fault kind, and timeline.

Everything here is read from the record: summary.json holds each scenario's
outcome (its figures, its audit, its checks, or why it was skipped) and each
soak's totals; soak_kinds.csv the recovery per fault kind. The tables are
split so that each fits 100 columns of a terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.records.kinds.faults import CheckEntry, FaultsRecord, ScenarioEntry, SoakEntry
from echomq_bench.report.audit import COUNTS, audit_table
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table
from echomq_bench.report.calllog_tables import LEGEND as CALL_LOG_LEGEND, cells, verdict
from echomq_bench.report.calllog_tables import kinds as call_log_kinds

__all__ = ["section"]

LEGEND = ("refused ok: completes and retries refused from a holder whose lease had passed (EMQSTALE, as they must "
          "be); refused bad: those refused from the job's current holder (must be 0); zombie: zombie completes "
          "sent/accepted (accepted must be 0); lost replies: calls whose reply was lost, resolved/total (landed or "
          "not, read from the server's state); unanswered: calls that got no reply at all.")


def _s(value: Any) -> str:
    return "" if value is None else f"{float(value):.2f}"


def _known(value: Any) -> Any:
    return "?" if value is None else value


def _audit_table(outcomes: list[ScenarioEntry]) -> pd.DataFrame:
    """Where each scenario's jobs went, and its verdict; a scenario skipped has no audit."""
    audits = [None if o.skipped else o.audit for o in outcomes]
    frame = audit_table([o.scenario for o in outcomes], audits, COUNTS, heading="scenario", unknown="")
    return frame.assign(verdict=[o.verdict for o in outcomes])


def _fault_table(outcomes: list[ScenarioEntry]) -> pd.DataFrame:
    rows = []
    for o in outcomes:
        audit = o.audit if o.audit is not None and o.audit.enqueued is not None else None
        rows.append({"scenario": o.scenario, "faults": o.faults,
                     "recovery s": _s(o.recovery_s), "refused ok": o.refused_expected,
                     "refused bad": o.refused_unexpected,
                     "zombie": "" if audit is None else f"{_known(audit.zombie_sent)}/{_known(audit.zombie_accepted)}",
                     "lost replies": f"{o.ambiguous_resolved}/{o.ambiguous}",
                     "unanswered": o.unanswered})
    return pd.DataFrame(rows)


def _call_log_table(outcomes: list[ScenarioEntry]) -> pd.DataFrame:
    """Per scenario, the jobs its fault struck and the others, each classified."""
    rows = []
    for o in outcomes:
        for kind, counts in call_log_kinds(o.history):
            rows.append({"scenario": o.scenario, "jobs": "no fault" if kind == "none" else "under fault",
                         **cells(counts)})
    return pd.DataFrame(rows)


def _check_lines(checks: Iterable[CheckEntry]) -> list[str]:
    return [f"   {'ok  ' if c.ok else 'FAIL'} {c.text}" for c in checks]


def _skipped(server: str, outcomes: list[ScenarioEntry]) -> list[Block]:
    reasons: dict[str, list[str]] = {}
    for o in outcomes:
        if o.skipped:
            reasons.setdefault(o.skipped, []).append(o.scenario)
    return [Para(f"Skipped on {server}: {', '.join(names)}: {why}.") for why, names in reasons.items()]


def _server_blocks(server: str, outcomes: list[ScenarioEntry]) -> list[Block]:
    """One server's scenarios: the audit, the fault and its recovery, what was skipped, and every check."""
    build = next((o.build for o in outcomes if o.build), "?")
    ran = [o for o in outcomes if not o.skipped]
    blocks: list[Block] = [Heading(f"{server}: {build}", level=3),
                           Table(_audit_table(outcomes), f"{server}: the audit of every job, per scenario")]
    if ran:
        blocks += [Table(_fault_table(ran), f"{server}: the fault, the recovery, and calls refused or unanswered"),
                   Notes([LEGEND])]
        checked = _call_log_table(ran)
        if len(checked):
            blocks += [Table(checked, f"{server}: the call-log check, jobs under each scenario's fault and not"),
                       Notes([CALL_LOG_LEGEND])]
    blocks += _skipped(server, outcomes)
    lines = []
    for o in ran:
        lines.append(f"{o.scenario}: {o.fault}; recovery = {o.recovery_means or '?'}")
        lines += _check_lines(o.checks)
    if lines:
        blocks.append(Notes(lines))
    return blocks


def _scenario_blocks(record: FaultsRecord) -> list[Block]:
    outcomes = list(record.scenarios)
    if not outcomes:
        return []
    servers = list(dict.fromkeys(o.server for o in outcomes))
    blocks: list[Block] = [Para(
        "Each scenario starts its own server, runs a steady load of producers, consumers and a pump, injects its "
        "fault, drains the queue and audits every job minted against the server's sets (echomq-bench faults); "
        "apart from the audit, the call-log check classifies every job from the calls' own log. A scenario "
        "passes when its own checks, the audit and the call-log check hold; for restart-nopersist, detecting the "
        "loss exactly is the pass.")]
    for server in servers:
        blocks += _server_blocks(server, [o for o in outcomes if o.server == server])
    return blocks


def _injected(soak: SoakEntry) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in soak.injected.items()) or "none"
    return f"{kinds} ({sum(soak.injected.values())} of {sum(soak.planned.values())} planned)"


def _soak_totals(soaks: tuple[SoakEntry, ...]) -> pd.DataFrame:
    """One row per figure, one column per build: any number of builds stays narrow."""
    figures: list[tuple[str, Callable[[SoakEntry], Any]]] = [
        ("build", lambda s: s.build or "?"),
        ("seed", lambda s: f"{s.seed} (replay with --seed {s.seed})"),
        ("duration s", lambda s: f"{float(s.duration_s):g}"),
        ("faults injected", _injected),
        ("jobs enqueued", lambda s: s.jobs), ("jobs completed", lambda s: s.completed),
        ("lost", lambda s: s.lost), ("accepted twice", lambda s: s.double_accepted),
        ("calls whose reply was lost", lambda s: s.ambiguous),
        ("lost replies resolved", lambda s: s.ambiguous_resolved),
        ("lost replies unresolved", lambda s: s.ambiguous_unresolved),
        ("call-log check", lambda s: verdict(s.history) or "not recorded"),
        ("verdict", lambda s: "PASS" if s.passed else "FAIL"),
    ]
    return pd.DataFrame([{"figure": name, **{s.server: str(get(s)) for s in soaks}} for name, get in figures])


def _soak_kinds(soaks: tuple[SoakEntry, ...]) -> pd.DataFrame:
    return pd.DataFrame([{"server": s.server, "kind": k.kind, "family": k.family or "?", "injected": k.injected,
                          "recovered": k.recovered, "p50 s": _s(_num(k.recovery_p50_s)),
                          "p99 s": _s(_num(k.recovery_p99_s))} for s in soaks for k in s.kinds])


def _soak_call_log(soaks: tuple[SoakEntry, ...]) -> pd.DataFrame:
    return pd.DataFrame([{"server": s.server, "fault": kind, **cells(counts)}
                         for s in soaks for kind, counts in call_log_kinds(s.history)])


def _num(value: Any) -> float | None:
    """A figure, or None for one not measured (absent, or NaN as a CSV reads an empty cell)."""
    return None if value is None or value != value else float(value)


def _soak_blocks(run: Run, soaks: tuple[SoakEntry, ...]) -> list[Block]:
    """A soak's totals, recovery per fault kind, checks and timeline, when the record holds a soak."""
    if not soaks:
        return []
    first = soaks[0]
    blocks: list[Block] = [
        Para(f"Soak: {float(first.duration_s):g} s per build under the steady load, seed "
             f"{first.seed} (replay with --seed {first.seed}), a random schedule of process and "
             "network faults with recovery gaps, audited and its call log checked at the end. It passes when "
             "nothing is lost, nothing is accepted twice, every call whose reply was lost is resolved and the "
             "call-log check finds nothing lost, unexpected, duplicated or unfenced."),
        Table(_soak_totals(soaks), "Soak: faults, jobs and the audit per build", id="soak-table")]
    kinds = _soak_kinds(soaks)
    if len(kinds):
        blocks.append(Table(kinds, "Soak: faults injected and recovered per kind; recovery p50 and p99 (s)"))
    means = first.recovery_means or "as docs/guide/faults.md defines it"
    blocks.append(Notes([f"Recovery runs from {means}; a fault the load did not recover from before the next one "
                         "counts as not recovered (no p50 or p99 without a recovered fault)."]))
    checked = _soak_call_log(soaks)
    if len(checked):
        blocks += [Table(checked, "Soak: the call-log check per fault kind (jobs under no fault: none)"),
                   Notes([CALL_LOG_LEGEND])]
    for soak in soaks:
        blocks.append(Notes([f"Soak on {soak.server}:", *_check_lines(soak.checks)]))
        png = run.path / str(soak.chart)
        if soak.chart and png.is_file():
            blocks.append(Image(png, f"Soak on {soak.server}: completes per second, faults shaded by "
                                     "family and labelled by kind"))
    return blocks


def section(run: Run, out: Path) -> list[Block]:
    record = FaultsRecord.from_record(run.summary)
    return [Heading("Faults", anchor="faults"), *_scenario_blocks(record), *_soak_blocks(run, record.soak),
            Notes(context_lines(run))]
