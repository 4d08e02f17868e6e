"""The build matrix the main job's report opens with: one row per build,
read from four parts of the run (verbs, counts, compare, reapcost), with
the allocator under it. It reads records; it never measures.

Each column keeps its part's method: server µs per cycle is the median over
the compare trials, every build loaded at once on one core; instructions
per cycle are one claim and one complete under callgrind, and their ratio is
against the same reference as the time ratio; the verbs are `typical`
server µs, build after build; reap(100) is the median of its repeats at the
largest M the run measured. Only the time ratio column is a verdict; it is
the compare's, quoted, with its n, method and interval. Where two columns
tell different stories, a note under the matrix says so (report.lenses).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.measurement.stats import median
from echomq_bench.records.kinds.compare import CompareEntry, CompareRecord
from echomq_bench.records.kinds.counts import CountsRecord
from echomq_bench.records.kinds.verbs import VerbsRecord
from echomq_bench.report.context import commit, machine
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table
from echomq_bench.report.lenses import count_notes, count_ratios, order_notes

__all__ = ["matrix_frame", "matrix_section", "allocator_note", "REAP_CAP"]

REAP_CAP = 100   # the product's default cap: one call that moves 100 jobs


def _servers(runs: Mapping[str, Run]) -> dict[str, dict[str, Any]]:
    """Each build's version, allocator and binary, as any part recorded them."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs.values():
        for s in run.meta.get("servers") or ():
            if s.get("name"):
                out.setdefault(str(s["name"]), s)
    return out


def _reap_at_largest_m(run: Run) -> tuple[dict[tuple[str, str], float], int | None]:
    """(build, form) -> median server µs of one reap moving REAP_CAP jobs, at the largest M."""
    t = run.table("reapcost")
    t = t[(t["metric"] == "server_us") & (t["verb"] == "reap") & (t["cap"] == REAP_CAP) & (t["k"] == REAP_CAP)]
    if not len(t):
        return {}, None
    largest = int(t["M"].max())
    medians = t[t["M"] == largest].groupby(["build", "form"])["value"].agg(median)
    return {(str(b), str(f)): float(v) for (b, f), v in medians.items()}, largest


def _m_text(m: int) -> str:
    return f"{m // 1_000_000}M" if m % 1_000_000 == 0 else f"{m:,}"


def _builds_in_order(runs: Mapping[str, Run]) -> list[str]:
    names: list[str] = []
    if "compare" in runs:
        names += list(_compare(runs).builds)
    names += [b.build for b in _verbs(runs).builds]
    return list(dict.fromkeys(names))


def _compare(runs: Mapping[str, Run]) -> CompareRecord:
    """The compare record of the run, typed; an empty one when the run made none."""
    return CompareRecord.from_record(runs["compare"].summary) if "compare" in runs else CompareRecord()


def _verbs(runs: Mapping[str, Run]) -> VerbsRecord:
    """The verbs record of the run, typed; an empty one when the run made none."""
    return VerbsRecord.from_record(runs["verbs"].summary) if "verbs" in runs else VerbsRecord()


def _counts(runs: Mapping[str, Run]) -> CountsRecord | None:
    """The run's instructions per cycle, typed; None when it counted no cycles (a gate's record counts verbs)."""
    record = CountsRecord.from_record(runs["counts"].summary) if "counts" in runs else None
    return record if record is not None and record.cycle else None


def _count_cells(runs: Mapping[str, Run], compare: CompareRecord) -> dict[str, tuple[str, str]]:
    """build -> (instructions per cycle, its ratio to the reference the time ratio is against)."""
    counts = _counts(runs)
    if counts is None:
        return {}
    ratios = count_ratios(compare, counts)
    out = {}
    for name, n in counts.per_cycle().items():
        ratio, ref = ratios.get(name, (None, ""))
        out[name] = (f"{n:,.0f}", "-" if ratio is None else "1 (the baseline)" if ref == name else f"{ratio:.3f}×")
    return out


def matrix_frame(runs: Mapping[str, Run]) -> tuple[pd.DataFrame, str | None]:
    compare = _compare(runs)
    counted = _count_cells(runs, compare)
    base = compare.baseline
    verbs = {b.build: b.verbs for b in _verbs(runs).builds}
    labels = _verbs(runs).labels
    reap, largest = _reap_at_largest_m(runs["reapcost"]) if "reapcost" in runs else ({}, None)
    servers = _servers(runs)
    paired = len(set((compare.baselines or {}).values())) > 1
    column = "ratio to its allocator's baseline" if paired else f"ratio to {base}"
    rows = []
    for name in _builds_in_order(runs):
        entry = compare.builds.get(name) or CompareEntry()
        us = entry.server_us_per_cycle
        own = str(entry.baseline or base)
        headline = compare.headline_of(entry)
        row: dict[str, Any] = {
            "build": name, "version": servers.get(name, {}).get("version", entry.version or "?"),
            "malloc": servers.get(name, {}).get("allocator") or "?",
            "server µs/cycle": (f"{us.median:.1f} ({us.min:.1f}..{us.max:.1f})"
                                if us.median is not None and us.min is not None and us.max is not None else "-"),
            column: ("1 (the baseline)" if name == own else
                     f"{headline.label() if headline.ratio is not None else '-'}{f' (vs {own})' if paired else ''}")
                     if base else "-",
            "instructions/cycle": counted.get(name, ("-", "-"))[0],
            f"instructions {column}": counted.get(name, ("-", "-"))[1]}
        for case, label in labels.items():
            figure = verbs.get(name, {}).get(case)
            row[f"{label} µs"] = f"{figure.server_us:.1f}" if figure else "-"
        if largest is not None:
            m = _m_text(largest)
            for form, label in (("bare", "bare"), ("rows", "with job rows")):
                value = reap.get((name, form))
                row[f"reap({REAP_CAP}) at M={m}, {label}, µs"] = f"{value:.0f}" if value is not None else "-"
        rows.append(row)
    frame = pd.DataFrame(rows)
    # A column no build has a figure for (a form the run did not measure) is left out.
    return frame[[c for c in frame.columns if (frame[c] != "-").any()]], base


def allocator_note(servers: Mapping[str, Mapping[str, Any]], names: list[str]) -> str:
    """Which builds share an allocator, and what that means for a ratio across them."""
    by: dict[str, list[str]] = {}
    for name in names:
        by.setdefault(str(servers.get(name, {}).get("allocator") or "unknown"), []).append(name)
    groups = "; ".join(f"{', '.join(members)}: {allocator}" for allocator, members in by.items())
    if len(by) < 2:
        return f"Allocator: {groups}. Every build uses the same allocator, so a ratio between them is the version's."
    return (f"Allocator: {groups}. The allocator differs between these builds, so a ratio across two allocators "
            "measures the version and the allocator together; read a version's effect from builds that share one "
            "(each build's malloc column says which it links).")


def _lens_notes(runs: Mapping[str, Run], compare: CompareRecord) -> list[str]:
    """What the instruction columns are, and where the matrix's figures and the verbs' disagree."""
    notes = []
    counts = _counts(runs)
    if counts is not None and counts.builds:
        calls = counts.builds[0].settings.get("calls", "?")
        notes.append(f"instructions/cycle: one {' and one '.join(counts.cycle or ())} counted under callgrind inside "
                     f"EVALSHA ({calls} calls each on a fresh server): the work alone, the same on any machine, and "
                     "only the script's; its ratio is against the build the time ratio is against. A time ratio "
                     "also holds how fast memory and the allocator let the work run and what the server does "
                     "around the script.")
    if counts is not None:
        if counts.skipped:
            notes.append(f"Instructions not counted: {counts.skipped}.")
        notes += count_notes(compare, counts)
    if "verbs" in runs:
        notes += order_notes(compare, _verbs(runs))
    return notes


def matrix_section(runs: Mapping[str, Run], out: Path) -> list[Block]:
    """Nothing unless the run measured two builds or more in verbs or compare."""
    frame, base = matrix_frame(runs)
    if len(frame) < 2:
        return []
    compare = runs.get("compare")
    s = _compare(runs)
    bases = list(dict.fromkeys((s.baselines or {}).values()))
    notes = [allocator_note(_servers(runs), list(frame["build"]))]
    if compare is not None:
        bounds = {name: ", ".join(f"{k} {v}" for k, v in e.bound.items() if v) for name, e in s.builds.items()}
        notes.append(f"server µs/cycle: the main thread's whole CPU per claim/complete cycle (the scripts, reading "
                     "and parsing requests, writing replies, the allocator), median (min..max) over "
                     f"{s.trials} trials, each on fresh servers with "
                     f"every build loaded at once, sharing one core; the ratio is its verdict: "
                     f"{s.method or '?'}, {int(s.level * 100)}% interval. Bottleneck per "
                     f"build (trials bound so): " + "; ".join(f"{n} {b}" for n, b in bounds.items()) + ".")
    if "verbs" in runs:
        v = runs["verbs"]
        notes.append(f"Verbs: server µs of one call inside EVALSHA, elapsed on the server's own clock (commandstats): "
                     "the script and the commands it calls, not the I/O and parsing around it; the faster half's "
                     f"mean over {v.meta.get('settings', {}).get('rounds', '?')} rounds, one call at a time, build "
                     "after build; promote(100) and reap(100) move 100 jobs.")
    notes += _lens_notes(runs, s)
    if "reapcost" in runs:
        notes.append(f"reap({REAP_CAP}): one call that moves {REAP_CAP} expired leases, beside M live ones, median "
                     "of its repeats; bare is the sorted sets alone, with job rows the keyspace of a real queue.")
    first = compare or next(iter(runs.values()))
    notes.append(f"Machine: {machine(first)}, server and load generator sharing it. Commit {commit(first)}.")
    return [Heading("Build matrix", anchor="matrix"),
            Para(f"One row per build; each ratio is against the first build of its own allocator ({', '.join(bases)}), "
                 "so it reads a version's effect apart from the allocator's." if len(bases) > 1 else
                 f"One row per build; every ratio is against {base}." if base else "One row per build."),
            Table(frame, "The builds side by side", id="build-matrix"), Notes(notes)]
