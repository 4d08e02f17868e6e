"""How many claim/complete cycles per second does this server sustain?

The runs are `echomq_bench.capacity.runner` (`run_capacity`, `run_alternating`,
`measure`: what is measured and how, pinning and feeds); this module holds the
command's arguments and its files. What it prints is its record, through the
report's renderer (`echomq_bench.report.kinds.capacity`).

With `--slo TARGET` it answers another question: the highest open-loop rate
at which the claim latency holds TARGET, searched `--slo-trials` times
(`echomq_bench.capacity.slo`); its record is of kind capacity, with an `slo`
block in place of the builds' figures and a row per probe in slo.csv.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from echomq_bench.capacity.result import CapacityFigures
from echomq_bench.capacity.runner import measure
from echomq_bench.capacity.settings import CapacitySettings

if TYPE_CHECKING:
    from echomq_bench.capacity.slo_result import SloResult

__all__ = ["write_capacity", "write_slo", "configure", "run"]


# --------------------------------------------------------------------------
# Command line: `echomq-bench capacity`


def configure(parser: argparse.ArgumentParser) -> None:
    from echomq_bench.capacity.workload import add_workload_options
    from echomq_bench.options import add_quick

    parser.description = __doc__.split("\n\n")[0]
    add_workload_options(parser, duration_default="10s")
    add_quick(parser, "a 2s window after 0.5s of warm-up, a 20,000-claim ceiling (flags given still win)")
    parser.add_argument("--audit", action="store_true",
                        help="keep every job id and check the server's sets against them after the run")
    from echomq_bench.capacity.slo_spec import add_slo_options
    from echomq_bench.measurement.verdicts import MIN_TRIALS

    add_slo_options(parser, MIN_TRIALS, "the rate is the median over --slo-trials searches, with the searches' "
                                        "order-statistic interval (96.9%% at 6)")


def write_capacity(out: Path, results: Sequence[CapacityFigures],
                   argv: list[str] | None = None) -> Path:
    """The run's files in `out`: meta.json, capacity.csv, summary.json, one .hgrm per build and verb.
    A cluster's rows carry a `node` column (a master's address, or `all` for the totals)."""
    from echomq_bench.records import meta
    from echomq_bench.capacity.cluster import ClusterCapacityResult
    from echomq_bench.records.record import Record
    from echomq_bench.records.files import write_record

    out.mkdir(parents=True, exist_ok=True)
    settings = results[0].settings if results else CapacitySettings()
    info = meta.collect(servers=(), argv=argv, workload=asdict(settings))
    info["servers"] = [r.server for r in results]
    info["pinning"] = {r.build: r.pinning for r in results}
    clusters = [r for r in results if isinstance(r, ClusterCapacityResult)]
    if clusters:
        info["clusters"] = {r.build: {"placements": [asdict(p) for p in r.placements], "cores_note": r.cores_note,
                                      "ceiling_note": r.ceiling_note} for r in clusters}
    for r in results:
        r.write_hgrm(out)
    return write_record(out, Record(
        kind="capacity", summary={"builds": {r.build: r.entry().to_record() for r in results}}, meta=info,
        tables={"capacity": [row for r in results for row in r.rows(trial=1)],
                "timeline": [row for r in results for row in r.timeline_rows(trial=1)]}))


def write_slo(out: Path, result: SloResult, argv: list[str] | None = None) -> Path:
    """An --slo run's files in `out`: meta.json, slo.csv (a row per probe) and summary.json (its `slo` block)."""
    from echomq_bench.records import meta
    from echomq_bench.records.kinds.capacity import CapacityRecord
    from echomq_bench.records.record import Record
    from echomq_bench.records.files import write_record

    info = meta.collect(servers=(), argv=argv, workload=asdict(result.settings), slo=result.slo.to_dict())
    info["servers"] = [{**result.described.get(b, {}), "name": b} for b in result.builds]
    summary = CapacityRecord(slo=result.block()).to_record()
    return write_record(out, Record(kind="capacity", summary=summary, meta=info, tables={"slo": result.rows()}))


def _run_slo(args: argparse.Namespace) -> int:
    """Search each build's rate at the target, write the record, print it as the report renders it."""
    import sys

    from echomq_bench.capacity.compare import unique_builds
    from echomq_bench.capacity.compare_result import Build
    from echomq_bench.capacity.slo import run_slo
    from echomq_bench.capacity.slo_spec import DEFAULT_HELD, DEFAULT_RESOLUTION
    from echomq_bench.capacity.workload import settings_from_args
    from echomq_bench.measurement.verdicts import MIN_TRIALS
    from echomq_bench.progress import Progress
    from echomq_bench.records.files import new_run_dir
    from echomq_bench.report import record_text

    settings = settings_from_args(args, ledger=args.audit)
    builds = [Build(spec) for spec in unique_builds(args.server)]
    for b in builds:
        if b.spec.kind == "url":
            print(f"note: {b.name} is a running server, not started fresh for each probe", file=sys.stderr)
    progress = Progress()
    result = run_slo(builds, settings, args.slo, args.slo_trials or MIN_TRIALS,
                     resolution=args.slo_resolution or DEFAULT_RESOLUTION, held=args.slo_held or DEFAULT_HELD,
                     progress=progress, log=progress.end)
    progress.done()
    out = write_slo(new_run_dir("capacity", args.out), result)
    print(record_text(out))
    print(f"results: {out}")
    return 1 if any(p.audit_passed is False for s in result.searches for p in s.probes) else 0


def run(args: argparse.Namespace) -> int:
    """Measure each build, write the record, and print it as the report renders it."""
    from echomq_bench.capacity.cluster import ClusterCapacityResult
    from echomq_bench.capacity.compare import unique_builds
    from echomq_bench.progress import Progress
    from echomq_bench.records.files import new_run_dir
    from echomq_bench.capacity.workload import settings_from_args
    from echomq_bench.capacity.slo import slo_refusal
    from echomq_bench.report import record_text

    refused = slo_refusal(args)
    if refused:
        import sys

        print(f"echomq-bench capacity: error: {refused}", file=sys.stderr)
        return 2
    if args.slo is not None:
        return _run_slo(args)
    settings = settings_from_args(args, ledger=args.audit)
    progress = Progress()
    results: list[CapacityFigures] = []
    for spec in unique_builds(args.server):   # a build given twice is measured twice: redis, redis-2
        results.append(measure(spec, settings, progress=progress, log=progress.end))
        progress.done()
    out = write_capacity(new_run_dir("capacity", args.out), results)
    print(record_text(out))
    print(f"results: {out}")
    failed = any(r.audit is not None and not r.audit["passed"] for r in results)
    failed = failed or any(isinstance(r, ClusterCapacityResult) and not r.accounting_passed for r in results)
    return 1 if failed else 0
