"""How many claim/complete cycles per second does this server sustain?

The runs are `echomq_bench.capacity.runner` (`run_capacity`, `run_alternating`,
`measure`: what is measured and how, pinning and feeds); this module holds the
command's arguments and its files. What it prints is its record, through the
report's renderer (`echomq_bench.report.kinds.capacity`).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from echomq_bench.capacity.result import CapacityResult
from echomq_bench.capacity.runner import SLOT_S, measure, run_alternating, run_capacity
from echomq_bench.capacity.session import target_of
from echomq_bench.capacity.settings import CapacityError, CapacitySettings

if TYPE_CHECKING:
    from echomq_bench.capacity.cluster import ClusterCapacityResult

__all__ = ["CapacitySettings", "CapacityResult", "CapacityError", "run_capacity", "run_alternating", "measure",
           "write_capacity", "target_of", "configure", "run", "SLOT_S"]

Say = Callable[[str], None]


# --------------------------------------------------------------------------
# Command line: `echomq-bench capacity`


def configure(parser: argparse.ArgumentParser) -> None:
    from echomq_bench.options import add_quick, add_workload_options

    parser.description = __doc__.split("\n\n")[0]
    add_workload_options(parser, duration_default="10s")
    add_quick(parser, "a 2s window after 0.5s of warm-up, a 20,000-claim ceiling (flags given still win)")
    parser.add_argument("--audit", action="store_true",
                        help="keep every job id and check the server's sets against them after the run")


def write_capacity(out: Path, results: Sequence[CapacityResult | ClusterCapacityResult],
                   argv: list[str] | None = None) -> Path:
    """The run's files in `out`: meta.json, capacity.csv, summary.json, one .hgrm per build and verb.
    A cluster's rows carry a `node` column (a master's address, or `all` for the totals)."""
    from echomq_bench.records import meta
    from echomq_bench.capacity.cluster import ClusterCapacityResult
    from echomq_bench.records.record import Record
    from echomq_bench.records.writer import write_record

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
        kind="capacity", summary={"builds": {r.build: r.headline() for r in results}}, meta=info,
        tables={"capacity": [row for r in results for row in r.rows(trial=1)],
                "timeline": [row for r in results for row in r.timeline_rows(trial=1)]}))


def _shown(progress: Any) -> Say:
    """Lines shown on stderr before a run (a cluster's placement), after the progress line."""
    import sys

    def show(text: str) -> None:
        progress.done()
        print(text, file=sys.stderr, flush=True)

    return show


def run(args: argparse.Namespace) -> int:
    """Measure each build, write the record, and print it as the report renders it."""
    from echomq_bench.capacity.cluster import ClusterCapacityResult
    from echomq_bench.commands.compare import unique_builds
    from echomq_bench.progress import Progress
    from echomq_bench.records.files import new_run_dir
    from echomq_bench.capacity.workload import settings_from_args
    from echomq_bench.report import record_text

    settings = settings_from_args(args, ledger=args.audit)
    progress = Progress()
    results: list[CapacityResult | ClusterCapacityResult] = []
    for spec in unique_builds(args.server):   # a build given twice is measured twice: redis, redis-2
        results.append(measure(spec, settings, progress=progress, show=_shown(progress)))
        progress.done()
    out = write_capacity(new_run_dir("capacity", args.out), results)
    print(record_text(out))
    print(f"results: {out}")
    failed = any(r.audit is not None and not r.audit["passed"] for r in results)
    failed = failed or any(isinstance(r, ClusterCapacityResult) and not r.accounting_passed for r in results)
    return 1 if failed else 0
