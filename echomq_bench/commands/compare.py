"""Is build B faster than build A? Trials on fresh servers, with confidence intervals.

How the builds share a trial (`--interleave`) and how the ratios are read is
`echomq_bench.capacity.compare`, the files it writes
`echomq_bench.capacity.compare_files`; this module holds the command's
arguments, and what it prints is its record, through the report's renderer.
With `--slo TARGET`, each build's highest rate at that latency target is then
searched `--slo-trials` times on fresh servers (`echomq_bench.capacity.slo`),
and its ratio to the baseline's rate is a second headline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from echomq._instrument import discover
from echomq_bench.capacity.compare import (DEFAULT_TRIALS, INTERLEAVE, INTERLEAVE_TEXT, PAIR_BY, PRECISION_CAP,
                                           SHARED_CORE_PIPELINE, Build, Judging, run_compare, unique_builds)
from echomq_bench.capacity.compare_files import write_compare
from echomq_bench.measurement.verdicts import MARGIN, MIN_TRIALS
from echomq_bench.capacity.runner import SLOT_S
from echomq_bench.capacity.settings import refuse_clusters
from echomq_bench.capacity.slo import run_slo, slo_refusal
from echomq_bench.capacity.slo_spec import DEFAULT_RESOLUTION
from echomq_bench.capacity.workload import add_workload_options, settings_from_args
from echomq_bench.options import add_quick, duration_s, fraction, number
from echomq_bench.progress import Progress

__all__ = ["configure", "run", "scripts_option"]

QUICK_TRIALS = 2
DEFAULT_DURATION_S = 5.0
# Ranking builds by their SLO rate needs only the rate a probe holds half the time, one probe per
# rate; the 95% rate to plan at costs about 8 times the probes (`capacity --slo`, docs/design/slo.md).
RANKING_HELD = 0.5


# --------------------------------------------------------------------------
# Command line


def scripts_option(text: str) -> tuple[str, Path]:
    name, sep, folder = text.partition("=")
    if not sep or not name.strip() or not folder.strip():
        raise argparse.ArgumentTypeError(f"--scripts {text!r}: want NAME=DIR, e.g. slow=/tmp/lua-slow")
    path = Path(folder.strip()).expanduser()
    try:
        discover(path)
    except (OSError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"--scripts {text!r}: {exc}") from None
    return name.strip(), path.resolve()


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("--trials", type=number(int, 2), default=None, metavar="N",
                        help=f"trials per build, interleaved (default {DEFAULT_TRIALS}; {QUICK_TRIALS} with --quick, "
                             f"which is too few for a verdict; with --precision the most to run, default "
                             f"{PRECISION_CAP}); fewer than {MIN_TRIALS} counted trials give 'inconclusive'")
    parser.add_argument("--precision", type=fraction, default=None, metavar="FRACTION",
                        help="adaptive: stop once the server µs/cycle ratio's 95%% interval is within ±FRACTION "
                             "(e.g. 1%%) for every build, or at --trials")
    parser.add_argument("--margin", type=fraction, default=MARGIN, metavar="FRACTION",
                        help=f"equivalence margin: 'equivalent' only when two one-sided tests put the ratio within "
                             f"±FRACTION (default {MARGIN * 100:g}%%)")
    parser.add_argument("--scripts", action="append", type=scripts_option, default=[], metavar="NAME=DIR",
                        help="run build NAME with the Lua scripts in DIR (repeatable)")
    parser.add_argument("--interleave", choices=INTERLEAVE, default="together",
                        help="together: all builds at once on one core (default); slot: in turns of --slot "
                             "each; trial: one whole run per build, A B A B")
    parser.add_argument("--pair-by", choices=list(PAIR_BY), default="first",
                        help="first: every build's ratio is against the first --server (default); allocator: "
                             "against the first --server of its own allocator, so that a ratio is a version's alone")
    parser.add_argument("--slot", type=duration_s, default=SLOT_S, metavar="DURATION",
                        help=f"turn length with --interleave slot (default {SLOT_S:g}s)")
    add_workload_options(parser, duration_default=f"{DEFAULT_DURATION_S:g}s", pipeline_default=SHARED_CORE_PIPELINE)
    add_quick(parser, f"{QUICK_TRIALS} trials of a 2s window after 0.5s of warm-up, a 20,000-claim ceiling "
                      "(flags given still win)")
    from echomq_bench.capacity.slo_spec import add_slo_options

    add_slo_options(parser, MIN_TRIALS, "after the trials, each build's rate with its interval and its ratio "
                                        "to the baseline's, paired by repetition, as a second headline",
                    held=RANKING_HELD)


def run(args: argparse.Namespace) -> int:
    from echomq_bench.records.files import new_run_dir

    refuse_clusters(args.server)
    specs = unique_builds(args.server)
    folders = dict(args.scripts)
    unknown = sorted(set(folders) - {s.name for s in specs})
    if unknown:
        print(f"echomq-bench compare: error: --scripts names {', '.join(unknown)}, which is no build; builds are "
              f"{', '.join(s.name for s in specs)}", file=sys.stderr)
        return 2
    args.trials = args.trials or (QUICK_TRIALS if args.quick else PRECISION_CAP if args.precision else DEFAULT_TRIALS)
    if args.trials < 2 or len(specs) < 2:
        print("echomq-bench compare: error: give at least two --server builds and --trials 2 or more",
              file=sys.stderr)
        return 2
    refused = slo_refusal(args)
    if refused:
        print(f"echomq-bench compare: error: {refused}", file=sys.stderr)
        return 2
    settings = settings_from_args(args, duration_s=DEFAULT_DURATION_S)
    builds = [Build(s, folders.get(s.name)) for s in specs]
    for b in builds:
        if b.spec.kind == "url":
            print(f"note: {b.name} is a running server, not started fresh for each trial", file=sys.stderr)
    progress = Progress()
    result = run_compare(builds, settings, args.trials, interleave=args.interleave, slot_s=args.slot,
                         progress=progress, judging=Judging(args.margin, args.precision, args.pair_by))
    slo = None
    if args.slo is not None:
        slo = run_slo(builds, settings, args.slo, args.slo_trials or MIN_TRIALS,
                      resolution=args.slo_resolution or DEFAULT_RESOLUTION, held=args.slo_held or RANKING_HELD,
                      progress=progress, log=progress.end)
    progress.done()
    out = write_compare(new_run_dir("compare", args.out), result, slo=slo)
    from echomq_bench.report import record_text

    print(record_text(out))
    print(f"{len(result.of(result.baseline))} trials per build: {INTERLEAVE_TEXT[args.interleave]}; "
          f"{result.trials[0].result.pinning}")
    print(f"results: {out}")
    return 0
