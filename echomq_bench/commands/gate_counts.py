"""`echomq-bench gate` (`--count instructions`, the default): fail when a verb
got costlier in instructions than the baseline of the same server binary.

Each build's server runs under callgrind (echomq_bench.counts): every verb
from its prepared state, instructions per call and per server command the
script called. A baseline belongs to a binary (and its C library), not to a
machine: `--update` counts 10 fresh servers (`--passes`) and writes
results/baselines/counts/count-<product>-<key>.json; any machine with that
binary judges against it. The unit of replication is a fresh server
process: each baseline pass, the judged count and its confirmation run on
one of their own. The allowance per verb comes from that baseline's spread
(echomq_bench.counts.verdict); a verb over it is counted again on a fresh
server, and fails only if it is over it again. Then, unless
`--no-seed-price`, the seed's scripts are counted on one more fresh server
per build and printed beside the project's (counts.seed_price): a lens that
never fails the gate.

Exit codes: 0 pass; 1 a verb costlier (named, with the part that grew);
2 bad input, no valgrind or no baseline for this binary.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["run_counts", "problem"]

# The timing gate's options, and why they have no meaning here.
TIMING_ONLY = {"tolerance": "the allowance comes from the baseline's spread",
               "ab_tolerance": "instructions need no interleaved A/B: a changed script is counted as it is",
               "rounds": "a count is one window per verb",
               "quick": "the default run is already under a minute per build"}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def problem(args: argparse.Namespace) -> str | None:
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


def run_counts(args: argparse.Namespace) -> int:
    from echomq_bench.counts.baseline import PASSES
    from echomq_bench.counts.gate import CountGateOptions, count_gate, counts_record
    from echomq_bench.progress import Progress, prefixed
    from echomq_bench.records import files as results, meta
    from echomq_bench.report import record_text

    why = problem(args) or _missing_baseline(args)
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
