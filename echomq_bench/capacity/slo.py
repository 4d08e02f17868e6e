"""Capacity at a latency target: the highest open-loop rate whose claim latency holds
`--slo`, found by bisection with every probe on a fresh server, searched again
`trials` times for an interval.

A search starts with one closed-loop run (`runner.measure`, a fresh server
from the spec, as `capacity` runs it): its cycles/s is the first upper
rate. Each probe is then one open-loop run at a scheduled rate on a server
started for it alone, judged by `judge_probe`; a rate holds when
`holds_in_a_row` probes at it hold one after the other (`slo_search.all_of`,
from `--slo-held`), and `slo_search.search_rate` picks the next rate. The
unit the interval replicates is the whole search; no two probes, and so no
two searches, share a server process (docs/design/slo.md). A probe whose
driver fell short of the schedule fails:
the server was offered less than was asked, so its latency is not the
rate's. A repetition searches every build, in an order rotated between
repetitions (A B, then B A), so a machine that drifts over a repetition
does so for each build in turn; search i of every build pairs with search
i of its baseline (`slo_result.SloResult.verdict`).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from typing import Any, Mapping, Sequence

from echomq_bench.capacity.compare_result import Build
from echomq_bench.capacity.open_loop import shortfall
from echomq_bench.capacity.result import CapacityResult
from echomq_bench.capacity.runner import measure_server
from echomq_bench.capacity.settings import CapacityError, CapacitySettings
from echomq_bench.capacity.slo_result import Probe, Search, SloResult
from echomq_bench.capacity.slo_search import all_of, in_a_row, search_rate
from echomq_bench.capacity.slo_spec import DEFAULT_HELD, DEFAULT_RESOLUTION, SloSpec
from echomq_bench.capacity.workload import settings_from_args
from echomq_bench.measurement.latency import Latency
from echomq_bench.progress import ProgressFn, prefixed, silent

__all__ = ["run_slo", "run_search", "judge_probe", "check_slo", "slo_refusal", "ORDER"]

ORDER = "every build searched in each repetition, the order rotated between repetitions (A B, then B A)"


def check_slo(slo: SloSpec, settings: CapacitySettings, specs: Sequence[Any]) -> None:
    """CapacityError before anything starts when the target cannot be searched as asked."""
    problems = []
    if settings.rate is not None:
        problems.append("--slo sets each probe's rate itself: drop --rate")
    clusters = [s.name for s in specs if getattr(s, "kind", None) == "cluster"]
    if clusters:
        problems.append(f"{', '.join(clusters)}: --slo searches one server's rate; a cluster's would need a rate "
                        "per master: give --server redis|valkey|NAME=BINARY")
    if slo.limit_ms >= settings.reply_timeout_s * 1000:
        problems.append(f"the limit {slo.limit_text} is not below the {settings.reply_timeout_s:g} s the driver "
                        "awaits a reply, so a claim that never came back could not be told from one in time")
    if problems:
        raise CapacityError("--slo: " + "; ".join(problems))


def slo_refusal(args: argparse.Namespace) -> str | None:
    """Why the --slo flags on a command line cannot run (None: they can, or none was given), said
    before anything starts."""
    if args.slo is None:
        extra = [flag for flag, value in (("--slo-trials", args.slo_trials), ("--slo-resolution", args.slo_resolution),
                                          ("--slo-held", args.slo_held)) if value is not None]
        return f"{' and '.join(extra)} need{'s' if len(extra) == 1 else ''} --slo TARGET" if extra else None
    try:
        check_slo(args.slo, settings_from_args(args), args.server)
    except CapacityError as exc:
        return str(exc)
    return None


def judge_probe(result: CapacityResult, slo: SloSpec) -> tuple[float, list[str]]:
    """The target's quantile of an open-loop run's claims, timed from intended start, and why it
    fails the target (none: it holds). A claim with no reply is counted at the reply timeout."""
    account = result.open_loop
    if account is None:
        raise CapacityError("a probe of a latency target must be an open-loop run")
    hist = Latency().merge(result.latency[slo.verb])
    timeouts = int(account["timeouts"])
    if timeouts:
        hist.record_us(int(result.settings.reply_timeout_s * 1e6), timeouts)
    quantile = hist.percentile_ms(slo.quantile) if hist.count else float("nan")
    why = []
    if not quantile <= slo.limit_ms:
        why.append(f"{slo.name} > {slo.limit_text}")
    if shortfall(account["achieved_per_s"], account["requested_per_s"]):
        # Rounded down, as the shortfall warning rounds it: 97.9% never reads as the 98% it missed.
        kept = math.floor(round(100 * account["achieved_per_s"] / account["requested_per_s"], 6))
        why.append(f"{kept}% of schedule")
    if account["sent"] != account["scheduled"]:
        why.append(f"{account['scheduled'] - account['sent']:,} due unsent")
    if timeouts:
        why.append(f"{timeouts:,} no reply")
    if result.counts.get("errors", 0):
        why.append(f"{result.counts['errors']:,} errors")
    if result.counts.get("w_empty", 0):
        why.append("backlog dry")
    return quantile, why


def _probe(r: CapacityResult, search: int, turn: tuple[int, int, int], phase: str, slo: SloSpec) -> Probe:
    index, step, attempt = turn
    base: dict[str, Any] = {
        "build": r.build, "search": search, "index": index, "step": step, "attempt": attempt, "phase": phase,
        "cycles_per_s": r.cycles_per_s,
        "p50_ms": r.latency_ms(slo.verb).get("p50", float("nan")), "bound": r.bound,
        "server_utilization": r.server_utilization, "client_utilization": r.client_utilization,
        "audit_passed": r.audit["passed"] if r.audit is not None else None, "server": str(r.server.get("url", ""))}
    if r.open_loop is None:
        quantile = r.latency[slo.verb].percentile_ms(slo.quantile) if r.latency[slo.verb].count else float("nan")
        return Probe(**base, rate=None, achieved=r.cycles_per_s, quantile_ms=quantile, timeouts=0, passed=None,
                     warnings=tuple(r.warnings))
    quantile, why = judge_probe(r, slo)
    # The shortfall and the timeouts are already reasons it failed; the other warnings stay.
    shown = tuple(w for w in r.warnings if not w.startswith("achieved ") and "had no reply within" not in w)
    return Probe(**base, rate=r.settings.rate, achieved=r.open_loop["achieved_per_s"], quantile_ms=quantile,
                 timeouts=int(r.open_loop["timeouts"]), passed=not why, why=tuple(why), warnings=shown)


def _probe_line(p: Probe, slo: SloSpec, where: str, in_a_row: int) -> str:
    if p.passed is None:
        return (f"{where}: closed loop {p.cycles_per_s:,.0f} cycles/s, {p.bound}-bound, {slo.name} "
                f"{p.quantile_ms:.2f} ms: the search starts there")
    verdict = "held" if p.passed else "missed (" + ", ".join(p.why) + ")"
    attempt = f", {p.attempt} of {in_a_row} in a row" if in_a_row > 1 else ""
    return (f"{where} ({p.phase}{attempt}): {p.rate or 0:,.0f}/s asked, {p.achieved:,.0f}/s achieved, p50 "
            f"{p.p50_ms:.2f} ms, {slo.name} {p.quantile_ms:.2f} ms, {p.bound}-bound: {verdict}")


def run_search(build: Build, settings: CapacitySettings, slo: SloSpec, *, search: tuple[int, int, int],
               rule: tuple[float, int] = (DEFAULT_RESOLUTION, 1), progress: ProgressFn | None = None,
               log: ProgressFn | None = None) -> Search:
    """One search of `build`'s rate at `slo`: a closed-loop run, then probes, each on a fresh server.
    `search` is (repetition, of how many, the build's place in it), `rule` (resolution, probes in a
    row a rate must hold); `progress` gets the progress of each run, `log` a line per probe."""
    index, total, order = search
    resolution, in_a_row = rule
    log = log or silent
    where = f"{build.name} search {index}/{total}"
    probes: list[Probe] = []
    described: dict[str, Any] = {}

    def run(rate: float | None, phase: str, attempt: int = 1) -> Probe:
        label = f"{where} probe {len(probes)}" + (f" at {rate:,.0f}/s" if rate else " closed loop")
        r = measure_server(build.spec, replace(settings, rate=rate, ceiling=False), lua_dir=build.lua_dir,
                    progress=prefixed(progress, f"{label}:"))
        described.setdefault("server", r.server)
        described.setdefault("version", r.version)
        # Each rate is one step of the search; its probes are its attempts.
        step = 0 if not probes else probes[-1].step + (attempt == 1)
        p = _probe(r, index, (len(probes), step, attempt), phase, slo)
        probes.append(p)
        log(_probe_line(p, slo, f"{where} probe {p.index}", in_a_row))
        return p

    closed = run(None, "closed loop")
    if not closed.cycles_per_s > 0:
        raise CapacityError(f"{build.name}: the closed-loop run finished no cycle, so there is no rate to start from")
    found = search_rate(all_of(lambda rate, phase, attempt: bool(run(rate, phase, attempt).passed), in_a_row),
                        closed.cycles_per_s, resolution=resolution)
    return Search(build.name, str(described.get("version", "?")), index, order, found.rate, found.failed_above,
                  found.resolved, closed.cycles_per_s, tuple(probes), described.get("server") or {})


def run_slo(builds: Sequence[Build], settings: CapacitySettings, slo: SloSpec, trials: int, *,
            resolution: float = DEFAULT_RESOLUTION, held: float = DEFAULT_HELD, progress: ProgressFn | None = None,
            log: ProgressFn | None = None) -> SloResult:
    """`trials` repetitions, each one search per build in a rotated order (see the module); a rate holds
    when the probes in a row that `held` asks for (`slo_search.in_a_row`) hold."""
    if not builds:
        raise CapacityError("--slo needs at least one build")
    if trials < 1:
        raise CapacityError(f"--slo needs at least 1 search, got {trials}")
    settings.check()
    check_slo(slo, settings, [b.spec for b in builds])
    rule = (resolution, in_a_row(held))
    done: list[Search] = []
    for i in range(trials):
        turn = i % len(builds)
        for place, build in enumerate([*builds[turn:], *builds[:turn]], start=1):
            done.append(run_search(build, settings, slo, search=(i + 1, trials, place), rule=rule,
                                   progress=progress, log=log))
    described: dict[str, Mapping[str, Any]] = {}
    for s in done:
        described.setdefault(s.build, s.described)
    return SloResult(slo, settings, tuple(b.name for b in builds), tuple(done), resolution, ORDER, described,
                     holds_in_a_row=rule[1])
