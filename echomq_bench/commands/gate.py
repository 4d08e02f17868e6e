"""`echomq-bench gate`: fail when a verb got costlier than the committed baseline, in instructions or in time.

Two routes. The default, `--count instructions`, counts each verb's
instructions per call under callgrind against the baseline of the same
server binary: deterministic, so it holds on any machine that runs that
binary, and the route a user's CI runs. `--count time` judges server time
against a baseline recorded on the same machine fingerprint; it sees what
counts miss (memory, the allocator, I/O). Both replicate on fresh server
processes: a baseline pools passes on fresh servers, and a flagged verb is
measured again on another.

The count route (echomq_bench.counts): each build's server runs under
callgrind, every verb from its prepared state, instructions per call and
per server command the script called. A baseline belongs to a binary (and
its C library), not to a machine: `--update` counts 10 fresh servers
(`--passes`) and writes results/baselines/counts/count-<product>-<key>.json;
any machine with that binary judges against it. The allowance per verb
comes from that baseline's spread (echomq_bench.counts.verdict); a verb over
it is counted again on a fresh server, and fails only if it is over it
again. Then, unless `--no-seed-price`, the seed's scripts are counted on one
more fresh server per build and printed beside the project's
(counts.seed_price): a lens that never fails the gate. Its exit codes: 0
pass; 1 a verb costlier (named, with the part that grew); 2 bad input, no
valgrind or no baseline for this binary.

The timing route's two checks per verb, both on the server's own clock
(commandstats):

1. normalised: the verb's server time over a reference script's, measured
   call by call in the same batches (echomq_bench.microbench.runner), against the same
   ratio in the baseline. A machine that is slower today slows both alike.
   Allowed change: --tolerance, widened to 3 standard errors of the two
   measurements when the machine is noisier than that.
2. script A/B: when a verb's script differs from the one the baseline was
   measured with (the baseline keeps every script's text), the baseline's
   script runs too, interleaved call by call with the current one on the
   same state, and the gate reads their ratio directly. Noise from the
   neighbours hits both alike, so this check can be tight (--ab-tolerance).

The normalised check is a cross-run figure: it counts only when the
baseline's machine fingerprint (CPU model and flags, cores, server version,
allocator) is this machine's, and is advisory otherwise. `--update` writes
the baseline, `--passes` passes each on a fresh server process (default
10), into a subfolder named by the fingerprint, so one baseline folder
serves several machines. A verb missing from the baseline fails. When any
verb is flagged the whole case set is measured once more, on a fresh server
process; only a verb flagged twice is a regression. `--baseline history`
reads the baseline from the results history instead: the newest gate run of each build on this
machine fingerprint that wrote a baseline or named no regression
(docs/guide/history.md).

The timing route's exit codes: 0 pass; 1 a regression (named); 2 bad
input or no baseline; 3 inconclusive: a check that counts had noise (3
standard errors) above its tolerance, so it could neither pass nor fail.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

from echomq_bench.microbench.baseline import (MIN_UPDATE_PASSES, UPDATE_PASSES, BaselineError, baseline_path,
                                              load_baseline)
from echomq_bench.microbench.cases import CASES
from echomq_bench.microbench.history_baseline import HISTORY, UPDATE_WITH_HISTORY, missing_from_history
from echomq_bench.microbench.gate import DEFAULT_AB_TOLERANCE, DEFAULT_TOLERANCE, GateOptions, GateResult, gate_one
from echomq_bench.records.kinds.gate import GateRecord
from echomq_bench.records.record import Record

# The comparison is echomq_bench.microbench.gate, the baselines echomq_bench.microbench.baseline;
# numpy (microbench) and pandas (results) load when a gate runs, not when
# the CLI builds its parser for another command.

__all__ = ["configure", "run", "run_gate", "gate_record"]

# Frozen, so one shared default is safe.
_DEFAULT_OPTIONS = GateOptions()


def run_gate(servers: Iterable[Any], options: GateOptions = _DEFAULT_OPTIONS, *,
             out_dir: Path | str | None = None) -> list[GateResult]:
    """gate_one on each server; writes results/<run-id>/ (meta, tidy CSV, summary)."""
    from echomq_bench.records import meta, files as results
    from echomq_bench.microbench.runner import FULL

    servers = list(servers)
    found = [gate_one(s, options) for s in servers]
    run_dir = results.new_run_dir("gate", out_dir)
    settings = options.settings or FULL
    info = meta.collect(servers, gate={
        "baseline": [str(r.baseline) for r in found], "update": options.update,
        "tolerance": options.tolerance,
        "ab_tolerance": options.ab_tolerance,
        "rounds": settings.rounds, "calls": settings.calls, "heavy_calls": settings.heavy_calls,
        "sizes": vars(settings.sizes), "lua_dir": [r.measurement.lua_dir for r in found],
        **({"passes": options.passes} if options.update else {})})
    results.write_record(run_dir, gate_record(found, info))
    return [replace(r, run_dir=run_dir) for r in found]


def gate_record(found: list[GateResult], info: dict[str, Any]) -> Record:
    """The gate run as it is written: each build's verdicts, figures and baseline in summary.json, the
    batches in microbench.csv and the scripts measured in scripts.csv."""
    rows = [row for r in found for row in r.measurement.tidy_rows()]
    return Record(kind="gate", meta=info,
                  tables={"microbench": rows, "scripts": [row for r in found for row in r.script_rows()]},
                  summary=GateRecord(passed=not any(r.regressions for r in found),
                                     builds=tuple(r.entry() for r in found)).to_record())


# -- CLI -----------------------------------------------------------------------------------


def _baseline_arg(text: str) -> Path | str:
    """A path, or the word `history` for the results history (a folder of that name is `./history`)."""
    return HISTORY if text == HISTORY else Path(text)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < 10:
        raise argparse.ArgumentTypeError(f"want a fraction such as 0.2 (20%), got {text}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    from echomq_bench.options import add_list, add_out, add_quick, choice, number

    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("--baseline", type=_baseline_arg, default=None, metavar="PATH",
                        help="the baselines folder (default: results/baselines; counts/count-<product>-<key>.json "
                             "for instructions, gate-<build>.json for time), one .json file used for every build, "
                             "or, with --count time, `history`: the newest gate run of the build on this machine "
                             "fingerprint in the results history that wrote a baseline or named no regression")
    parser.add_argument("--update", action="store_true", help="measure and write the baseline(s); exits 0")
    add_quick(parser, "with --count time, 8 rounds and fewer calls; wider allowances")
    parser.add_argument("--count", choices=("instructions", "time"), default="instructions",
                        help="instructions (the default): instructions per call under callgrind against the baseline "
                             "of the same server binary, on any machine (needs valgrind); time: server time against "
                             "the reference scripts, against a baseline of this machine fingerprint (sees memory, "
                             "allocator and I/O; --quick, --rounds, --tolerance, --ab-tolerance and --baseline "
                             "history are its flags) (docs/guide/gate.md)")
    parser.add_argument("--passes", type=number(int, MIN_UPDATE_PASSES), default=None, metavar="N",
                        help=f"with --update: fresh server processes the baseline pools, one pass each (default "
                             f"{UPDATE_PASSES})")
    parser.add_argument("--tolerance", type=_fraction, default=None,
                        metavar="FRACTION",
                        help=f"with --count time: allowed slowdown of the normalised figure, 0.2 = 20%% (default "
                             f"{DEFAULT_TOLERANCE})")
    parser.add_argument("--ab-tolerance", type=_fraction, default=None, metavar="FRACTION",
                        help=f"with --count time: allowed slowdown against the baseline's script, interleaved "
                             f"(default {DEFAULT_AB_TOLERANCE})")
    parser.add_argument("--rounds", type=number(int, 1), default=None, metavar="N",
                        help="with --count time: rounds (default 20, quick 8)")
    add_list(parser, "--verbs", choice(list(CASES), "verb"), metavar="VERB", help="only these verbs (default all)")
    parser.add_argument("--no-confirm", action="store_true", help="do not re-measure flagged verbs")
    parser.add_argument("--no-seed-price", action="store_true",
                        help="with --count instructions: do not count the seed's scripts beside the project's (the "
                             "seed's price: each of enqueue, claim and complete, project over seed; judged against "
                             "nothing)")
    add_out(parser)


def _update_problem(args: argparse.Namespace) -> str | None:
    """What stops the timing route's --passes or --update before any server starts, or None."""
    from echomq_bench.microbench.fresh import UNSTARTABLE

    if args.passes is not None and not args.update:
        return "--passes sets how many fresh server processes --update pools; add --update or drop it"
    reached = [s.name for s in args.server if s.kind != "embedded"] if args.update else []
    return UNSTARTABLE.format(name=", ".join(reached)) if reached else None


def _history_problem(args: argparse.Namespace) -> str | None:
    """What stops `--baseline history` before any server starts, or None."""
    if args.update:
        return UPDATE_WITH_HISTORY
    return missing_from_history([spec.name for spec in args.server])


def _file_problem(args: argparse.Namespace) -> str | None:
    """A baseline file that is missing or unreadable, or None."""
    if args.update:
        return None
    for spec in args.server:
        path = baseline_path(args.baseline, spec.name)
        if not path.is_file() and any(path.parent.glob(f"*/{path.name}")):
            continue  # baselines per machine fingerprint: which one applies is known once the server runs
        try:
            load_baseline(path)
        except BaselineError as exc:
            return str(exc)
    return None


# -- The count route (--count instructions) ------------------------------------------------


# The timing gate's options, and why they have no meaning here.
TIMING_ONLY = {"tolerance": "the allowance comes from the baseline's spread",
               "ab_tolerance": "instructions need no interleaved A/B: a changed script is counted as it is",
               "rounds": "a count is one window per verb",
               "quick": "the default run is already under a minute per build"}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _count_problem(args: argparse.Namespace) -> str | None:
    """What stops the count gate before any server starts, or None."""
    from echomq_bench.counts.callgrind import CallgrindError, valgrind_version
    from echomq_bench.counts.measure import COUNTED
    from echomq_bench.microbench.history_baseline import HISTORY

    for name, why in TIMING_ONLY.items():
        if getattr(args, name, None) not in (None, False):
            return f"{_flag(name)} is the timing gate's (--count time): with --count instructions {why}"
    if args.baseline == HISTORY:
        return ("--baseline history reads timing gates (--count time); a count baseline belongs to a server "
                "binary: give a folder (default results/baselines) or a .json")
    if args.passes is not None and not args.update:
        return "--passes sets how many fresh servers --update pools; add --update or drop it"
    uncounted = [v for v in args.verbs or () if v not in COUNTED]
    if uncounted:
        return f"{', '.join(uncounted)} runs no script; instruction counts cover {', '.join(COUNTED)}"
    started_elsewhere = [s.name for s in args.server if s.kind != "embedded"]
    if started_elsewhere:
        return (f"{', '.join(started_elsewhere)}: instruction counts run the server under callgrind, so it must be "
                f"a build or a binary this command starts, not a server it only reaches")
    try:
        valgrind_version()
    except CallgrindError as exc:
        return str(exc)
    return None


def _missing_baseline(args: argparse.Namespace) -> str | None:
    """A build with no count baseline for its binary, said with why, or None."""
    from echomq_bench.counts.baseline import CountBaselineError, count_baseline_path, load_count_baseline
    from echomq_bench.counts.identity import binary_identity
    from echomq_bench.servers.embedded import spec_binary

    if args.update:
        return None
    for spec in args.server:
        binary = binary_identity(spec_binary(spec))
        try:
            load_count_baseline(count_baseline_path(args.baseline, binary), binary)
        except CountBaselineError as exc:
            return f"{spec.name}: {exc}"
    return None


def _run_counts(args: argparse.Namespace) -> int:
    """The count route: count each build, write its record (kind "counts") and print it."""
    from echomq_bench.counts.baseline import PASSES
    from echomq_bench.counts.gate import CountGateOptions, count_gate, counts_record
    from echomq_bench.progress import Progress, prefixed
    from echomq_bench.records import files as results, meta
    from echomq_bench.report import record_text

    why = _count_problem(args) or _missing_baseline(args)
    if why:
        print(f"echomq-bench gate: error: {why}", file=sys.stderr)
        return 2
    options = CountGateOptions(baseline=args.baseline, update=args.update, passes=args.passes or PASSES,
                               verbs=args.verbs, confirm=not args.no_confirm, seed_price=not args.no_seed_price)
    progress = Progress(label="gate --count instructions")
    found: list[Any] = []
    for spec in args.server:
        found.append(count_gate(spec, options, progress=prefixed(progress, spec.name)))
    progress.done()
    run_dir = results.new_run_dir("counts", args.out)
    info = meta.collect([], count={"update": args.update, "passes": options.passes,
                                   "builds": [str(s) for s in args.server], "seed_price": options.seed_price})
    # The servers ran under callgrind and are gone: what each record needs of them is its binary.
    info["servers"] = [{"name": r.build, "spec": r.build, "version": r.binary.version, "binary": r.binary.path}
                       for r in found]
    results.write_record(run_dir, counts_record(found, info))
    print(record_text(run_dir))
    print(f"results: {run_dir}")
    bad = [f"{r.build}:{v.verb} " + ("(missing from the baseline)" if v.missing else
                                     f"(+{v.change * 100:.1f}%, {v.named()})")
           for r in found for v in r.verdicts if v.regressed]
    if bad and not args.update:
        print(f"FAIL: costlier in instructions: {', '.join(bad)}")
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    from echomq_bench.microbench.runner import FULL, QUICK
    from echomq_bench.servers import running

    if args.count == "instructions":
        return _run_counts(args)
    why = _update_problem(args)
    if args.no_seed_price:
        why = "--no-seed-price is the count gate's (--count instructions): the timing gate counts no seed's scripts"
    if why:
        print(f"echomq-bench gate: error: {why}", file=sys.stderr)
        return 2
    tolerance = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    ab_tolerance = DEFAULT_AB_TOLERANCE if args.ab_tolerance is None else args.ab_tolerance
    settings = QUICK if args.quick else FULL
    if args.rounds:
        settings = replace(settings, rounds=args.rounds)
    problem = _history_problem(args) if args.baseline == HISTORY else _file_problem(args)
    if problem:  # before starting anything
        print(f"echomq-bench gate: error: {problem}", file=sys.stderr)
        return 2
    try:
        with running(*args.server) as servers:
            found = run_gate(servers, GateOptions(baseline=args.baseline, settings=settings,
                                                  tolerance=tolerance, ab_tolerance=ab_tolerance,
                                                  update=args.update, cases=args.verbs, confirm=not args.no_confirm,
                                                  passes=args.passes or UPDATE_PASSES),
                             out_dir=args.out)
    except BaselineError as exc:  # the history's baseline of a fingerprint, known once the server runs
        print(f"echomq-bench gate: error: {exc}", file=sys.stderr)
        return 2
    run_dir = found[0].run_dir
    if run_dir:
        from echomq_bench.report import record_text

        print(record_text(run_dir))
        print(f"results: {run_dir}")
    bad = [f"{r.build}:{c}" for r in found for c in r.regressions]
    unsure = [f"{r.build}:{c}" for r in found for c in r.inconclusive]
    if bad and not args.update:
        print(f"FAIL: regressed: {', '.join(bad)}")
        return 1
    if unsure and not args.update:
        print(f"INCONCLUSIVE: noise above tolerance: {', '.join(unsure)}")
        return 3
    return 0
