"""The report's section for a `capacity` run, which is also what the command
prints: each build's headline figures, what bound it, its ceiling and claim
latency, how it ran (pinning, cycles in the window, scripts, an open loop's
account), its warnings and its audit; for a cluster, the queues' placement,
a row per master and the totals, what limited the run, the cores and ceiling
notes and the per-queue accounting. A `--slo` record holds a rate at a
latency target instead: each build's median rate with its interval, how it
was searched, and every probe (`compare` shows the same for its builds).
Everything is read from the record (summary.json, meta.json, timeline.csv,
slo.csv); nothing is measured here."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from echomq_bench.capacity.open_loop import open_loop_line
from echomq_bench.records.files import Run
from echomq_bench.records.meta import build_text
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table

__all__ = ["section", "slo_interval", "slo_probe_table", "slo_method", "slo_build_lines"]

Entry = Mapping[str, Any]

COLUMNS = ("server µs/cycle: the server main thread's CPU per claim+complete cycle. server busy: that thread's "
           "CPU over the window; server wait: the share it was runnable but off its CPU (busy + wait near "
           "100% means the server always had work). client busy: the driver's CPU over the cores it may use.")
CEILING = ("ceiling/s: the claims/s the C client (redis-benchmark or valkey-benchmark) got through the claim "
           "script beside the run; of ceiling: cycles/s over it (a cycle is two scripts, so 1.0 is out of reach). "
           "Claim latency in ms.")
TOTAL_ROW = "total row: server busy and server wait are the busiest node's; server µs/cycle is over all nodes."


def _num(value: Any, fmt: str) -> str:
    return "" if value is None or value != value else format(value, fmt)


def _pct(value: Any) -> str:
    return _num(value, ".1%")


def _masters(n: int) -> str:
    return f"{n} master" + ("" if n == 1 else "s")


def _builds(run: Run) -> dict[str, Entry]:
    builds = run.summary.get("builds") or {}
    return {name: e for name, e in builds.items() if isinstance(e, dict)}


def _claim(entry: Entry) -> Entry:
    return (entry.get("latency_ms") or {}).get("claim") or {}


def _described(run: Run) -> dict[str, Entry]:
    """meta.json's entry per server (version, allocator, binary), by build name."""
    return {str(s.get("name")): s for s in run.meta.get("servers") or () if isinstance(s, dict)}


# --------------------------------------------------------------------------
# One server per build


def _figures_row(name: str, e: Entry) -> dict[str, str]:
    return {"build": name, "version": str(e.get("version", "?")),
            "cycles/s": _num(e.get("cycles_per_s"), ",.0f"),
            "server µs/cycle": _num(e.get("server_us_per_cycle"), ".2f"),
            "server busy": _pct(e.get("server_utilization")), "server wait": _pct(e.get("server_wait")),
            "client busy": _pct(e.get("client_utilization")), "bound": str(e.get("bound", "?"))}


def _ceiling_row(name: str, e: Entry, described: Entry) -> dict[str, str]:
    claim = _claim(e)
    return {"build": name, "allocator": str(described.get("allocator", "?")),
            "ceiling/s": _num(e.get("ceiling_claims_per_s"), ",.0f"), "of ceiling": _num(e.get("of_ceiling"), ".2f"),
            "claim p50": _num(claim.get("p50"), ".2f"), "claim p99": _num(claim.get("p99"), ".2f"),
            "claim p99.9": _num(claim.get("p99.9"), ".2f"), "claim max": _num(claim.get("max"), ".2f")}


def _ran(name: str, e: Entry) -> str:
    """`NAME: PINNING; N cycles in W s; scripts FOLDER`: how the build's window ran."""
    parts = [str(e.get("pinning") or "pinning not recorded")]
    if e.get("cycles") is not None and e.get("window_s") is not None:
        parts.append(f"{int(e['cycles']):,} cycles in {float(e['window_s']):g} s")
    if e.get("scripts"):
        parts.append(f"scripts {e['scripts']}")
    return f"{name}: " + "; ".join(parts)


def _single_blocks(run: Run, builds: dict[str, Entry]) -> list[Block]:
    described = _described(run)
    figures = [_figures_row(name, e) for name, e in builds.items()]
    ceilings = [_ceiling_row(name, e, described.get(name, {})) for name, e in builds.items()]
    notes = [COLUMNS, CEILING]
    notes += [f"{name}: {build_text(described[name])}" for name in builds if name in described]
    notes += [_ran(name, e) for name, e in builds.items()]
    without = [name for name, e in builds.items() if e.get("ceiling_claims_per_s") is None]
    if without:
        notes.append(f"No ceiling for {', '.join(without)}: --no-ceiling, or no redis-benchmark or "
                     "valkey-benchmark on PATH.")
    return [Table(pd.DataFrame(figures), "Capacity per build", id="capacity-table"),
            Table(pd.DataFrame(ceilings), "Allocator, ceiling and claim latency per build", id="capacity-ceiling"),
            Notes(notes)]


# --------------------------------------------------------------------------
# A cluster: a row per master and the totals


def _node_row(node: str, queues: Any, e: Entry) -> tuple[dict[str, str], dict[str, str]]:
    claim = _claim(e)
    figures = {"node": node, "queues": str(queues), "cycles/s": _num(e.get("cycles_per_s"), ",.0f"),
               "server µs/cycle": _num(e.get("server_us_per_cycle"), ".2f"),
               "server busy": _pct(e.get("server_utilization")), "server wait": _pct(e.get("server_wait")),
               "client busy": _pct(e.get("client_utilization"))}
    latency = {"node": node, "claim p50": _num(claim.get("p50"), ".2f"), "claim p99": _num(claim.get("p99"), ".2f"),
               "claim max": _num(claim.get("max"), ".2f")}
    return figures, latency


def _placement(name: str, e: Entry) -> list[Block]:
    placements = [p for p in e.get("placements") or () if isinstance(p, dict)]
    nodes = e.get("nodes") or ()
    per_node = Counter(str(p.get("node")) for p in placements)
    return [Para(f"{name} ({e.get('version', '?')}): {len(placements)} queues over {_masters(len(nodes))}."),
            Table(pd.DataFrame([{"queue": p.get("queue"), "slot": str(p.get("slot")), "node": p.get("node")}
                                for p in placements]), f"Placement of {name}'s queues"),
            Notes(["queues per master: " + ", ".join(f"{node} {n}" for node, n in sorted(per_node.items()))])]


def _bound_line(e: Entry) -> str:
    busy, wait = e.get("server_utilization") or 0.0, e.get("server_wait") or 0.0
    if e.get("bound") == "server":
        return (f"Bound: server, the main thread of {e.get('bound_node')} ({busy:.0%} busy + {wait:.0%} waiting "
                "for a core).")
    return (f"Bound: {e.get('bound', '?')} (driver {e.get('client_utilization') or 0.0:.0%} busy over "
            f"{e.get('client_cores', '?')} cores; busiest node {e.get('busiest_node', '?')} at {busy:.0%}).")


def _cores_lines(run: Run, e: Entry) -> list[str]:
    busy = e.get("machine_busy")
    lines = [f"Cores: {e.get('cores_note', 'not recorded')}"
             + (f"; machine {busy:.0%} busy with them." if busy is not None else ".")]
    if e.get("cores_full"):
        cores = (run.meta.get("machine") or {}).get("cpu_count", "?")
        lines.append(f"The {cores} cores were full: the nodes' main threads were runnable but shared them (server "
                     "busy + server wait), so the machine, not any one node, set the total.")
    return lines


def _accounting_line(e: Entry) -> str:
    rows = [r for r in e.get("accounting") or () if isinstance(r, dict)]
    done = sum(int(r.get("driver_completed") or 0) for r in rows)
    bad = [str(r.get("queue")) for r in rows if not r.get("ok")]
    verdict = "PASS" if e.get("accounting_passed") else "FAIL" + (f" on {', '.join(bad)}" if bad else "")
    return (f"Accounting: {verdict} (per queue, driver completes == server completes; {len(rows)} queues, "
            f"{done:,} completes in all).")


def _cluster_blocks(run: Run, name: str, e: Entry) -> list[Block]:
    rows = [_node_row(str(n.get("node")), len(n.get("queues") or ()), n) for n in e.get("nodes") or ()]
    rows.append(_node_row("total", e.get("queues", ""), e))
    return [*_placement(name, e),
            Table(pd.DataFrame([f for f, _ in rows]), f"Capacity per master of {name}", id=f"capacity-{name}"),
            Table(pd.DataFrame([lat for _, lat in rows]), f"Claim latency per master of {name} (ms)"),
            Notes([TOTAL_ROW]),
            Para(_bound_line(e)),
            Notes([*_cores_lines(run, e), f"Ceiling: {e.get('ceiling_note', 'not taken on a cluster')}.",
                   _ran(name, e)]),
            Para(_accounting_line(e))]


# --------------------------------------------------------------------------
# What every build says after its figures


def _audit_detail(a: Entry) -> str:
    def n(key: str) -> str:
        return f"{int(a.get(key) or 0):,}"

    return (f"{n('enqueued')} enqueued = {n('completed')} completed + {n('pending')} pending + {n('active')} active "
            f"+ {n('scheduled')} scheduled + {n('dead')} dead; lost {n('lost')}, in two places {n('in_two_places')}, "
            f"accepted twice {n('double_accepted')}, zombie completes accepted {n('zombie_accepted')}")


def _audit_lines(name: str, audit: Entry) -> list[str]:
    """`NAME: audit PASS (...)`; for a cluster the verdict over its masters, and a line per master that failed."""
    verdict = "PASS" if audit.get("passed") else "FAIL"
    nodes = audit.get("nodes")
    if not isinstance(nodes, dict):
        return [f"{name}: audit {verdict} ({_audit_detail(audit)})."]
    return [f"{name}: audit {verdict} over {_masters(len(nodes))}."] + [
        f"{name} {node}: audit FAIL ({_audit_detail(a)})."
        for node, a in nodes.items() if isinstance(a, dict) and not a.get("passed")]


def _after(name: str, e: Entry) -> list[Block]:
    """The open loop's account, every warning, and the audit's verdict."""
    out: list[Block] = []
    if isinstance(e.get("open_loop"), dict):
        out.append(Para(f"{name}: {open_loop_line(e['open_loop'])}."))
    out += [Para(f"Warning ({name}): {text}") for text in e.get("warnings") or ()]
    if isinstance(e.get("audit"), dict):
        out += [Para(line) for line in _audit_lines(name, e["audit"])]
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


# --------------------------------------------------------------------------
# A rate at a latency target (capacity --slo; compare --slo shows the same tables)

_FIGURES = re.compile(r"[0-9][0-9,.]*")


def _rate(value: Any) -> str:
    return _num(value, ",.0f")


def slo_interval(e: Entry) -> str:
    """`39,800..42,900 (96.9%)`, or why there is no interval."""
    ci = e.get("ci95")
    if not ci:
        return str(e.get("text") or "no interval")
    return f"{_rate(ci[0])}..{_rate(ci[1])} ({_num(e.get('coverage'), '.1%')})"


def _probe_result(row: Mapping[str, Any]) -> str:
    passed = row.get("passed")
    if passed is None or passed != passed:
        return "sets the bracket"
    return "held" if passed is True else "missed: " + str(row.get("why") or "?")


def slo_probe_table(run: Run, target: Entry) -> Table | None:
    """Every run of every search: the closed-loop one that set the bracket, then each probe."""
    probes = run.tables.get("slo")
    if probes is None or not len(probes):
        return None
    quantile = str(target.get("name", "quantile"))
    rows = [{"build": r.get("build"), "search": str(r.get("search")), "probe": str(r.get("probe")),
             "phase": r.get("phase"), "asked/s": _rate(r.get("rate_per_s")),
             "achieved/s": _rate(r.get("achieved_per_s")), "p50 ms": _num(r.get("claim_p50_ms"), ".2f"),
             f"{quantile} ms": _num(r.get("claim_quantile_ms"), ".2f"), "bound": r.get("bound"),
             "result": _probe_result(r)} for r in probes.to_dict("records")]
    return Table(pd.DataFrame(rows), f"Every probe, each on a fresh server ({target.get('text', '?')}; latency "
                                     "from each claim's intended start, in closed loop from its send)",
                 id="capacity-slo-probes")


def slo_method(slo: Entry) -> list[str]:
    n, level = slo.get("searches", "?"), float(slo.get("level", 0.95))
    return [f"Search: {slo.get('search_method', '?')}, to within {float(slo.get('resolution', 0.02)):.0%} of the "
            f"rate; {slo.get('window_s', '?')} s window after {slo.get('warmup_s', '?')} s of warm-up per probe.",
            f"Pass: {slo.get('pass_rule', '?')}.",
            f"Interval: {slo.get('interval_method', '?')}, the median's {level:.0%} interval over {n} searches; "
            f"fewer than {slo.get('min_trials', 6)} searches give 'inconclusive', no interval (with 5, no "
            "order-statistic interval reaches 95%).",
            f"Order: {slo.get('order', '?')}."]


def _grouped(warnings: list[str]) -> list[str]:
    """One line per kind of warning (its text with the figures taken out): the first, and how many
    runs said the like; all of them stay in summary.json."""
    kinds: dict[str, list[str]] = {}
    for w in warnings:
        kinds.setdefault(_FIGURES.sub("#", w.partition(": ")[2] or w), []).append(w)
    return [same[0] + (f" (and {len(same) - 1} more runs alike)" if len(same) > 1 else "")
            for same in kinds.values()]


def _missed(e: Entry) -> str:
    """`server-bound 3, neither 1`: which side held each probe that missed the target back."""
    bounds = e.get("bound_when_failing") or {}
    return ", ".join(f"{k}-bound {c}" for k, c in bounds.items() if c) or "none (no probe missed)"


def slo_build_lines(name: str, e: Entry) -> list[str]:
    """The rate each search found, where the target broke, and the first warnings."""
    rates = ", ".join(_rate(r) if r is not None else "none held" for r in e.get("search_rates") or ())
    lines = [f"{name}: rate per search {rates}; the probes that missed were {_missed(e)}."]
    lines += [f"Warning ({name}): {w}" for w in _grouped(list(e.get("warnings") or ()))]
    if e.get("audit_passed") is False:
        lines.append(f"{name}: audit FAIL in a probe: see the `audit_passed` column of slo.csv.")
    return lines


def _slo_section(run: Run, out: Path) -> list[Block]:
    slo = run.summary.get("slo") or {}
    target = slo.get("target") or {}
    builds = {n: e for n, e in (slo.get("builds") or {}).items() if isinstance(e, dict)}
    rows = [{"build": name, "version": str(e.get("version", "?")), "rate/s": _rate(e.get("rate_per_s")),
             "95% interval": slo_interval(e), "searches": str(e.get("n", "?")),
             "closed loop/s": _rate(_median(e.get("capacity_per_s"))),
             "of closed loop": _num(_share(e.get("rate_per_s"), _median(e.get("capacity_per_s"))), ".0%")}
            for name, e in builds.items()]
    bound = "; ".join(f"{n}: the probes that missed were {_missed(e)}" for n, e in builds.items())
    blocks: list[Block] = [
        Heading(f"Rate at {target.get('text', 'the target')}", anchor="capacity-slo"),
        Para(f"The highest open-loop rate at which each build's {target.get('text', 'target')} held, the latency "
             "timed from each claim's intended start (echomq-bench capacity --slo): the median over searches, each "
             "a bisection of the rate with every probe on a fresh server."),
        Table(pd.DataFrame(rows), f"Rate at {target.get('text', '?')} per build", id="capacity-slo-table"),
        Notes(slo_method(slo) + [line for n, e in builds.items() for line in slo_build_lines(n, e)])]
    probes = slo_probe_table(run, target)
    if probes is not None:
        blocks.append(probes)
    return blocks + [Notes(context_lines(run, trials=f"{slo.get('searches', '?')} searches per build",
                                         bottleneck=bound))]


def _median(values: Any) -> float | None:
    numbers = sorted(float(v) for v in values or () if v is not None)
    if not numbers:
        return None
    mid = len(numbers) // 2
    return numbers[mid] if len(numbers) % 2 else (numbers[mid - 1] + numbers[mid]) / 2


def _share(part: Any, whole: Any) -> float | None:
    return float(part) / float(whole) if part is not None and whole else None


def section(run: Run, out: Path) -> list[Block]:
    if isinstance(run.summary.get("slo"), dict) and not run.summary.get("builds"):
        return _slo_section(run, out)
    builds = _builds(run)
    single = {name: e for name, e in builds.items() if not e.get("cluster")}
    bound_text = "; ".join(f"{name}: {e.get('bound', '?')}, server busy {_num(e.get('server_utilization'), '.0%')}"
                           for name, e in builds.items())
    notes = context_lines(run, trials="one window per build", bottleneck=bound_text)
    blocks: list[Block] = [
        Heading("Capacity of each build", anchor="capacity"),
        Para("Claim+complete cycles per second each server sustained at its limit (echomq-bench capacity), "
             "with its main thread's CPU per cycle and the side that ran out first."),
    ]
    if single:
        blocks += _single_blocks(run, single)
    for name, e in single.items():
        blocks += _after(name, e)
    for name, e in builds.items():
        if name not in single:
            blocks += _cluster_blocks(run, name, e) + _after(name, e)
    return blocks + [Notes(notes)] + _timeline(run, out, " ".join(notes))
