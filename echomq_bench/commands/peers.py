"""Run the same no-op jobs through echomq and the peer queues on the same server, in each mode.

One trial is `echomq_bench.peers.runner`, the interleaved rounds
`echomq_bench.peers.rounds`; the typed record and tables are `echomq_bench.peers.summary`.
The terminal shows the record written, as the report renders it
(`echomq_bench.report.kinds.peers`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from echomq_bench.records import meta as meta_mod
from echomq_bench.records import files as results
from echomq_bench.measurement.verdicts import MIN_TRIALS
from echomq_bench.peers import BASELINE, MODES, PEERS, get
from echomq_bench.peers.base import PAYLOAD_BYTES, PeerMissingError, version_of
from echomq_bench.peers.rounds import HEADLINE, PeersSettings, check_empty, choose_queues, remove_tree, run_rounds
from echomq_bench.peers.runner import MAX_CONSUMERS, MAX_JOBS
from echomq_bench.peers.summary import build_record, command_rows, ratio_rows, tidy_rows

__all__ = ["configure", "run"]

DEFAULT_JOBS = 2_000
QUICK_JOBS = 1_000
# The verdict method's minimum: fewer trials give every ratio "inconclusive".
DEFAULT_TRIALS = MIN_TRIALS
# The headline ratio (echomq against bullmq-node) is sized to ±5% on its own
# rounds, within the run's 15 minutes: every queue in both modes at the default
# jobs takes about two thirds of that here, and each headline round about 10 s.
DEFAULT_PRECISION = 0.05
DEFAULT_MAX_TRIALS = 40
DEFAULT_BUDGET_S = 15 * 60.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Enqueue N no-op jobs (64-byte payload) with one producer, then drain them with C consumer "
        "processes, through echomq, BullMQ (Node and Python), RQ, arq, Celery, Dramatiq, Huey, SAQ, streaQ and "
        "taskiq, each with its defaults and with its high-throughput settings, in turn on a fresh server each; report "
        "server CPU µs, script µs, commands and round trips per job, memory per pending job, jobs/s and "
        "client CPU µs per job, with confidence intervals and ratios to bullmq-node.")
    from echomq_bench.options import add_list, add_out, add_quick, choice, duration_s, fraction, number

    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help=f"jobs per queue and trial (default {DEFAULT_JOBS}; {QUICK_JOBS} with --quick)")
    parser.add_argument("--consumers", type=int, default=2, metavar="N",
                        help="consumer processes draining each queue (default 2)")
    parser.add_argument("--trials", type=int, default=DEFAULT_TRIALS, metavar="N",
                        help="rounds; each round runs every queue in every mode once, interleaved, each on a fresh "
                             f"server (default {DEFAULT_TRIALS}, the fewest the ratio verdicts judge)")
    add_list(parser, "--queue", choice(list(PEERS)), metavar="NAME",
             help=f"only these queues (default all: {', '.join(PEERS)}); a queue asked for by name whose package "
                  "is missing is an error, not a skip")
    add_list(parser, "--mode", choice(list(MODES)), metavar="MODE",
             help=f"only these modes (default all: {', '.join(MODES)}): the library's defaults, or its documented "
                  "high-throughput settings")
    parser.add_argument("--precision", type=fraction, default=DEFAULT_PRECISION, metavar="FRACTION",
                        help=f"after the rounds, run {HEADLINE} and {BASELINE} alone, round after round, until "
                             "each mode's ratio interval over these headline rounds alone is within ±FRACTION "
                             f"(default {DEFAULT_PRECISION:.0%}%; off with --quick), or --max-trials, or --budget")
    parser.add_argument("--max-trials", type=number(int, 1, 100), default=DEFAULT_MAX_TRIALS, metavar="N",
                        help=f"the most headline rounds, beyond the --trials rounds (default {DEFAULT_MAX_TRIALS})")
    parser.add_argument("--budget", type=duration_s, default=DEFAULT_BUDGET_S, metavar="DURATION",
                        help="start no headline round once the run has taken this long, e.g. 15m "
                             f"(default {DEFAULT_BUDGET_S / 60:g}m)")
    parser.add_argument("--timeout", type=duration_s, default=600.0, metavar="DURATION",
                        help="give up on a phase after this long, e.g. 90s, 10m (default 10m)")
    add_quick(parser, f"{QUICK_JOBS} jobs per queue and trial, no headline rounds")
    add_out(parser, "results/<utc-time>-peers")


def _bad(message: str) -> int:
    print(f"echomq-bench peers: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    if args.jobs is None:
        args.jobs = QUICK_JOBS if args.quick else DEFAULT_JOBS
    if not 1 <= args.jobs <= MAX_JOBS:
        return _bad(f"--jobs must be from 1 to {MAX_JOBS}, got {args.jobs}")
    if not 1 <= args.consumers <= MAX_CONSUMERS:
        return _bad(f"--consumers must be from 1 to {MAX_CONSUMERS}, got {args.consumers}")
    if not 1 <= args.trials <= 100:
        return _bad(f"--trials must be from 1 to 100, got {args.trials}")
    if not args.timeout > 0:
        return _bad(f"--timeout must be positive, got {args.timeout}")
    if not args.budget > 0:
        return _bad(f"--budget must be positive, got {args.budget}")
    try:
        names, skipped = choose_queues(args.queue or [])
    except PeerMissingError as exc:
        return _bad(str(exc))
    for name, why in skipped.items():
        print(f"note: skipping {name}: {why}", file=sys.stderr)
    if not names:
        return _bad("no queue left to run")

    for spec in args.server:
        if spec.kind == "url":
            problem = check_empty(spec)
            if problem:
                return _bad(problem)

    load_start = os.getloadavg()
    out = results.new_run_dir("peers", args.out)
    log_dir = Path(tempfile.mkdtemp(prefix="echomq-peers-logs-"))
    modes = tuple(dict.fromkeys(args.mode or MODES))
    settings = PeersSettings(jobs=args.jobs, consumers=args.consumers, trials=args.trials,
                             timeout_s=args.timeout, servers=tuple(args.server), modes=modes,
                             precision=None if args.quick else args.precision,
                             max_trials=args.max_trials, budget_s=args.budget)
    outcome = run_rounds(settings, names, log_dir)
    runs, failures, described = outcome.runs, outcome.failures, outcome.described
    skipped.update(outcome.skipped)

    record = build_record(runs, names, skipped, failures, settings)
    meta = meta_mod.collect(argv=sys.argv, kind="peers", jobs=args.jobs, consumers=args.consumers,
                            trials=args.trials, payload_bytes=PAYLOAD_BYTES, queues=names, modes=list(modes),
                            peer_packages={n: version_of(get(n).distribution) for n in PEERS})
    meta["servers"] = list(described.values())
    # Shared machines: what else was running says how far to trust the walls.
    meta["machine"]["loadavg_1_5_15_at_start"] = list(load_start)
    meta["machine"]["loadavg_1_5_15_at_end"] = list(os.getloadavg())
    results.write_record(out, results.Record(
        kind="peers", summary=record.to_record(), meta=meta,
        tables={"peers": tidy_rows(runs), "peers_commands": command_rows(runs), "peers_ratios": ratio_rows(record)}))
    from echomq_bench.report import record_text

    print(record_text(out))
    print(f"\nresults: {out}")
    if failures or any(not r.clean for r in runs):
        print(f"child logs kept in {log_dir}", file=sys.stderr)
        return 1
    remove_tree(log_dir)
    return 0
