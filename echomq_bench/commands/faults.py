"""The queue under fire: ten faults, each under a steady load with an audit of every job.

Each scenario starts its own server (an embedded one, from the --server
spec plus the scenario's settings), forks producers, consumers and a pump
(echomq_bench.faults.load), lets the load settle, injects its fault, lets the load
run on, stops the producers, lets the consumers drain the queue, and audits
every id minted against the server's sets (echomq_bench.load.audit):

    crash              consumers SIGKILLed mid-lease: their jobs are reaped and completed once
    zombie             consumers SIGSTOPped past their lease, then resumed: their complete
                       and retry are refused; the new holder's result stands
    pause              the server SIGSTOPped for 2 s: clients time out and carry on
    restart-aof        the server SIGKILLed and restarted, appendonly yes, appendfsync always:
                       scripts reload transparently, nothing is lost
    restart-nopersist  the same with nothing on disk: the audit must report the loss, with
                       counts equal to what the server held when it died
    script-flush       SCRIPT FLUSH mid-run: transparent reload
    oom                maxmemory under noeviction: enqueue refused with a clear error, no
                       half-written row, the queue recovers when memory frees
    net-latency        through a fault proxy: latency, jitter and a bandwidth cap
    net-reset          through a fault proxy: connections reset, replies of calls that ran lost
    net-partition      through a fault proxy: a partition longer than the lease, then
                       half-open connections; every lost reply classified landed or not

Apart from the audit, every worker records each call's invocation and
outcome to a call log, and a checker that shares nothing with the audit
classifies every job from it (lost, recovered, unexpected, duplicated) and
checks the fencing tokens (echomq_bench.measurement.calllog_check), per fault
kind.

A scenario passes when its own checks, the audit and the call-log check
hold; for restart-nopersist, detecting the loss exactly is the pass.

--soak DURATION runs the soak instead: one long load per build, struck by a
seeded random schedule of process and network faults with recovery gaps
between them, audited and its call log checked at the end
(echomq_bench.faults.soak). Given several --server, it soaks each build in
turn with the same seed. It passes when nothing is lost, nothing is
accepted twice, every call whose reply was lost is resolved and the call-log
check holds.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from echomq_bench.faults.calllog_run import call_log_rows
from echomq_bench.faults.load import LoadSettings
from echomq_bench.faults.runner import run_scenario
from echomq_bench.faults.scenarios import FULL, QUICK, SCENARIOS
from echomq_bench.faults.nemesis import MAX_SOAK_S, MIN_SOAK_S
from echomq_bench.options import DurationError, add_list, add_out, add_quick, choice, parse_duration_ms, work_dist
from echomq_bench.progress import Progress

if TYPE_CHECKING:
    from echomq_bench.records.kinds.faults import ScenarioEntry
    from echomq_bench.records.record import Record

__all__ = ["faults_record", "load_settings", "configure", "run"]


# --------------------------------------------------------------------------
# The command


MAX_RATE = 20_000  # jobs/s over the whole run


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"rate must be a number of jobs/s, got {text!r}") from None
    if not 1 <= value <= MAX_RATE:
        raise argparse.ArgumentTypeError(f"rate must be from 1 to {MAX_RATE} jobs/s over the whole run, got {text}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n", 1)[1].strip() if __doc__ else None
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_quick(parser, "short runs, fewer faults (CI)")
    add_list(parser, "--scenario", choice(list(SCENARIOS)), metavar="NAME",
             help=f"run only these: {', '.join(SCENARIOS)}")
    add_out(parser, "results/<utc>-faults")
    parser.add_argument("--work", type=work_dist, default=LoadSettings.work, metavar="DIST",
                        help=f"consumer work time per job (default {LoadSettings.work})")
    parser.add_argument("--rate", type=_rate, default=LoadSettings.rate * LoadSettings.producers,
                        metavar="JOBS_PER_S", help=f"jobs/s offered over the whole run, split over its "
                        f"{LoadSettings.producers} producers (default {LoadSettings.rate * LoadSettings.producers:g})")
    parser.add_argument("--seed", type=_seed, default=None, metavar="N",
                        help="seed for the load and the choice of victims (default 1); with --soak also for the "
                             "fault schedule (default: drawn at random and printed, to replay the run)")
    parser.add_argument("--soak", type=_soak, default=None, metavar="DURATION",
                        help=f"run the soak instead of the scenarios: a random schedule of process and network "
                             f"faults for DURATION on each build in turn, e.g. 10m ({MIN_SOAK_S:g}s to "
                             f"{MAX_SOAK_S / 60:g}m)")


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be 0 or more, got {text}")
    return value


def _soak(text: str) -> float:
    try:
        seconds = parse_duration_ms(text) / 1000
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not MIN_SOAK_S <= seconds <= MAX_SOAK_S:
        raise argparse.ArgumentTypeError(
            f"a soak lasts from {MIN_SOAK_S:g}s (room for a process and a network fault, each with its recovery "
            f"gap) to {MAX_SOAK_S / 60:g}m, got {text!r}")
    return seconds


def run(args: argparse.Namespace) -> int:
    from echomq_bench.records import meta
    from echomq_bench.records.files import ResultsError, new_run_dir
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    if args.soak is not None:
        return _run_soaks(args)
    _preflight(args.server)  # a bad server fails here, before a results folder exists
    try:
        out = new_run_dir("faults", args.out)
    except OSError as exc:
        raise ResultsError(f"cannot make the results folder {args.out or 'under results/'}: {exc.strerror}") from None
    plan = QUICK if args.quick else FULL
    base = load_settings(args)
    seed = 1 if args.seed is None else args.seed
    names = args.scenario or list(SCENARIOS)
    seen: dict[str, Any] = {}
    outcomes: list[ScenarioEntry] = []
    progress = Progress(label="faults")
    for spec in args.server:
        for name in names:
            progress.end(f"{spec.name} {name} ...")
            outcome = run_scenario(spec, SCENARIOS[name], plan, base, out / "logs", seed,
                                   on_server=lambda s: seen.setdefault(s.name, meta.describe_server(s)))
            outcomes.append(outcome)
    passed = all(o.passed is not False for o in outcomes)
    info = meta.collect(quick=args.quick, scenarios=names, plan=plan.__dict__, load=base.__dict__, seed=seed)
    info["servers"] = list(seen.values())
    write_record(out, faults_record(outcomes, info, args.quick))
    print(record_text(out))
    print(f"{'PASS' if passed else 'FAIL'}: {sum(o.passed is True for o in outcomes)} passed, "
          f"{sum(o.passed is False for o in outcomes)} failed, {sum(o.passed is None for o in outcomes)} skipped"
          f" -> {out}")
    return 0 if passed else 1


def _run_soaks(args: argparse.Namespace) -> int:
    """One soak per build, in turn, with the same seed; one record for them all."""
    import secrets

    from echomq_bench.faults.nemesis import counts, schedule
    from echomq_bench.faults.soak import SoakError, run_soak
    from echomq_bench.faults.soakreport import chart_name, draw_timelines, soak_record
    from echomq_bench.records import meta
    from echomq_bench.records.files import ResultsError, new_run_dir
    from echomq_bench.records.record import read_record
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    if args.quick:
        raise SoakError("--soak has no --quick form: drop --quick (the shortest soak is --soak 20s)")
    if args.scenario:
        raise SoakError("--soak draws its faults from every kind: drop --scenario")
    _preflight(args.server)
    remote = [s for s in args.server if s.kind != "embedded"]
    if remote:
        raise SoakError(f"--soak pauses and restarts the server process, so it needs an embedded server; "
                        f"{remote[0].describe()!r} is not one")
    try:
        out = new_run_dir("faults", args.out)
    except OSError as exc:
        raise ResultsError(f"cannot make the results folder {args.out or 'under results/'}: {exc.strerror}") from None
    seed = secrets.randbelow(2**31) if args.seed is None else args.seed
    plan = schedule(seed, args.soak)
    base = load_settings(args)
    print(f"soak: seed {seed} (replay with --seed {seed}), {args.soak:g} s on each of "
          f"{', '.join(s.name for s in args.server)}; {len(plan)} faults each: "
          + ", ".join(f"{k} {n}" for k, n in counts(plan).items()), flush=True)
    seen: dict[str, Any] = {}
    results = []
    for spec in args.server:
        print(f"{spec.name} soak ...", flush=True)
        result = run_soak(spec, args.soak, seed, base, out / "logs",
                          on_server=lambda s: seen.setdefault(s.name, meta.describe_server(s)),
                          log=lambda line: print(line, flush=True))
        results.append(result)
    passed = all(r.passed for r in results)
    info = meta.collect(soak_s=args.soak, seed=seed, load=base.__dict__, schedule=[f.__dict__ for f in plan])
    info["servers"] = list(seen.values())
    write_record(out, soak_record(results, info))
    written = read_record(out)  # the chart is drawn from the record as written
    draw_timelines(written.summary, written.tables, out)
    print(record_text(out))
    print(f"{'PASS' if passed else 'FAIL'}: soak, seed {seed}, {sum(r.passed for r in results)}/{len(results)} "
          f"builds passed -> {out} (timelines: {', '.join(chart_name(r.server) for r in results)})")
    return 0 if passed else 1


def load_settings(args: argparse.Namespace) -> LoadSettings:
    return replace(LoadSettings(), work=args.work, rate=args.rate / LoadSettings.producers)


def _preflight(specs: list[Any]) -> None:
    from echomq_bench.servers import ServerSpecError, spec_binary, start

    for spec in specs:
        if spec.kind == "cluster":
            raise ServerSpecError(f"faults runs on single servers, not the cluster {spec.describe()!r}; "
                                  "for a cluster's faults use: echomq-bench failover")
        if spec.kind == "embedded":
            spec_binary(spec)
        else:
            start(spec)  # PINGs it: unreachable, or a wrong password, is a clear error now


def faults_record(outcomes: list[ScenarioEntry], info: dict[str, Any], quick: bool) -> Record:
    """The scenarios' run as it is written: every outcome (figures, audit, checks, or why it was skipped) in
    summary.json, and their figures as tidy rows."""
    from echomq_bench.records.kinds.faults import FaultsRecord
    from echomq_bench.records.record import Record

    record = FaultsRecord(passed=all(o.passed is not False for o in outcomes), quick=quick,
                          scenarios=tuple(outcomes))
    return Record(kind="faults", meta=info, tables={"faults": _tidy(outcomes)}, summary=record.to_record())


def _tidy(outcomes: list[ScenarioEntry]) -> list[dict[str, Any]]:
    rows = []
    for o in outcomes:
        if o.skipped:
            continue
        for metric, value, unit in (("jobs", o.jobs, "jobs"), ("completed", o.completed, "jobs"),
                                    ("faults", o.faults, "faults"), ("lost", o.lost, "jobs"),
                                    ("double_accepted", o.double_accepted, "jobs"),
                                    ("refused_expected", o.refused_expected, "calls"),
                                    ("refused_unexpected", o.refused_unexpected, "calls"),
                                    ("unanswered", o.unanswered, "calls"),
                                    ("recovery", o.recovery_s, "s"), ("server_main_cpu", o.server_cpu, "share"),
                                    ("client_cpu", o.client_cpu, "cores"), ("passed", int(bool(o.passed)), "bool"),
                                    *call_log_rows(o.history)):
            rows.append({"server": o.server, "build": o.build, "scenario": o.scenario,
                         "metric": metric, "value": value, "unit": unit})
    return rows

