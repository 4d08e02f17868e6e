"""A `gate` record: each verb's server time against its baseline, the
script A/B where a script changed, where the baseline came from and whether
it was measured on this machine fingerprint, and the verdict per build.

Everything is read from summary.json: each build's verdicts, figures, and
where its baseline came from. The verdict lines close the section, one per
build, so the terminal's last line is the verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from echomq_bench.formatting import fmt_change
from echomq_bench.records.files import Run
from echomq_bench.records.kinds.gate import GateEntry, GateRecord
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table

__all__ = ["section", "verdict_line"]

REFERENCES = ("noop_script", "ping", "read_100")
SHORT_REFERENCE = {"noop_script": "no-op", "read_100": "read100"}
FINGERPRINT = "machine fingerprint (CPU model and flags, cores, server version, allocator)"


def _allowance(x: Any) -> str:
    return "" if x is None else f"+{float(x) * 100:.0f}%"


def _short(status: str) -> str:
    """The table's verdict word; what the parenthesis said goes in the notes under the table."""
    return "MISSING" if status.startswith("MISSING") else status.split(" (")[0]


def _references(b: GateEntry, with_vs: bool) -> list[dict[str, Any]]:
    rows = []
    for name in REFERENCES:
        f = b.figures.get(name)
        if isinstance(f, Mapping):
            us = f.get("server_us_mean" if name == "ping" else "server_us")
            rows.append({"verb": name, "server µs": f"{float(us or 0):.2f}",
                         "client µs": f"{float(f.get('client_us') or 0):.1f}", **({"vs": ""} if with_vs else {}),
                         "baseline": "", "now": "", "change": "", "allowed": "", "verdict": "reference"})
    return rows


def _verb_table(b: GateEntry, with_vs: bool) -> pd.DataFrame:
    rows = _references(b, with_vs)
    for v in b.verdicts:
        ref = str(v.reference or "")
        allowed = "advisory" if v.advisory and v.allowed is not None else _allowance(v.allowed)
        rows.append({"verb": v.case, "server µs": f"{float(v.server_us or 0):.2f}",
                     "client µs": f"{float(v.client_us or 0):.1f}",
                     **({"vs": SHORT_REFERENCE.get(ref, ref)} if with_vs else {}),
                     "baseline": "-" if v.base_ratio is None else f"{float(v.base_ratio):.3f}",
                     "now": f"{float(v.now_ratio or 0):.3f}", "change": fmt_change(v.change),
                     "allowed": allowed, "verdict": _short(v.status)})
    return pd.DataFrame(rows)


def _ab_table(b: GateEntry) -> pd.DataFrame:
    return pd.DataFrame([{"verb": v.case, "script A/B": fmt_change(v.ab_change), "allowed": _allowance(v.ab_allowed),
                          "verdict": _short(v.status)} for v in b.verdicts if v.ab_change is not None])


def _pooled(passes: int | None, processes: int | None) -> str:
    """What a baseline's drift stands on: its passes, their server processes, its degrees of freedom."""
    if not passes:
        return ""
    if not processes:
        return (f" It pools {passes} passes and does not say on which server processes: its drift may hold one "
                "process's spread only (re-record it with echomq-bench gate --count time --update).")
    return (f" It pools {passes} passes on {processes} server process{'es' if processes > 1 else ''}: the drift "
            f"between them has {processes - 1} degree{'' if processes == 2 else 's'} of freedom.")


def _origin(b: GateEntry) -> str:
    """Where the baseline came from, what it pools, and whether its machine fingerprint is this run's."""
    source = b.baseline_from
    path = source.path or b.baseline or "?"
    version, when = source.version, source.created_utc
    if b.updated:
        return f"Baseline written: {path}." + _pooled(len(b.servers), len({s.run_id for s in b.servers}))
    if source.history_run:
        text = (f"Baseline from the results history: the gate run in {path} (revision {source.revision or '?'}"
                f"; {version}, {when}).")
    else:
        text = f"Baseline {path} ({version or '?'}, {when or '?'})." + _pooled(source.passes, source.processes)
    if version and version != b.version:
        text += f" Note: the baseline was measured on {version}; the normalised check compares the builds."
    if b.same_machine:
        return text + f" The baseline's {FINGERPRINT} is this one's: the normalised check counts."
    found = "; ".join(source.fingerprint_differences) or "how, the record does not say"
    return (text + f" The baseline's {FINGERPRINT} is not this one's ({found}): the normalised change is "
            "advisory; only the script A/B can fail.")


def _notes(b: GateEntry, with_vs: bool) -> list[str]:
    ref = "the reference in 'vs'" if with_vs else next((str(v.reference) for v in b.verdicts), "the reference")
    busy, client = float(b.server_main_thread_busy or 0), float(b.client_busy or 0)
    out = [f"baseline and now: server µs over the server µs of {ref} (typical: mean of the faster half of "
           f"{b.rounds or '?'} rounds x {b.calls or '?'} calls); change: now over baseline; server main "
           f"thread busy {busy:.0%}, client {client:.0%}: {b.bound or '?'}-bound (one call at a time; server "
           "figures are the server's own clock)."]
    said: dict[str, list[str]] = {}
    for v in b.verdicts:
        if v.status != _short(v.status):
            said.setdefault(v.status, []).append(v.case)
    out += [f"{status}: {', '.join(verbs)}" for status, verbs in said.items()]
    out += _confirmation(b)
    if b.inconclusive and not b.regressions:
        out.append("Inconclusive: run again on a quieter machine or with more --rounds.")
    return out


def _confirmation(b: GateEntry) -> list[str]:
    """Where a flagged verb was measured again: the note naming both server processes."""
    judged = next((s for s in b.servers if s.role == "judged"), None)
    again = next((s for s in b.servers if s.role == "confirmation"), None)
    if judged is None or again is None:
        return []
    where = ("on the same server process (one this command reaches but does not start)" if again.run_id ==
             judged.run_id else f"on a fresh server process (pid {again.pid}, port {again.port}; the judged one: "
             f"pid {judged.pid}, port {judged.port})")
    return [f"confirmation: every verb measured again {where}."]


def verdict_line(b: GateEntry) -> str:
    """The build's verdict, as the last line of its part of the section says it."""
    if b.updated:
        return f"UPDATED: the baseline of {b.build} written"
    if b.regressions:
        return f"REGRESSION on {b.build}: {', '.join(b.regressions)}"
    if b.inconclusive:
        return f"INCONCLUSIVE on {b.build}: {', '.join(b.inconclusive)} (noise above tolerance)"
    return f"PASS on {b.build}: {len(b.verdicts)} verbs within tolerance"


def _build_blocks(run: Run, b: GateEntry) -> list[Block]:
    with_vs = len({v.reference for v in b.verdicts}) > 1
    blocks: list[Block] = [
        Heading(f"{b.build}: {b.version or '?'}; scripts {b.lua_shown or b.lua_dir}", level=3),
        Para(_origin(b))]
    if b.changed_scripts:
        blocks.append(Para(f"Scripts that differ from the baseline's: {', '.join(b.changed_scripts)} (measured "
                           "A/B against the baseline's text, interleaved call by call on the same state)."))
    blocks.append(Table(_verb_table(b, with_vs), f"{b.build}: server time per verb against the baseline"))
    ab = _ab_table(b)
    if len(ab):
        blocks.append(Table(ab, f"{b.build}: script A/B, the current script over the baseline's"))
    return blocks + [Notes(_notes(b, with_vs))]


def section(run: Run, out: Path) -> list[Block]:
    builds = GateRecord.from_record(run.summary).builds
    blocks: list[Block] = [
        Heading("Regression gate", anchor="gate"),
        Para("Each verb's server time (commandstats) over a reference script's, measured call by call in the same "
             "batches, against the same ratio in the baseline; a changed script also runs A/B against the "
             "baseline's text (echomq-bench gate). Server time sees what instruction counts miss: memory, the "
             "allocator and I/O; for the scripts' own work, deterministic to within 1%, see "
             "echomq-bench gate --count instructions."),
    ]
    for b in builds:
        blocks += _build_blocks(run, b)
    return blocks + [Notes(context_lines(run)), *(Para(verdict_line(b)) for b in builds)]
