"""A `compare` record: which build should I run? Each build's server time
per cycle against the baseline's, as a verdict with its n, method and
interval, and the trials behind it; with --slo, each build's rate at a
latency target and its ratio to the baseline's as a second headline."""

from __future__ import annotations

import math

from pathlib import Path

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.records.kinds.capacity import SloBlock, SloEntry
from echomq_bench.records.kinds.compare import CompareEntry, CompareRecord, Spread
from echomq_bench.records.verdicts import RatioVerdictEntry
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines, machine
from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table
from echomq_bench.report.slo import SEARCH_TEXT, slo_build_lines, slo_method, slo_probe_table, slo_row

__all__ = ["section", "answer", "one_server_answer", "verdict_sentence", "slo_sentence"]

QUESTION = "Which build should I run?"


def _version(r: CompareRecord, name: str) -> str:
    """The build's version, with its name when another build of the run has the same version
    (an A/A pair, a build with its own scripts)."""
    entry = r.builds.get(name)
    version = (entry.version if entry else None) or name
    shared = sum(1 for e in r.builds.values() if e.version == version) > 1
    return f"{version} ({name})" if shared else version


def _interval(r: CompareRecord, v: RatioVerdictEntry) -> str:
    """`95% CI 0.91–0.97, n = 16, between runs ±1.5% (assumed: 1 of 3 runs here)`."""
    ci = v.ci if r.has_interval(v) else None
    interval = f"95% CI {ci[0]:.2f}–{ci[1]:.2f}, " if ci else "too few trials for an interval, "
    between = f", {v.spread.text}" if v.spread is not None and v.spread.text and ci else ""
    return f"{interval}n = {v.n}{between}"


def verdict_sentence(name: str, entry: CompareEntry, r: CompareRecord) -> str:
    """`valkey 8.0.1 costs 0.92x redis 7.0.15's server time per cycle (95% CI 0.89-0.95, n = 14, between
    runs ±1.2% (6 runs here)): faster`, as people read pyperf or hyperfine."""
    v = r.headline_of(entry)
    who, against = _version(r, name), _version(r, r.base_of(name))
    if v.ratio is None or not math.isfinite(v.ratio):
        # Every trial left out (a client-bound trial says nothing of the server): no ratio to show.
        left_out = f"; {v.excluded} left out, not server-bound" if v.excluded else ""
        return f"{who} against {against}: {v.text or entry.verdict or 'no verdict'}{left_out}"
    return f"{who} costs {v.ratio:.2f}× {against}'s server time per cycle ({_interval(r, v)}): {v.text or v.verdict}"


def _within_allocator_line(r: CompareRecord) -> str | None:
    """The second line: each version against the first build of its own allocator, so a version's
    effect reads apart from its allocator's."""
    parts = []
    for name, e in r.builds.items():
        v = e.within_allocator
        if v is None or v.ratio is None or not math.isfinite(v.ratio) or not e.allocator_baseline:
            continue
        parts.append(f"{_version(r, name)} costs {v.ratio:.2f}× {_version(r, e.allocator_baseline)}'s "
                     f"({_interval(r, v)}): {v.text or v.verdict}")
    return "Within an allocator (the version's effect alone): " + "; ".join(parts) if parts else None


def _ranked(r: CompareRecord) -> list[str]:
    """Every judged build, cheapest first, with the reference in its place at 1."""
    def ratio(name: str) -> float:
        if name == r.base_of(name):
            return 1.0
        v = r.headline_of(r.builds[name])
        return float(v.ratio) if v.ratio is not None and v.ratio == v.ratio else float("inf")
    return sorted(r.builds, key=ratio)


def _footnote(run: Run, r: CompareRecord) -> str:
    others = [e for name, e in r.builds.items() if name != r.base_of(name)]
    excluded = sum(int(e.trials_excluded or 0) for e in others)
    trials = r.trials if r.trials is not None else "?"
    bound = {k: sum(int(e.bound.get(k, 0)) for e in r.builds.values()) for k in ("server", "client", "neither")}
    runs = sum(bound.values())
    stop = f"stopped at ±{r.precision:.0%} or {trials} trials" if r.precision else f"{trials} trials"
    allocators = {str(x.get("allocator")) for x in run.meta.get("servers") or () if x.get("allocator")}
    malloc = (" Each build is judged against the first build of its own allocator." if r.pairs() else
              " Every build is ranked against one reference, allocator and all." if len(allocators) > 1 else "")
    two_level = any(r.headline_of(e).spread is not None for e in others)
    between = (" plus the spread between this machine's earlier runs of the same builds (DerSimonian–Laird, "
               "Welch–Satterthwaite df; assumed until 3 runs)" if two_level else " (this run's trials alone)")
    order = " started and filled in a drawn order," if r.order_seed is not None else ""
    return (f"Method: each trial on fresh servers,{order} all {len(r.builds)} builds on one shared core; geometric "
            f"mean of per-trial ratios, {int(r.level * 100)}% t-interval on their logs{between}; 'equivalent' by "
            f"TOST within ±{r.margin:.0%}, faster or slower only beyond ±{r.margin / 2:.0%}; {stop}, {excluded} "
            f"build-trials excluded as not server-bound. Bound: server in {bound['server']} of {runs} build-trials "
            f"({machine(run)}). A ratio holds among these builds: other company on the core is another "
            f"comparison.{malloc}")


# --------------------------------------------------------------------------
# The second headline with --slo: each build's rate at a latency target


def slo_sentence(name: str, entry: SloEntry, slo: SloBlock) -> str:
    """`valkey 8.0.1 holds claim p99 <= 5ms at 0.93× redis 7.0.15's rate (the rate a 2 s probe holds
    95% of the time; 95% CI 0.90–0.96, n = 6, every search held a rate): slower`."""
    base_name = entry.baseline or name
    base = slo.builds.get(base_name)
    who, against = entry.version or name, (base.version if base else None) or base_name
    target = slo.target.text or "the target"
    v = entry.verdict_detail or RatioVerdictEntry()
    if not v.judged:
        return f"{who} at {target} against {against}: {entry.verdict or 'no verdict'}"
    ci = v.ci if v.ci and int(v.n or 0) >= _min_trials(slo) else None
    interval = f"95% CI {ci[0]:.2f}–{ci[1]:.2f}, " if ci else "too few searches for an interval, "
    never = [f"{n} never held in {e.never_held} of {e.n}" for n, e in ((name, entry), (base_name, base))
             if e is not None and e.never_held]
    held = "; ".join(never) if never else "every search held a rate"
    return (f"{who} holds {target} at {v.ratio:.2f}× {against}'s rate ({slo.figure_text}; {interval}n = {v.n}, "
            f"{held}): {v.text or v.verdict}")


def _min_trials(slo: SloBlock) -> int:
    return slo.min_trials if slo.min_trials is not None else 6


def _slo_blocks(run: Run, slo: SloBlock) -> list[Block]:
    target, min_trials = slo.target, _min_trials(slo)
    rows = [{**slo_row(name, e), "vs baseline": "baseline" if e.verdict == "baseline" else
             f"{(e.verdict_detail or RatioVerdictEntry()).label(brief=True, min_trials=min_trials, count=False)} "
             f"(vs {e.baseline})"} for name, e in slo.builds.items()]
    method = (f"Ratio: rate over the baseline's rate per repetition, {slo.ratio_method or '?'}; at least "
              f"{min_trials} repetitions for a verdict; equivalence margin "
              f"±{float(slo.margin if slo.margin is not None else 0.02):.0%}.")
    blocks: list[Block] = [
        Heading(f"Build against build: rate at {target.text or 'the target'}", anchor="compare-slo"),
        Para(f"Each build's {slo.figure_text} at {target.text or 'the target'}, {SEARCH_TEXT}; the builds searched "
             "in turn in each repetition, and each repetition's rates paired."),
        Table(pd.DataFrame(rows), f"Rate at {target.text or '?'}: {slo.figure_text}", id="compare-slo-table"),
        Notes([*slo_method(slo), method, *(line for n, e in slo.builds.items() for line in slo_build_lines(n, e))])]
    probes = slo_probe_table(run, slo)
    return blocks + ([probes] if probes is not None else [])


def answer(run: Run, out: Path) -> Answer | None:
    r = CompareRecord.from_record(run.summary)
    rows, lines, judged = [], [], 0
    for name in _ranked(r):
        e, base = r.builds[name], r.base_of(name)
        if name == base:
            if not r.pairs():
                lines.append(f"{_version(r, name)}: the reference (1.00×)")
            continue
        judged += 1
        lines.append(verdict_sentence(name, e, r))
        v = r.headline_of(e)
        against = f" vs {_version(r, base)}" if r.pairs() else ""
        if r.has_interval(v) and v.ci is not None:
            rows.append({"label": f"{e.version or name}\n({name}){against}", "ratio": v.ratio,
                         "lo": v.ci[0], "hi": v.ci[1], "verdict": v.verdict or ""})
    within = _within_allocator_line(r)
    if within:
        lines.append(within)
    if r.slo is not None:
        slo = [slo_sentence(n, e, r.slo) for n, e in r.slo.builds.items() if e.verdict != "baseline"]
        judged, lines = judged + len(slo), lines + slo
    if not judged:
        return None
    base_label = "its allocator's baseline" if r.pairs() else _version(r, str(r.baseline))
    png = charts.forest(pd.DataFrame(rows), base_label, r.margin, out / "answer_build.png") if rows else None
    return Answer(QUESTION, lines, png, _footnote(run, r), "answer-build")


def one_server_answer(version: str) -> Answer:
    """The build question asked of a run given one server: it keeps its slot on the first screen and says
    what it would take to answer it."""
    return Answer(QUESTION, [f"one server given ({version}): a choice between builds needs two; give two or more "
                             "--server"], None,
                  "The other three answers need one server; the build comparison loads two or more together "
                  "(or the same one twice, for an A/A run).", "answer-build")


def _spread_text(s: Spread, fmt: str = ",.0f") -> str:
    if s.median is None or s.min is None or s.max is None:
        return ""
    return f"{format(s.median, fmt)} ({format(s.min, fmt)}..{format(s.max, fmt)})"


def _busy_wait(entry: CompareEntry) -> str:
    busy, wait = entry.server_utilization.median, entry.server_wait.median
    if busy is None or wait is None:
        return ""
    return f"{float(busy) + float(wait):.1%}"


def _table(r: CompareRecord) -> pd.DataFrame:
    paired = r.pairs()
    column = "vs its allocator's baseline" if paired else f"vs {r.baseline or '?'}"
    rows = []
    for name, e in r.builds.items():
        base = r.base_of(name)
        us = e.server_us_per_cycle
        rows.append({
            "build": name, "version": e.version or "?", "malloc": str(e.allocator or "?").split("-")[0],
            "µs/cycle": f"{us.median:.2f}" if us.median is not None else "",
            "min..max": f"{us.min:.1f}..{us.max:.1f}" if us.min is not None and us.max is not None else "",
            "busy": _busy_wait(e), "bound": f"{e.bound.get('server', 0)}/{sum(int(c) for c in e.bound.values())}",
            column: "baseline" if name == base else
            f"{r.headline_of(e).label(brief=True, min_trials=r.min_trials, count=False)}"
            f"{f' (vs {base})' if paired else ''}",
        })
    return pd.DataFrame(rows)


def _notes(r: CompareRecord) -> list[str]:
    """What the table's build column names in full, the allocators, exclusions, other metrics, method."""
    shared = " (its share of the core)" if r.interleave == "together" else ""
    out = [f"{name}: {e.version or '?'}, malloc {e.allocator or '?'}, {e.binary or '?'}; "
           f"{_spread_text(e.cycles_per_s)} cycles/s{shared}" for name, e in r.builds.items()]
    allocators = {name: str(e.allocator or "?") for name, e in r.builds.items()}
    if len(set(allocators.values())) > 1:
        shown = ", ".join(f"{n} {a}" for n, a in allocators.items())
        out.append(f"Allocators differ ({shown}): a difference between these builds is their allocators' too.")
    for name, e in r.builds.items():
        if e.excluded_trials:
            trials = ", ".join(map(str, e.excluded_trials))
            out.append(f"Excluded for {name}: trial {trials} of {r.trials}, where a build was not "
                       "server-bound (busy + wait below 97% of the window).")
        head = r.headline_of(e)
        if head.spread is not None and head.spread.text:
            out.append(f"{name} against {r.base_of(name)}: the interval adds the {head.spread.text}")
        if e.within_allocator is not None and e.allocator_baseline:
            out.append(f"{name} against {e.allocator_baseline}, the first build of its allocator: "
                       f"{e.within_allocator.label(brief=True, min_trials=r.min_trials)}")
        for metric, v in e.verdicts.items():
            if metric != r.headline:
                out.append(f"{name} {metric} against {r.base_of(name)}: "
                           f"{v.label(brief=True, min_trials=r.min_trials)}")
    if r.rates_note:
        out.append(f"Rates: {r.rates_note}.")
    out.append(f"Method: {r.method or '?'}; at least {r.min_trials} counted trials for a verdict; "
               f"equivalence margin ±{r.margin:.0%}"
               + (f"; stopped once every interval was within ±{r.precision:.1%}" if r.precision else "")
               + ".")
    return out


def section(run: Run, out: Path) -> list[Block]:
    r = CompareRecord.from_record(run.summary)
    bases = dict.fromkeys(r.base_of(n) for n in r.builds)
    against = f"the first build of each allocator ({', '.join(bases)})" if r.pairs() else r.baseline or "?"
    bound = "; ".join(f"{n}: " + ", ".join(f"{k} {c}" for k, c in e.bound.items() if c) for n, e in r.builds.items())
    context = context_lines(run, trials=f"{r.trials if r.trials is not None else '?'} per build, "
                                        f"{r.order or 'interleaved'}", bottleneck=bound)
    blocks: list[Block] = [
        Heading("Build against build: server time per cycle", anchor="compare"),
        Para("Claim+complete cycles at the server's limit on fresh servers each trial (echomq-bench compare). "
             f"The headline is server µs per cycle against {against}: the median over trials, its range, and the ratio "
             "with its 95% interval and verdict. Busy is the server's main thread busy or waiting for the core, the "
             "median share of the window; bound counts the trials in which it was server-bound."),
        Table(_table(r), "Each build over the trials", id="compare-table"),
        Notes(_notes(r)), Notes(context),
    ]
    curves = {f"{name} claim": charts.read_hgrm(run.path / f"{name}-claim.hgrm")
              for name in r.builds if (run.path / f"{name}-claim.hgrm").is_file()}
    if curves and len(curves) <= charts.MAX_LINES:
        png = charts.latency_quantiles(curves, out / "compare_latency.png", " ".join(context))
        blocks.append(Image(png, "Claim latency by percentile, all trials merged (closed loop at saturation: "
                                 "queueing inside pipelines, not an idle server's latency)"))
    if r.slo is not None:
        blocks += _slo_blocks(run, r.slo)
    for name, e in r.builds.items():
        blocks += [Para(f"Warning ({name}): {text}") for text in e.warnings]
    return blocks
