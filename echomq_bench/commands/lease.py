"""Size the lease: sweep leases on a real server, model them, recommend one.

    echomq-bench lease --work "lognormal:median=200ms,p99=1s" --leases 250ms,500ms,1s,2s,4s
    echomq-bench lease --work-from results/<run>/ --time-scale 60 --recovery-tolerance 5m
    echomq-bench lease --quick --server redis

Each lease runs on its own queue in its own process, all at once: consumers
claim, sleep a drawn work time and complete, or crash at --crash-rate; a
pump reaps every --reap-every. The report gives, per lease, the false-expiry
rate, duplicates and wasted work, the recovery latency after a crash, the
throughput and the reap cost, each with a 95% interval, and the model's
value beside it; then the smallest lease whose overruns' 95% upper bound is
within --budget and whose p99 recovery's (at scale 1) fits
--recovery-tolerance, or the leases at the edge of either and what would
decide them. Results go to results/<run-id>/ (or --out).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, replace
from typing import Any

from echomq_bench.measurement.workdist import DistError
from echomq_bench.options import (DurationError, add_list, add_out, add_quick, duration_ms, duration_s,
                                  parse_duration_ms, work_dist)
from echomq_bench.lease.settings import QUICK
from echomq_bench.lease.sweep import DEFAULT_WORK, SettingsError, SweepSettings
from echomq_bench.progress import Progress

__all__ = ["configure", "run", "settings_from_args"]

# The quick form the main job calls: ~35 s per server.


def _budget(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad budget {text!r}: want a share like 0.1% or 0.001") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"budget {text!r} must be between 0 and 100%")
    return value


def _lease(text: str) -> float | None:
    """One lease in ms, or None for 'auto'."""
    if text == "auto":
        return None
    try:
        ms = parse_duration_ms(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if ms <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration")
    return ms


def _work_from(text: str) -> str:
    return work_dist(f"empirical:{text}")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.strip().splitlines()[0]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "\n".join(__doc__.strip().splitlines()[1:])
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--work", type=work_dist, metavar="DIST",
                     help=f"work-time distribution, nominal (default {DEFAULT_WORK})")
    src.add_argument("--work-from", type=_work_from, metavar="FILE",
                     help="measured work times: a CSV, an .hdr/.hgrm histogram, or an earlier run's folder")
    add_list(parser, "--leases", _lease, metavar="DURATION",
             help="leases to sweep, e.g. 250ms,500ms,1s,2s,4s (default: auto, at the work's quantiles)")
    parser.add_argument("--crash-rate", type=float, default=None, metavar="FRACTION",
                        help="share of executions that crash (0.06)")
    parser.add_argument("--reap-every", type=duration_ms, default=250.0, metavar="DURATION",
                        help="reap interval, nominal (250ms)")
    parser.add_argument("--reap-cap", type=int, default=100, metavar="JOBS",
                        help="jobs per reap call (the product's 100)")
    parser.add_argument("--consumers", type=int, default=32, metavar="N", help="consumers per lease (32)")
    parser.add_argument("--time-scale", type=float, default=None, metavar="FACTOR",
                        help="run every nominal duration FACTOR times faster (1; 10 with --quick)")
    parser.add_argument("--budget", type=_budget, default=0.001, metavar="FRACTION",
                        help="false-expiry budget (0.1%%)")
    parser.add_argument("--recovery-tolerance", type=duration_ms, default=3000.0, metavar="DURATION",
                        help="the longest p99 wait of a crashed job you accept, nominal (3s)")
    parser.add_argument("--duration", type=duration_s, default=None, metavar="DURATION",
                        help="real time of the counted window per server, e.g. 60s, 2m (60s; 12s with --quick)")
    parser.add_argument("--mass-crash", type=int, default=1000, metavar="K",
                        help="jobs in the mass-crash drain test (1000; 0 skips it)")
    parser.add_argument("--seed", type=int, default=1, metavar="N", help="seed for the work times and the crashes")
    add_quick(parser, "a 12s window at time scale 10, one mass-crash drain (~35 s per server)")
    parser.add_argument("--check", action="store_true",
                        help="then run the recommended lease again, separately, and say whether it holds")
    add_out(parser)


def settings_from_args(args: argparse.Namespace) -> SweepSettings:
    work = args.work_from or args.work or DEFAULT_WORK
    extra: dict[str, Any] = dict(QUICK) if args.quick else {}
    # A flag given wins over the quick form's value; one left out keeps it (or the settings' default).
    given = {"duration_s": args.duration, "crash_rate": args.crash_rate, "time_scale": args.time_scale}
    extra.update({k: v for k, v in given.items() if v is not None})
    leases = tuple(sorted(ms for ms in args.leases or () if ms is not None))  # none given, or auto: auto
    settings = SweepSettings(
        work=work, leases_ms=leases, reap_every_ms=args.reap_every, reap_cap=args.reap_cap,
        consumers=args.consumers, budget=args.budget, recovery_tolerance_ms=args.recovery_tolerance,
        mass_crash=args.mass_crash, seed=args.seed, **extra)
    settings.check()
    return settings


def run(args: argparse.Namespace) -> int:
    from echomq_bench.records import meta
    from echomq_bench.records.files import new_run_dir
    from echomq_bench.report import record_text
    from echomq_bench.servers import running
    from echomq_bench.lease import run_sweep
    from echomq_bench.lease.report import recommend_for, verification_text, write_run

    try:
        settings = settings_from_args(args)
    except (SettingsError, DistError) as exc:
        print(f"echomq-bench lease: error: {exc}", file=sys.stderr)
        return 2
    progress = Progress()
    results, recs, checks = [], [], []
    with running(*args.server) as servers:
        for i, server in enumerate(servers):
            print(f"== {server.name}: {server.version()} ==", flush=True)
            # Each server draws its own work times and crashes, so two
            # servers' results are independent samples, not the same draws twice.
            res = run_sweep(server, replace(settings, seed=settings.seed + i), progress=progress)
            progress.done()
            rec = recommend_for(res)
            check = None
            if args.check and rec.lease_ms is not None:
                chk = run_sweep(server, replace(settings, mass_crash_reps=0, seed=settings.seed + 100 + i),
                                progress=progress, leases_ms=(rec.lease_ms,))
                progress.done()
                check = verification_text(rec, chk, res)
            results.append(res)
            recs.append(rec)
            checks.append(check)
        info = meta.collect(servers, lease=asdict(settings))
    run_dir = new_run_dir("lease", args.out)
    summary = write_run(run_dir, results, recs, info, checks)
    # What the terminal shows is the record, the check's verdict included.
    print(record_text(run_dir))
    print(f"results: {run_dir}")
    failed_check = any(s.get("check") is not None and not s["check"]["holds"] for s in summary["servers"])
    return 1 if failed_check else 0
