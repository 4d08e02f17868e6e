"""`echomq-bench failover`: kill a cluster master under load and audit where every job went.

The run itself (the cluster, the load, the kill, the audit and the call-log
check) is `echomq_bench.faults.failover`, its record
`echomq_bench.faults.failover_result`; this module holds the command's
arguments, writes the record and prints it as the report renders it.
"""

from __future__ import annotations

import argparse
import sys

from echomq_bench.faults.failover import failover_spec, run_failover
from echomq_bench.faults.failover_result import failover_record
from echomq_bench.records.files import write_record

__all__ = ["configure", "run"]

LOAD_S = 2.0  # load before the kill and after recovery
QUICK_LOAD_S = 0.5


# --------------------------------------------------------------------------
# CLI


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Kill a master of a local cluster (one replica per master) under a small load; "
        "report the failover time and the audit of every job. --server redis|valkey means their cluster."
    )
    from echomq_bench.options import add_out, add_quick, duration_s

    parser.add_argument("--queues", type=int, default=3, metavar="N", help="queues spread over the masters (default 3)")
    parser.add_argument("--rate", type=float, default=300.0, metavar="JOBS_PER_S",
                        help="jobs/s offered over all queues, by one producer (default 300)")
    parser.add_argument("--before", type=duration_s, default=None, metavar="DURATION",
                        help=f"load before the kill, e.g. 2s (default {LOAD_S:g}s; {QUICK_LOAD_S:g}s with --quick)")
    parser.add_argument("--after", type=duration_s, default=None, metavar="DURATION",
                        help=f"load after recovery, e.g. 2s (default {LOAD_S:g}s; {QUICK_LOAD_S:g}s with --quick)")
    add_quick(parser, f"{QUICK_LOAD_S:g}s of load before the kill and after recovery (the failover itself "
                      "takes what it takes)")
    add_out(parser, "results/<time>-failover")


def run(args: argparse.Namespace) -> int:
    from echomq_bench.records import meta
    from echomq_bench.records.files import new_run_dir
    from echomq_bench.report import record_text

    load_s = QUICK_LOAD_S if args.quick else LOAD_S
    args.before = load_s if args.before is None else args.before
    args.after = load_s if args.after is None else args.after
    if not 1 <= args.queues <= 1000 or not 1 <= args.rate <= 100_000 or args.before < 0 or args.after < 0:
        print("echomq-bench failover: error: --queues 1..1000, --rate 1..100000, --before/--after >= 0",
              file=sys.stderr)
        return 2
    specs = [failover_spec(s) for s in args.server]  # refuses a URL before anything starts
    out = new_run_dir("failover", args.out)
    results = []
    for spec in specs:
        result = run_failover(spec, queues=args.queues, rate=args.rate, before_s=args.before,
                              after_s=args.after, log=lambda text: print(text, file=sys.stderr, flush=True),
                              call_log_dir=out / "history" / spec.name)  # the folder name older runs have
        results.append(result)
    info = meta.collect([], queues=args.queues, rate=args.rate, before_s=args.before, after_s=args.after,
                        specs=[str(s) for s in specs])
    write_record(out, failover_record(results, info))
    print(record_text(out))
    print(f"results: {out}")
    return 0 if all(r.passed for r in results) else 1
