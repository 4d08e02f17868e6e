"""A `compare` record: which build should I run? Each build's server time
per cycle against the baseline's, as a verdict with its n, method and
interval, and the trials behind it; with --slo, each build's rate at a
latency target and its ratio to the baseline's as a second headline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines, machine
from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table
from echomq_bench.report.kinds.capacity import slo_build_lines, slo_interval, slo_method, slo_probe_table

__all__ = ["section", "answer", "verdict_sentence", "slo_sentence"]

QUESTION = "Which build should I run?"


def _builds(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: e for name, e in (summary.get("builds") or {}).items() if isinstance(e, dict)}


def _base_of(name: str, entry: dict[str, Any], summary: dict[str, Any]) -> str:
    """The build this one's ratios are against: its own when the run paired builds by allocator."""
    return str(entry.get("baseline") or summary.get("baseline") or name)


def _pairs(summary: dict[str, Any]) -> bool:
    """Does the run set builds against more than one baseline?"""
    return len({_base_of(n, e, summary) for n, e in _builds(summary).items()}) > 1


def _headline(entry: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    return ((entry.get("verdicts") or {}).get(summary.get("headline", "server_us")) or {})


def verdict_sentence(name: str, entry: dict[str, Any], summary: dict[str, Any]) -> str:
    """`valkey 8.0.1 costs 0.92x redis 7.0.15's server time per cycle (95% CI 0.91-0.93, n = 14): faster`,
    as people read pyperf or hyperfine."""
    base_name = _base_of(name, entry, summary)
    base = _builds(summary).get(base_name, {})
    v = _headline(entry, summary)
    who, against = entry.get("version") or name, base.get("version") or base_name
    if "ratio" not in v:
        return f"{who} against {against}: {v.get('text') or entry.get('verdict', 'no verdict')}"
    ci = v.get("ci") if _has_interval(v, summary) else None
    interval = f"95% CI {ci[0]:.2f}–{ci[1]:.2f}, " if ci else "too few trials for an interval, "
    text = str(v.get("text") or v.get("verdict"))
    return (f"{who} costs {v['ratio']:.2f}× {against}'s server time per cycle ({interval}n = {v.get('n')}): "
            f"{text}")


def _has_interval(v: dict[str, Any], summary: dict[str, Any]) -> bool:
    """A t-interval from fewer trials than the method needs is mostly its own width: not shown."""
    return bool(v.get("ci")) and int(v.get("n") or 0) >= int(summary.get("min_trials") or 6)


def _footnote(run: Run) -> str:
    s = run.summary
    builds = _builds(s)
    others = [e for name, e in builds.items() if name != _base_of(name, e, s)]
    excluded = sum(int(e.get("trials_excluded") or 0) for e in others)
    trials = s.get("trials", "?")
    bound = {k: sum(int((e.get("bound") or {}).get(k, 0)) for e in builds.values()) for k in ("server", "client",
                                                                                               "neither")}
    runs = sum(bound.values())
    stop = (f"stopped at ±{s['precision']:.0%} or {trials} trials" if s.get("precision") else f"{trials} trials")
    allocators = {str(x.get("allocator")) for x in run.meta.get("servers") or () if x.get("allocator")}
    malloc = (" Each build is judged against the first build of its own allocator." if _pairs(s) else
              " Allocators differ between builds: see the build matrix." if len(allocators) > 1 else "")
    return (f"Method: geometric mean of per-trial ratios, {int(float(s.get('level', 0.95)) * 100)}% t-interval "
            f"on their logs; 'equivalent' by TOST within ±{float(s.get('margin', 0.02)):.0%}, faster or slower only "
            f"beyond ±{float(s.get('margin', 0.02)) / 2:.0%}; {stop}, {excluded} build-trials excluded as not "
            f"server-bound. Bound: server in {bound['server']} of {runs} build-trials, all builds on one shared "
            f"core ({machine(run)}).{malloc}")


# --------------------------------------------------------------------------
# The second headline with --slo: each build's rate at a latency target


def _slo(summary: dict[str, Any]) -> dict[str, Any]:
    slo = summary.get("slo")
    return slo if isinstance(slo, dict) else {}


def slo_sentence(name: str, entry: dict[str, Any], slo: dict[str, Any]) -> str:
    """`valkey 8.0.1 holds claim p99 <= 5ms at 0.93× redis 7.0.15's rate (95% CI 0.90–0.96, n = 6): slower`."""
    builds = _builds(slo)
    base_name = str(entry.get("baseline") or name)
    who = entry.get("version") or name
    against = builds.get(base_name, {}).get("version") or base_name
    target = (slo.get("target") or {}).get("text", "the target")
    v = entry.get("verdict_detail") or {}
    if "ratio" not in v or v.get("ratio") != v.get("ratio"):
        return f"{who} at {target} against {against}: {entry.get('verdict', 'no verdict')}"
    ci = v.get("ci") if _has_interval(v, slo) else None
    interval = f"95% CI {ci[0]:.2f}–{ci[1]:.2f}, " if ci else "too few searches for an interval, "
    return (f"{who} holds {target} at {v['ratio']:.2f}× {against}'s rate ({interval}n = {v.get('n')}): "
            f"{v.get('text') or v.get('verdict')}")


def _slo_blocks(run: Run) -> list[Block]:
    slo = _slo(run.summary)
    if not slo:
        return []
    target = slo.get("target") or {}
    rows = [{"build": name, "version": str(e.get("version", "?")), "rate/s": format(e.get("rate_per_s") or 0, ",.0f"),
             "95% interval": slo_interval(e),
             "vs baseline": "baseline" if e.get("verdict") == "baseline" else
             f"{_label(e.get('verdict_detail') or {}, slo, n=False)} (vs {e.get('baseline')})"}
            for name, e in _builds(slo).items()]
    method = (f"Ratio: rate over the baseline's rate per repetition, {slo.get('ratio_method', '?')}; at least "
              f"{slo.get('min_trials', 6)} repetitions for a verdict; equivalence margin "
              f"±{float(slo.get('margin', 0.02)):.0%}.")
    blocks: list[Block] = [
        Heading(f"Build against build: rate at {target.get('text', 'the target')}", anchor="compare-slo"),
        Para(f"The highest open-loop rate at which each build's {target.get('text', 'target')} held, the latency "
             "timed from each claim's intended start: the median over searches, each a bisection of the rate with "
             "every probe on a fresh server; the builds searched in turn in each repetition, and each repetition's "
             "rates paired."),
        Table(pd.DataFrame(rows), f"Rate at {target.get('text', '?')}", id="compare-slo-table"),
        Notes([*slo_method(slo), method,
               *(line for n, e in _builds(slo).items() for line in slo_build_lines(n, e))])]
    probes = slo_probe_table(run, target)
    return blocks + ([probes] if probes is not None else [])


def answer(run: Run, out: Path) -> Answer | None:
    s = run.summary
    builds = _builds(s)
    rows, lines = [], []
    for name, e in builds.items():
        base = _base_of(name, e, s)
        if name == base:
            continue
        lines.append(verdict_sentence(name, e, s))
        v = _headline(e, s)
        against = f" vs {builds.get(base, {}).get('version') or base}" if _pairs(s) else ""
        if _has_interval(v, s):
            rows.append({"label": f"{e.get('version') or name}\n({name}){against}", "ratio": v["ratio"],
                         "lo": v["ci"][0], "hi": v["ci"][1], "verdict": v.get("verdict", "")})
    slo = _slo(s)
    lines += [slo_sentence(n, e, slo) for n, e in _builds(slo).items() if e.get("verdict") != "baseline"]
    if not lines:
        return None
    first = str(s.get("baseline"))
    base_label = ("its allocator's baseline" if _pairs(s)
                  else str(builds.get(first, {}).get("version") or first))
    png = (charts.forest(pd.DataFrame(rows), base_label, float(s.get("margin", 0.02)), out / "answer_build.png")
           if rows else None)
    return Answer(QUESTION, lines, png, _footnote(run), "answer-build")


def _spread_text(entry: dict[str, Any], key: str, fmt: str = ",.0f") -> str:
    s = entry.get(key) or {}
    if not isinstance(s, dict) or "median" not in s:
        return ""
    return f"{format(s['median'], fmt)} ({format(s['min'], fmt)}..{format(s['max'], fmt)})"


def _busy_wait(entry: dict[str, Any]) -> str:
    busy, wait = entry.get("server_utilization") or {}, entry.get("server_wait") or {}
    if "median" not in busy or "median" not in wait:
        return ""
    return f"{float(busy['median']) + float(wait['median']):.1%}"


def _table(summary: dict[str, Any]) -> pd.DataFrame:
    paired = _pairs(summary)
    column = "vs its allocator's baseline" if paired else f"vs {summary.get('baseline', '?')}"
    rows = []
    for name, e in _builds(summary).items():
        base = _base_of(name, e, summary)
        us = e.get("server_us_per_cycle") or {}
        bound = e.get("bound") or {}
        rows.append({
            "build": name, "version": e.get("version", "?"), "malloc": str(e.get("allocator") or "?").split("-")[0],
            "µs/cycle": f"{us['median']:.2f}" if "median" in us else "",
            "min..max": f"{us['min']:.1f}..{us['max']:.1f}" if "min" in us else "",
            "busy": _busy_wait(e), "bound": f"{bound.get('server', 0)}/{sum(int(c) for c in bound.values())}",
            column: "baseline" if name == base else
            f"{_label(_headline(e, summary), summary, n=False)}{f' (vs {base})' if paired else ''}",
        })
    return pd.DataFrame(rows)


def _label(v: dict[str, Any], summary: dict[str, Any], n: bool = True) -> str:
    """`0.919 [0.914, 0.924] n=14 faster`; no interval below the trials the method needs."""
    if "ratio" not in v or v.get("ratio") != v.get("ratio"):
        return str(v.get("text") or "no verdict")
    ci = v.get("ci") if _has_interval(v, summary) else None
    interval = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    count = f" n={v.get('n')}" if n else ""
    return f"{v['ratio']:.3f}{interval}{count} {v.get('text')}"


def _notes(run: Run) -> list[str]:
    """What the table's build column names in full, the allocators, exclusions, other metrics, method."""
    s = run.summary
    builds = _builds(s)
    shared = " (its share of the core)" if s.get("interleave") == "together" else ""
    out = [f"{name}: {e.get('version', '?')}, malloc {e.get('allocator') or '?'}, {e.get('binary') or '?'}; "
           f"{_spread_text(e, 'cycles_per_s')} cycles/s{shared}" for name, e in builds.items()]
    allocators = {name: str(e.get("allocator") or "?") for name, e in builds.items()}
    if len(set(allocators.values())) > 1:
        shown = ", ".join(f"{n} {a}" for n, a in allocators.items())
        out.append(f"Allocators differ ({shown}): a difference between these builds is their allocators' too.")
    for name, e in builds.items():
        if e.get("excluded_trials"):
            trials = ", ".join(map(str, e["excluded_trials"]))
            out.append(f"Excluded for {name}: trial {trials} of {s.get('trials')}, where a build was not "
                       "server-bound (busy + wait below 97% of the window).")
        for metric, v in (e.get("verdicts") or {}).items():
            if metric != s.get("headline") and isinstance(v, dict):
                out.append(f"{name} {metric} against {_base_of(name, e, s)}: {_label(v, s)}")
    if s.get("rates_note"):
        out.append("Rates: " + str(s["rates_note"]) + ".")
    out.append(f"Method: {s.get('method', '?')}; at least {s.get('min_trials', 6)} counted trials for a verdict; "
               f"equivalence margin ±{float(s.get('margin', 0.02)):.0%}"
               + (f"; stopped once every interval was within ±{s['precision']:.1%}" if s.get("precision") else "")
               + ".")
    return out


def section(run: Run, out: Path) -> list[Block]:
    s = run.summary
    bases = dict.fromkeys(_base_of(n, e, s) for n, e in _builds(s).items())
    against = f"the first build of each allocator ({', '.join(bases)})" if _pairs(s) else s.get("baseline", "?")
    bound = "; ".join(f"{n}: " + ", ".join(f"{k} {c}" for k, c in (e.get("bound") or {}).items() if c)
                      for n, e in _builds(s).items())
    context = context_lines(run, trials=f"{s.get('trials', '?')} per build, {s.get('order', 'interleaved')}",
                            bottleneck=bound)
    blocks: list[Block] = [
        Heading("Build against build: server time per cycle", anchor="compare"),
        Para("Claim+complete cycles at the server's limit on fresh servers each trial (echomq-bench compare). "
             f"The headline is server µs per cycle against {against}: the median over trials, its range, and the ratio "
             "with its 95% interval and verdict. Busy is the server's main thread busy or waiting for the core, the "
             "median share of the window; bound counts the trials in which it was server-bound."),
        Table(_table(s), "Each build over the trials", id="compare-table"),
        Notes(_notes(run)), Notes(context),
    ]
    curves = {f"{name} claim": charts.read_hgrm(run.path / f"{name}-claim.hgrm")
              for name in _builds(s) if (run.path / f"{name}-claim.hgrm").is_file()}
    if curves and len(curves) <= charts.MAX_LINES:
        png = charts.latency_quantiles(curves, out / "compare_latency.png", " ".join(context))
        blocks.append(Image(png, "Claim latency by percentile, all trials merged (closed loop at saturation: "
                                 "queueing inside pipelines, not an idle server's latency)"))
    blocks += _slo_blocks(run)
    for name, e in _builds(s).items():
        blocks += [Para(f"Warning ({name}): {text}") for text in e.get("warnings") or []]
    return blocks
