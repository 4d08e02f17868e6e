"""The report's section for a `capacity` run, which is also what the command
prints: each build's headline figures, what bound it, its ceiling and claim
latency, how it ran (pinning, cycles in the window, scripts, an open loop's
account), its warnings and its audit; for a cluster, the queues' placement,
a row per master and the totals, what limited the run, the cores and ceiling
notes and the per-queue accounting. A `--slo` record holds a rate at a
latency target instead, rendered by `echomq_bench.report.slo` (`compare`
shows the same for its builds).
Everything is read from the record (summary.json, meta.json, timeline.csv,
slo.csv); nothing is measured here."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from echomq_bench.capacity.open_loop import open_loop_line
from echomq_bench.formatting import fmt_num
from echomq_bench.records.files import Run
from echomq_bench.records.kinds.capacity import CapacityEntry, CapacityRecord, ClusterEntry, NodeEntry
from echomq_bench.records.meta import build_text
from echomq_bench.report import charts
from echomq_bench.report.audit import audit_line, audit_of
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table
from echomq_bench.report.slo import slo_section

__all__ = ["section"]

Entry = Mapping[str, Any]
Figures = CapacityEntry | ClusterEntry | NodeEntry

COLUMNS = ("server µs/cycle: the server main thread's CPU per claim+complete cycle. server busy: that thread's "
           "CPU over the window; server wait: the share it was runnable but off its CPU (busy + wait near "
           "100% means the server always had work). client busy: the driver's CPU over the cores it may use.")
CEILING = ("ceiling/s: the claims/s the C client (redis-benchmark or valkey-benchmark) got through the claim "
           "script beside the run; of ceiling: cycles/s over it (a cycle is two scripts, so 1.0 is out of reach). "
           "Claim latency in ms.")
TOTAL_ROW = "total row: server busy and server wait are the busiest node's; server µs/cycle is over all nodes."


def _pct(value: Any) -> str:
    return fmt_num(value, ".1%")


def _masters(n: int) -> str:
    return f"{n} master" + ("" if n == 1 else "s")


def _described(run: Run) -> dict[str, Entry]:
    """meta.json's entry per server (version, allocator, binary), by build name."""
    return {str(s.get("name")): s for s in run.meta.get("servers") or () if isinstance(s, dict)}


# --------------------------------------------------------------------------
# One server per build


def _claim(e: Figures) -> Mapping[str, float]:
    return e.latency_ms.get("claim") or {}


def _figures_row(name: str, e: CapacityEntry) -> dict[str, str]:
    return {"build": name, "version": str(e.version or "?"),
            "cycles/s": fmt_num(e.cycles_per_s, ",.0f"),
            "server µs/cycle": fmt_num(e.server_us_per_cycle, ".2f"),
            "server busy": _pct(e.server_utilization), "server wait": _pct(e.server_wait),
            "client busy": _pct(e.client_utilization), "bound": str(e.bound or "?")}


def _ceiling_row(name: str, e: CapacityEntry, described: Entry) -> dict[str, str]:
    claim = _claim(e)
    return {"build": name, "allocator": str(described.get("allocator", "?")),
            "ceiling/s": fmt_num(e.ceiling_claims_per_s, ",.0f"), "of ceiling": fmt_num(e.of_ceiling, ".2f"),
            "claim p50": fmt_num(claim.get("p50"), ".2f"), "claim p99": fmt_num(claim.get("p99"), ".2f"),
            "claim p99.9": fmt_num(claim.get("p99.9"), ".2f"), "claim max": fmt_num(claim.get("max"), ".2f")}


def _ran(name: str, e: CapacityEntry | ClusterEntry) -> str:
    """`NAME: PINNING; N cycles in W s; scripts FOLDER`: how the build's window ran."""
    parts = [str(e.pinning or "pinning not recorded")]
    if e.cycles is not None and e.window_s is not None:
        parts.append(f"{int(e.cycles):,} cycles in {float(e.window_s):g} s")
    if e.scripts:
        parts.append(f"scripts {e.scripts}")
    return f"{name}: " + "; ".join(parts)


def _single_blocks(run: Run, builds: dict[str, CapacityEntry]) -> list[Block]:
    described = _described(run)
    figures = [_figures_row(name, e) for name, e in builds.items()]
    ceilings = [_ceiling_row(name, e, described.get(name, {})) for name, e in builds.items()]
    notes = [COLUMNS, CEILING]
    notes += [f"{name}: {build_text(described[name])}" for name in builds if name in described]
    notes += [_ran(name, e) for name, e in builds.items()]
    without = [name for name, e in builds.items() if e.ceiling_claims_per_s is None]
    if without:
        notes.append(f"No ceiling for {', '.join(without)}: --no-ceiling, or no redis-benchmark or "
                     "valkey-benchmark on PATH.")
    return [Table(pd.DataFrame(figures), "Capacity per build", id="capacity-table"),
            Table(pd.DataFrame(ceilings), "Allocator, ceiling and claim latency per build", id="capacity-ceiling"),
            Notes(notes)]


# --------------------------------------------------------------------------
# A cluster: a row per master and the totals


def _node_row(node: str, queues: Any, e: ClusterEntry | NodeEntry) -> tuple[dict[str, str], dict[str, str]]:
    claim = _claim(e)
    figures = {"node": node, "queues": str(queues), "cycles/s": fmt_num(e.cycles_per_s, ",.0f"),
               "server µs/cycle": fmt_num(e.server_us_per_cycle, ".2f"),
               "server busy": _pct(e.server_utilization), "server wait": _pct(e.server_wait),
               "client busy": _pct(e.client_utilization)}
    latency = {"node": node, "claim p50": fmt_num(claim.get("p50"), ".2f"),
               "claim p99": fmt_num(claim.get("p99"), ".2f"), "claim max": fmt_num(claim.get("max"), ".2f")}
    return figures, latency


def _placement(name: str, e: ClusterEntry) -> list[Block]:
    placements = [p for p in e.placements if isinstance(p, Mapping)]
    per_node = Counter(str(p.get("node")) for p in placements)
    return [Para(f"{name} ({e.version or '?'}): {len(placements)} queues over {_masters(len(e.nodes))}."),
            Table(pd.DataFrame([{"queue": p.get("queue"), "slot": str(p.get("slot")), "node": p.get("node")}
                                for p in placements]), f"Placement of {name}'s queues"),
            Notes(["queues per master: " + ", ".join(f"{node} {n}" for node, n in sorted(per_node.items()))])]


def _bound_line(e: ClusterEntry) -> str:
    busy, wait = e.server_utilization or 0.0, e.server_wait or 0.0
    if e.bound == "server":
        return (f"Bound: server, the main thread of {e.bound_node} ({busy:.0%} busy + {wait:.0%} waiting "
                "for a core).")
    return (f"Bound: {e.bound or '?'} (driver {e.client_utilization or 0.0:.0%} busy over "
            f"{e.client_cores or '?'} cores; busiest node {e.busiest_node or '?'} at {busy:.0%}).")


def _cores_lines(run: Run, e: ClusterEntry) -> list[str]:
    busy = e.machine_busy
    lines = [f"Cores: {e.cores_note or 'not recorded'}"
             + (f"; machine {busy:.0%} busy with them." if busy is not None else ".")]
    if e.cores_full:
        cores = (run.meta.get("machine") or {}).get("cpu_count", "?")
        lines.append(f"The {cores} cores were full: the nodes' main threads were runnable but shared them (server "
                     "busy + server wait), so the machine, not any one node, set the total.")
    return lines


def _accounting_line(e: ClusterEntry) -> str:
    rows = [r for r in e.accounting if isinstance(r, Mapping)]
    done = sum(int(r.get("driver_completed") or 0) for r in rows)
    bad = [str(r.get("queue")) for r in rows if not r.get("ok")]
    verdict = "PASS" if e.accounting_passed else "FAIL" + (f" on {', '.join(bad)}" if bad else "")
    return (f"Accounting: {verdict} (per queue, driver completes == server completes; {len(rows)} queues, "
            f"{done:,} completes in all).")


def _cluster_blocks(run: Run, name: str, e: ClusterEntry) -> list[Block]:
    rows = [_node_row(n.node, len(n.queues), n) for n in e.nodes]
    rows.append(_node_row("total", e.queues if e.queues is not None else "", e))
    return [*_placement(name, e),
            Table(pd.DataFrame([f for f, _ in rows]), f"Capacity per master of {name}", id=f"capacity-{name}"),
            Table(pd.DataFrame([lat for _, lat in rows]), f"Claim latency per master of {name} (ms)"),
            Notes([TOTAL_ROW]),
            Para(_bound_line(e)),
            Notes([*_cores_lines(run, e), f"Ceiling: {e.ceiling_note or 'not taken on a cluster'}.",
                   _ran(name, e)]),
            Para(_accounting_line(e))]


# --------------------------------------------------------------------------
# What every build says after its figures


def _audit_lines(name: str, audit: Entry) -> list[str]:
    """`NAME: audit PASS (...)`; for a cluster (its audit holds one per master) the verdict over its masters,
    and a line per master that failed."""
    whole = audit_of(audit)
    verdict = "PASS" if whole.passed else "FAIL"
    nodes = audit.get("nodes")
    if not isinstance(nodes, dict):
        return [f"{name}: audit {verdict} ({audit_line(whole)})."]
    masters = {node: audit_of(a) for node, a in nodes.items() if isinstance(a, dict)}
    return [f"{name}: audit {verdict} over {_masters(len(nodes))}."] + [
        f"{name} {node}: audit FAIL ({audit_line(a)})." for node, a in masters.items() if not a.passed]


def _after(name: str, e: CapacityEntry | ClusterEntry) -> list[Block]:
    """The open loop's account, every warning, and the audit's verdict."""
    out: list[Block] = []
    if isinstance(e, CapacityEntry) and e.open_loop is not None:
        out.append(Para(f"{name}: {open_loop_line(e.open_loop)}."))
    out += [Para(f"Warning ({name}): {text}") for text in e.warnings]
    if e.audit is not None:
        out += [Para(line) for line in _audit_lines(name, e.audit)]
    return out


def _timeline(run: Run, out: Path, footer: str) -> list[Block]:
    """Cycles/s over the window, a line per build (a cluster's is its total, node `all`); the
    chart carries the context notes as its footer."""
    timeline = run.tables.get("timeline")
    if timeline is None or not len(timeline) or not {"t_s", "value", "build"} <= set(timeline.columns):
        return []
    if "node" in timeline.columns:
        timeline = timeline[timeline["node"].isna() | (timeline["node"] == "all")]
    png = charts.rate_timeline(timeline, out / "capacity_timeline.png", footer)
    return [Image(png, "Cycles/s over the window, one line per build")]


def section(run: Run, out: Path) -> list[Block]:
    record = CapacityRecord.from_record(run.summary)
    if record.slo is not None and not record.builds:
        return slo_section(run, record.slo)
    builds = record.builds
    single = {name: e for name, e in builds.items() if isinstance(e, CapacityEntry)}
    bound_text = "; ".join(f"{name}: {e.bound or '?'}, server busy {fmt_num(e.server_utilization, '.0%')}"
                           for name, e in builds.items())
    notes = context_lines(run, trials="one window per build", bottleneck=bound_text)
    blocks: list[Block] = [
        Heading("Capacity of each build", anchor="capacity"),
        Para("Claim+complete cycles per second each server sustained at its limit (echomq-bench capacity), "
             "with its main thread's CPU per cycle and the side that ran out first."),
    ]
    if single:
        blocks += _single_blocks(run, single)
    for name, s in single.items():
        blocks += _after(name, s)
    for name, e in builds.items():
        if isinstance(e, ClusterEntry):
            blocks += _cluster_blocks(run, name, e) + _after(name, e)
    return blocks + [Notes(notes)] + _timeline(run, out, " ".join(notes))
