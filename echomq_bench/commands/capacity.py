"""How many claim/complete cycles per second does this server sustain?

`run_capacity(server, settings)` drives a running server at its limit with
`echomq_bench.load.driver` workers (processes of pipelined connections sending raw
EVALSHA of the project's scripts), and returns a `CapacityResult` that says
not only the rate but whether the server was the bottleneck: its main
thread's CPU over wall time (INFO cpu), its CPU per cycle, the commandstats
beside it, the driver's own CPU, and the ceiling that redis-benchmark gets
from the same claim script (`echomq_bench.measurement.ceiling`).

On a machine with two or more cores the server's main thread is pinned to
the first core this process may use and the driver (and the C benchmark
client) to the others, so the server never shares its core with its load,
and the result says so. A server given by URL is never pinned: its pid is
not ours. Beside its CPU, each side's schedstat wait (runnable, but another
process held the core) and the hypervisor's steal are recorded: on a shared
machine they say how much of a low busy % was the machine, not the load.

`run_alternating(servers, ...)` drives several servers through one window,
all at once on the server core or in turns; `echomq_bench.commands.compare` uses it.
The machinery is in `echomq_bench.capacity.session`, the result in `echomq_bench.capacity.result`.
A cluster is driven master by master through one window, with a row per
node: `echomq_bench.capacity.cluster`.

Feeds: `backlog` pre-fills enough pending jobs for the whole run and lets
the consumers drain it (a cycle is claim + complete); `produce` keeps a
small backlog topped up by producer connections (a cycle then also carries
its enqueue, and the server cost per cycle includes it).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from echomq_bench.capacity.result import CapacityResult, format_table
from echomq_bench.capacity.settings import CapacityError, CapacitySettings
from echomq_bench.capacity.session import Session, close_session, collect, drive, open_session, plans, prepare, target_of

if TYPE_CHECKING:
    from echomq_bench.capacity.cluster import ClusterCapacityResult

__all__ = ["CapacitySettings", "CapacityResult", "CapacityError", "run_capacity", "run_alternating", "measure",
           "write_capacity", "target_of", "configure", "run", "SLOT_S"]

Say = Callable[[str], None]
SLOT_S = 0.25                  # alternating runs: each server's turn


def run_capacity(server: Any, settings: CapacitySettings = CapacitySettings(), *,
                 lua_dir: Path | str | None = None, progress: Say | None = None,
                 cleanup: bool = True, show: Say | None = None) -> CapacityResult:
    """Measure one running server. It is left running; the run's keys are removed
    unless settings.keep_keys (or cleanup=False: the caller throws the server away).
    A cluster (echomq_bench.servers.cluster) is measured per master (`echomq_bench.capacity.cluster`), and
    `show` gets its queues' placement before the run."""
    from echomq_bench.servers.cluster import is_cluster

    if is_cluster(server):
        from echomq_bench.capacity.cluster import run_cluster_capacity

        return run_cluster_capacity(server, settings, lua_dir=lua_dir, progress=progress,  # type: ignore[return-value]
                                    cleanup=cleanup, show=show)
    settings.check()
    settings = replace(settings, queues=settings.queues or 1)
    s = open_session(server, settings, lua_dir, progress)
    try:
        prepare([s], settings)
        ((results, measured),) = drive([(plans(settings, s), s)], settings, s.say)
        return collect(s, settings, results, measured)
    finally:
        close_session(s, settings, cleanup)


def run_alternating(servers: Sequence[Any], settings: CapacitySettings = CapacitySettings(), *,
                    lua_dirs: Sequence[Path | str | None] | None = None, slot_s: float | None = SLOT_S,
                    progress: Say | None = None,
                    cleanup: bool = True, seed: int = 0) -> list[CapacityResult]:
    """Load several running servers in turn, `slot_s` seconds each, through
    one window; results in the order given.

    The warm-up and the window are rounded to whole rounds. Time goes in
    rounds of one slot per server, in an order drawn per round
    from `seed` (`driver.slot_owner`). The servers share one core (each main
    thread is pinned to it) and only one is loaded at a time, so a machine
    that speeds up or slows down (other processes, a neighbour on the host)
    does so for all of them alike. Rates are over each server's own slots,
    with a timeline entry per slot; its CPU per cycle is over all its cycles
    in the window, the few that finish just after its slot included.
    """
    settings.check()
    settings = replace(settings, queues=settings.queues or 1)
    if settings.rate is not None and slot_s is not None:
        raise CapacityError("turns in slots need a closed loop: leave out --rate, or run the builds together")
    if slot_s is not None and not slot_s > 0:
        raise CapacityError(f"slot must be > 0 s, got {slot_s}")
    dirs = list(lua_dirs) if lua_dirs is not None else [None] * len(servers)
    # Whole rounds only, so every server gets the same share of the window.
    if slot_s is not None:
        turn = slot_s * len(servers)
        settings = replace(settings, warmup_s=math.ceil(settings.warmup_s / turn - 1e-9) * turn,
                           duration_s=max(1, round(settings.duration_s / turn)) * turn)
    sessions: list[Session] = []
    try:
        for server, folder in zip(servers, dirs):
            sessions.append(open_session(server, settings, folder, progress))
        prepare(sessions, settings, share=1.0 / len(sessions) if slot_s else 1.0)
        groups = [(plans(settings, s, slot=(slot_s, i, len(sessions), seed) if slot_s else None), s)
                  for i, s in enumerate(sessions)]
        driven = drive(groups, settings, sessions[0].say if len(sessions) == 1 else _joint_say(progress, slot_s),
                        sharing=1 if slot_s else len(sessions))
        return [collect(s, settings, results, measured) for s, (results, measured) in zip(sessions, driven)]
    finally:
        for s in sessions:
            close_session(s, settings, cleanup)


def _joint_say(progress: Say | None, slot_s: float | None) -> Say:
    label = "in turns" if slot_s else "together"
    return (lambda text: progress(f"{label}: {text}")) if progress else (lambda _: None)


def measure(spec: Any, settings: CapacitySettings = CapacitySettings(), *, lua_dir: Path | str | None = None,
            progress: Say | None = None, show: Say | None = None) -> CapacityResult:
    """Start a fresh server (or cluster) from `spec`, measure it, stop it."""
    from echomq_bench.servers.embedded import start

    server = start(spec)
    try:
        # Keys stay only on what this process started and throws away.
        return run_capacity(server, settings, lua_dir=lua_dir, progress=progress, show=show,
                            cleanup=server.spec.kind == "url" or server.spec.url is not None)
    finally:
        server.stop()


# --------------------------------------------------------------------------
# Command line: `echomq-bench capacity`


def configure(parser: argparse.ArgumentParser) -> None:
    from echomq_bench.capacity.workload import add_workload_options

    parser.description = __doc__.split("\n\n")[0]
    add_workload_options(parser)
    parser.add_argument("--audit", action="store_true",
                        help="keep every job id and check the server's sets against them after the run")


def write_capacity(out: Path, results: Sequence[CapacityResult | ClusterCapacityResult],
                   argv: list[str] | None = None) -> Path:
    """The run's files in `out`: meta.json, capacity.csv, summary.json, one .hgrm per build and verb.
    A cluster's rows carry a `node` column (a master's address, or `all` for the totals)."""
    from echomq_bench.records import meta
    from echomq_bench.capacity.cluster import ClusterCapacityResult
    from echomq_bench.records.record import Record, write_record

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
    from echomq_bench.capacity.cluster import ClusterCapacityResult, format_cluster
    from echomq_bench.records.files import new_run_dir
    from echomq_bench.capacity.workload import settings_from_args
    from echomq_bench.progress import Progress

    settings = settings_from_args(args, ledger=args.audit)
    progress = Progress()
    results: list[CapacityResult | ClusterCapacityResult] = []
    from echomq_bench.commands.compare import unique_builds

    for spec in unique_builds(args.server):   # a build given twice is measured twice: redis, redis-2
        results.append(measure(spec, settings, progress=progress, show=_shown(progress)))
        progress.done()
    out = write_capacity(new_run_dir("capacity", args.out), results)
    single = [r for r in results if isinstance(r, CapacityResult)]
    if single:
        print(format_table(single))
    for r in results:
        if isinstance(r, ClusterCapacityResult):
            print(("\n" if r is not results[0] else "") + format_cluster(r))
        print(f"{r.build}: {r.pinning}; {r.cycles:,} cycles in {r.window_s:g} s; scripts {r.scripts}")
        for text in r.warnings:
            print(f"{r.build}: WARNING {text}")
        if r.audit is not None:
            print(f"{r.build}: audit {'PASS' if r.audit['passed'] else 'FAIL'}")
    print(f"results: {out}")
    failed = any(r.audit is not None and not r.audit["passed"] for r in results)
    failed = failed or any(isinstance(r, ClusterCapacityResult) and not r.accounting_passed for r in results)
    return 1 if failed else 0
