"""A rate at a latency target as the report and the commands print it: capacity
--slo's section, and the tables and notes compare --slo shows beside its
verdicts.

Everything is read from the record's `slo` block and slo.csv. The figure is
named for what it is wherever it is printed (`SloBlock.figure_text`: the
rate a probe of the window holds with the share the search asked for), and
the interval by the coverage its order statistics give (96.9% for 6
searches), never by a level it does not have.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

import pandas as pd

from echomq_bench.formatting import fmt_num
from echomq_bench.measurement.stats import median
from echomq_bench.records.files import Run
from echomq_bench.records.kinds.capacity import SloBlock, SloEntry, SloTarget
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table

__all__ = ["slo_section", "slo_interval", "slo_searches", "slo_probe_table", "slo_method", "slo_build_lines",
           "slo_rule", "slo_row", "INTERVAL_COLUMN", "SEARCH_TEXT"]

INTERVAL_COLUMN = "interval (coverage)"
_FIGURES = re.compile(r"[0-9][0-9,.]*")


def _rate(value: Any) -> str:
    return fmt_num(value, ",.0f")


# How every SLO rate was found, as both the capacity and the compare sections say it.
SEARCH_TEXT = ("the latency timed from each claim's intended start: the median over searches, each a bisection of "
               "the rate with every probe on a fresh server")


def slo_row(name: str, e: SloEntry) -> dict[str, str]:
    """The columns every table of SLO rates opens with."""
    return {"build": name, "version": str(e.version or "?"), "rate/s": _rate(e.rate_per_s),
            INTERVAL_COLUMN: slo_interval(e), "searches": slo_searches(e)}


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def slo_interval(e: SloEntry) -> str:
    """`39,800..42,900 (96.9%)`, `39,800..no bound (96.9%)` when a search held every rate it tried,
    or why there is no interval."""
    ci = e.interval
    if not ci:
        return str(e.text or "no interval")
    upper = "no bound" if ci[1] is None or math.isinf(ci[1]) else _rate(ci[1])
    return f"{_rate(ci[0])}..{upper} ({fmt_num(e.coverage, '.1%')})"


def slo_searches(e: SloEntry) -> str:
    """`6`, or `7, 1 never held`."""
    never = f", {e.never_held} never held" if e.never_held else ""
    return f"{_or(e.n, '?')}{never}"


def slo_rule(slo: SloBlock) -> str:
    """How a rate held, and so what the rate found is a figure of."""
    m, held = slo.holds_in_a_row, slo.held_share
    if m == 1:
        return ("Held: a rate holds when its one probe holds the target, so a search closes on the rate a probe "
                "holds half the time: where the target starts to break, not a rate to plan at (--slo-held 95% "
                "searches for one).")
    return (f"Held: a rate holds when {m} probes in a row at it hold the target, so a search closes on the rate "
            f"where {m} in a row hold half the time, which is where one probe holds {held:.1%} of the time "
            f"(0.5^(1/{m})).")


def _coverages(slo: SloBlock) -> str:
    seen = sorted({(int(e.n), float(e.coverage)) for e in slo.builds.values()
                   if e.n is not None and e.coverage is not None})
    return "; ".join(f"{c:.1%} for the {n} searches here" for n, c in seen) or "no interval here"


def slo_method(slo: SloBlock) -> list[str]:
    window, warmup = _or(slo.window_s, "?"), _or(slo.warmup_s, "?")
    return [f"Figure: {slo.figure_text} at {slo.target.text or 'the target'}, the median over searches of the "
            "highest rate each held. One search is one replicate: its probes each ran on a server started for "
            "it (a build given as a running server's URL is the exception: there every probe shares it), so no "
            "two searches share a server process; all ran on this machine in this run, so the interval says "
            "nothing of another machine or day.",
            f"Search: {_or(slo.search_method, '?')}, to within {float(_or(slo.resolution, 0.02)):.0%} of the "
            f"rate; {window} s window after {warmup} s of warm-up per probe.",
            slo_rule(slo),
            f"Pass: {_or(slo.pass_rule, '?')}.",
            f"Interval: {_or(slo.interval_method, '?')}: {_coverages(slo)}; fewer than {_or(slo.min_trials, 6)} "
            "searches give 'inconclusive', no interval (with 5, no order statistic reaches 95%).",
            f"Never held: {_or(slo.never_held_rule, '?')}.",
            f"Order: {_or(slo.order, '?')}."]


def _grouped(warnings: list[str]) -> list[str]:
    """One line per kind of warning (its text with the figures taken out): the first, and how many
    runs said the like; all of them stay in summary.json."""
    kinds: dict[str, list[str]] = {}
    for w in warnings:
        kinds.setdefault(_FIGURES.sub("#", w.partition(": ")[2] or w), []).append(w)
    return [same[0] + (f" (and {len(same) - 1} more runs alike)" if len(same) > 1 else "")
            for same in kinds.values()]


def _missed(e: SloEntry) -> str:
    """`server-bound 3, neither 1`: which side held each probe that missed the target back."""
    return ", ".join(f"{k}-bound {c}" for k, c in e.bound_when_failing.items() if c) or "none (no probe missed)"


def slo_build_lines(name: str, e: SloEntry) -> list[str]:
    """The rate each search found, where the target broke, and the first warnings."""
    rates = ", ".join(_rate(r) if r is not None else "none held" for r in e.search_rates)
    lines = [f"{name}: rate per search {rates}; the probes that missed were {_missed(e)}."]
    lines += [f"Warning ({name}): {w}" for w in _grouped(list(e.warnings))]
    if e.audit_passed is False:
        lines.append(f"{name}: audit FAIL in a probe: see the `audit_passed` column of slo.csv.")
    return lines


def _steps(rows: list[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The probes by rate, in the order run: a record before `step` was kept has a probe per rate."""
    out: list[list[Mapping[str, Any]]] = []
    key = None
    for r in rows:
        this = (r.get("build"), r.get("search"), r.get("step", r.get("probe")))
        if this != key or not out:
            out.append([])
            key = this
        out[-1].append(r)
    return out


def _numbers(probes: list[Mapping[str, Any]], column: str) -> list[float]:
    return [float(v) for v in (p.get(column) for p in probes) if v is not None and v == v]


def _step_result(probes: list[Mapping[str, Any]], in_a_row: int) -> str:
    last = probes[-1]
    passed = last.get("passed")
    if passed is None or passed != passed:
        return "sets the bracket"
    if passed is True:
        return "held" if in_a_row == 1 else f"held {len(probes)} of {in_a_row}"
    where = "" if in_a_row == 1 else f" on {len(probes)} of {in_a_row}"
    return f"missed{where}: {last.get('why') or '?'}"


def _step_row(probes: list[Mapping[str, Any]], quantile: str, in_a_row: int) -> dict[str, Any]:
    first, last = probes[0], probes[-1]
    runs = f"{first.get('probe')}" if len(probes) == 1 else f"{first.get('probe')}-{last.get('probe')}"
    achieved, p50, top = (_numbers(probes, c) for c in ("achieved_per_s", "claim_p50_ms", "claim_quantile_ms"))
    return {"build": first.get("build"), "search": str(first.get("search")), "probe": runs,
            "phase": first.get("phase"), "asked/s": _rate(first.get("rate_per_s")),
            "achieved/s": _rate(min(achieved) if achieved else None), "p50 ms": fmt_num(max(p50, default=None), ".2f"),
            f"{quantile} ms": fmt_num(max(top, default=None), ".2f"), "bound": last.get("bound"),
            "result": _step_result(probes, in_a_row)}


def slo_probe_table(run: Run, slo: SloBlock) -> Table | None:
    """Every run of every search, a row per rate: the closed-loop run that set the bracket, then each
    rate tried with the worst of its probes (the lowest achieved rate, the highest latencies)."""
    probes = run.tables.get("slo")
    if probes is None or not len(probes):
        return None
    target: SloTarget = slo.target
    rows = [_step_row(step, target.name or "quantile", slo.holds_in_a_row)
            for step in _steps(probes.to_dict("records"))]
    m = slo.holds_in_a_row
    per_rate = "" if m == 1 else f", a row per rate: the worst of its up to {m} probes"
    return Table(pd.DataFrame(rows), f"Every probe, each on a fresh server ({target.text or '?'}; latency from each "
                                     f"claim's intended start, in closed loop from its send{per_rate})",
                 id="capacity-slo-probes")


def _median(values: Any) -> float | None:
    numbers = [float(v) for v in values or () if v is not None]
    return median(numbers) if numbers else None


def _share(part: Any, whole: Any) -> float | None:
    return float(part) / float(whole) if part is not None and whole else None


def slo_section(run: Run, slo: SloBlock) -> list[Block]:
    """capacity --slo: each build's rate at the target, how it was found, and every probe."""
    target, builds = slo.target.text or "the target", slo.builds
    rows = [{**slo_row(name, e), "closed loop/s": _rate(_median(e.capacity_per_s)),
             "of closed loop": fmt_num(_share(e.rate_per_s, _median(e.capacity_per_s)), ".0%")}
            for name, e in builds.items()]
    bound = "; ".join(f"{n}: the probes that missed were {_missed(e)}" for n, e in builds.items())
    figure = slo.figure_text
    blocks: list[Block] = [
        Heading(f"Rate at {target}", anchor="capacity-slo"),
        Para(f"{figure[0].upper()}{figure[1:]} at {target} (echomq-bench capacity --slo), {SEARCH_TEXT}."),
        Table(pd.DataFrame(rows), f"Rate at {target} per build: {figure}", id="capacity-slo-table"),
        Notes(slo_method(slo) + [line for n, e in builds.items() for line in slo_build_lines(n, e)])]
    probes = slo_probe_table(run, slo)
    if probes is not None:
        blocks.append(probes)
    searches = f"{slo.searches} search{'' if slo.searches == 1 else 'es'}" if slo.searches is not None else "? searches"
    return blocks + [Notes(context_lines(run, trials=f"{searches} per build", bottleneck=bound))]
