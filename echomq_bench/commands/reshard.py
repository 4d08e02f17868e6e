"""`echomq-bench reshard`: move a queue's cluster slot between two masters
under load, key by key, and audit where every job went.

The run itself (the cluster, the load, the moves, the audit and the call-log
check) is `echomq_bench.faults.reshard`, its verdict and record
`echomq_bench.faults.reshard_result`; this module holds the command's
arguments, writes the record and prints it as the report renders it.
"""

from __future__ import annotations

import argparse
import sys

from echomq_bench.faults.reshard import BACKLOG, reshard_spec, run_reshard
from echomq_bench.faults.reshard_result import reshard_record

__all__ = ["configure", "run"]


# --------------------------------------------------------------------------
# CLI


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Move a queue's slot between two masters of a local cluster, key by key, under a small load; "
        "audit every job. --server redis|valkey means their cluster."
    )
    from echomq_bench.options import add_out, duration_s

    parser.add_argument("--queues", type=int, default=3, metavar="N", help="queues spread over the masters (default 3)")
    parser.add_argument("--claim-rate", type=float, default=300.0, metavar="CLAIMS_PER_S",
                        help="claims/s over all queues, by two consumers; the producer keeps a backlog "
                             f"of {BACKLOG} per queue (default 300)")
    parser.add_argument("--moving", type=duration_s, default=3.0, metavar="DURATION",
                        help="how long to keep moving queue 0's slot back and forth, e.g. 3s (default 3s)")
    add_out(parser, "results/<time>-reshard")


def run(args: argparse.Namespace) -> int:
    from echomq_bench.records import meta
    from echomq_bench.records.files import new_run_dir
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    if not 1 <= args.queues <= 1000 or not 1 <= args.claim_rate <= 100_000 or not 0 < args.moving <= 3600:
        print("echomq-bench reshard: error: --queues 1..1000, --claim-rate 1..100000, --moving above 0 and at "
              "most 1h", file=sys.stderr)
        return 2
    specs = [reshard_spec(s) for s in args.server]  # refuses a URL before anything starts
    out = new_run_dir("reshard", args.out)
    results = [run_reshard(spec, queues=args.queues, claim_rate=args.claim_rate, moving_s=args.moving,
                           log=lambda text: print(text, file=sys.stderr, flush=True),
                           call_log_dir=out / "history" / spec.name)  # the folder name older runs have
               for spec in specs]
    info = meta.collect([], queues=args.queues, claim_rate=args.claim_rate, moving_s=args.moving,
                        specs=[str(s) for s in specs])
    write_record(out, reshard_record(results, info))
    print(record_text(out))
    print(f"results: {out}")
    return 0 if all(r.passed for r in results) else 1
