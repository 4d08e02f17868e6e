"""`echomq-bench reapcost`: what one reap (or promote) call costs the server,
against the size of the set it scans and the cap on what it moves.

For an active set of M live leases plus k expired ones, one `reap(cap)`
call blocks the server for the time it takes to move min(k, cap) jobs: every
other client's command waits behind it, so this is the latency spike the
cap bounds. The scripts find the expired leases as the lowest deadlines
(ZRANGE BYSCORE LIMIT, ZREMRANGEBYRANK), so the cost should grow like
log M + k, not like M; `run_reap_curve` checks that with the ratio of one
reap of 100 at the largest M to the same call at the smallest.

The cap also sets how fast a mass crash drains: K orphans need ceil(K/cap)
calls, one per tick of the reaper's cadence. The drain is measured
back to back (the reaper's own limit) and computed for given cadences.

Promote (due retries from the schedule) runs the same curve.

Each curve is taken in two forms of the live entries: "bare", sorted-set
members with no job rows (a tiny keyspace, the best case), then "with job
rows", the same members each with the hash a real claimed (or scheduled)
job has, so the keyspace is that of a real queue. Both are reported side
by side.

Every point is one call's server time from INFO commandstats (the server's
own clock), the median of `repeats` calls, with the M sizes interleaved so
a drifting machine slows them alike.

The curve's data and measurement are `echomq_bench.reapcost`, the run on
each server and its record `echomq_bench.reapcost.run`; this module holds
the command's arguments.
What the terminal shows is the record, rendered as the report renders it
(`echomq_bench.report.kinds.reapcost`).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from echomq_bench.reapcost import FULL, QUICK, VERBS
from echomq_bench.reapcost.run import run_reap_curve

__all__ = ["configure", "run"]


# -- CLI -----------------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    from echomq_bench.options import add_list, add_out, add_quick, choice, number, whole_ms

    parser.description = __doc__.split("\n\n")[0]
    add_quick(parser, "M up to 1M in 3 steps, caps up to 1,000, 3 repeats")
    add_list(parser, "--sizes", number(int, 1), metavar="M", help="live entries M")
    add_list(parser, "--caps", number(int, 1), metavar="CAP", help="caps (at most 100000)")
    parser.add_argument("--repeats", type=int, default=None, metavar="N", help="calls per point (median)")
    parser.add_argument("--orphans", type=int, default=None, metavar="K", help="mass crash size to drain")
    add_list(parser, "--cadence", whole_ms, dest="cadence_ms", metavar="DURATION",
             help="reaper cadences for the computed drain, e.g. 100ms,1s")
    add_list(parser, "--verbs", choice(list(VERBS), "verb"), metavar="VERB", help="reap, promote (default both)")
    add_out(parser)


def run(args: argparse.Namespace) -> int:
    from echomq_bench.report import record_text
    from echomq_bench.servers import running

    settings = QUICK if args.quick else FULL
    changes: dict[str, Any] = {}
    for name, value in (("sizes", args.sizes), ("caps", args.caps), ("repeats", args.repeats),
                        ("orphans", args.orphans), ("cadences_ms", args.cadence_ms), ("verbs", args.verbs)):
        if value is not None:
            changes[name] = tuple(value) if isinstance(value, list) else value
    if args.caps and max(args.caps) > 100_000:
        print("echomq-bench reapcost: error: a cap is at most 100000 (the scripts' limit)", file=sys.stderr)
        return 2
    for name in ("repeats", "orphans"):
        if changes.get(name) is not None and changes[name] < 1:
            print(f"echomq-bench reapcost: error: --{name} must be at least 1", file=sys.stderr)
            return 2
    settings = replace(settings, **changes)
    if settings.ratio_cap not in settings.caps:
        settings = replace(settings, ratio_cap=min(settings.caps, key=lambda c: abs(c - 100)))
    with running(*args.server) as servers:
        run_dir = run_reap_curve(servers, quick=args.quick, out_dir=args.out, settings=settings)
    print(record_text(run_dir))
    print(f"results: {run_dir}")
    return 0
