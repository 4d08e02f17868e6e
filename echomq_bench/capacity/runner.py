"""How many claim/complete cycles per second does this server sustain? The runs under the
`capacity` and `compare` commands.

`run_capacity(server, settings)` drives a running server at its limit with
`echomq_bench.load.driver` workers (processes of pipelined connections sending raw
EVALSHA of the project's scripts), and returns a `CapacityResult` that says
not only the rate but whether the server was the bottleneck: its main
thread's CPU over wall time (INFO cpu), its CPU per cycle, the commandstats
beside it, the driver's own CPU, and the ceiling that redis-benchmark gets
from the same claim script (`echomq_bench.load.ceiling`).

On a machine with two or more cores the server's main thread is pinned to
the first core this process may use and the driver (and the C benchmark
client) to the others, so the server never shares its core with its load,
and the result says so. A server given by URL is never pinned: its pid is
not ours. Beside its CPU, each side's schedstat wait (runnable, but another
process held the core) and the hypervisor's steal are recorded: on a shared
machine they say how much of a low busy % was the machine, not the load.

`run_alternating(servers, ...)` drives several servers through one window,
all at once on the server core or in turns; `echomq_bench.commands.compare` uses it.
The sessions are `echomq_bench.capacity.session`, the result `echomq_bench.capacity.result`.
A cluster is driven master by master through one window, with a row per
node: `echomq_bench.capacity.cluster`.

Feeds: `backlog` pre-fills enough pending jobs for the whole run and lets
the consumers drain it (a cycle is claim + complete); `produce` keeps a
small backlog topped up by producer connections (a cycle then also carries
its enqueue, and the server cost per cycle includes it).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from echomq_bench.capacity.result import CapacityFigures, CapacityResult
from echomq_bench.capacity.session import Session, close_session, collect, drive, open_session, plans, prepare
from echomq_bench.capacity.settings import DEFAULT_SETTINGS, CapacityError, CapacitySettings
from echomq_bench.progress import ProgressFn, prefixed

__all__ = ["run_capacity", "run_alternating", "measure", "measure_server", "SLOT_S", "backlog_share"]

SLOT_S = 0.25                  # alternating runs: each server's turn


def run_capacity(server: Any, settings: CapacitySettings = DEFAULT_SETTINGS, *,
                 lua_dir: Path | str | None = None, progress: ProgressFn | None = None,
                 cleanup: bool = True, log: ProgressFn | None = None) -> CapacityFigures:
    """Measure one running server. It is left running; the run's keys are removed
    unless settings.keep_keys (or cleanup=False: the caller throws the server away).
    A cluster (echomq_bench.servers.cluster) is measured per master (`echomq_bench.capacity.cluster`), and
    `log` gets its queues' placement before the run."""
    from echomq_bench.servers import is_cluster

    if is_cluster(server):
        from echomq_bench.capacity.cluster import run_cluster_capacity

        return run_cluster_capacity(server, settings, lua_dir=lua_dir, progress=progress, cleanup=cleanup,
                                    log=log)
    settings.check()
    settings = replace(settings, queues=settings.queues or 1)
    s = open_session(server, settings, lua_dir, progress)
    try:
        prepare([s], settings)
        ((results, measured),) = drive([(plans(settings, s), s)], settings, s.progress)
        return collect(s, settings, results, measured)
    finally:
        close_session(s, settings, cleanup)


def run_alternating(servers: Sequence[Any], settings: CapacitySettings = DEFAULT_SETTINGS, *,
                    lua_dirs: Sequence[Path | str | None] | None = None, slot_s: float | None = SLOT_S,
                    progress: ProgressFn | None = None,
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
        prepare(sessions, settings, share=backlog_share(len(sessions), slot_s))
        groups = [(plans(settings, s, slot=(slot_s, i, len(sessions), seed) if slot_s else None), s)
                  for i, s in enumerate(sessions)]
        joint = prefixed(progress, "in turns:" if slot_s else "together:")
        driven = drive(groups, settings, sessions[0].progress if len(sessions) == 1 else joint,
                        sharing=1 if slot_s else len(sessions))
        return [collect(s, settings, results, measured) for s, (results, measured) in zip(sessions, driven)]
    finally:
        for s in sessions:
            close_session(s, settings, cleanup)


def backlog_share(servers: int, slot_s: float | None) -> float:
    """The part of one server's capacity each of `servers` can reach in the window: in
    turns, its own slots; together, about 1/n of the shared core, taken twice over so
    that a build that gets more of the core than its share still never runs dry (a dry
    backlog is reported, never hidden). Every build gets the same size either way."""
    if slot_s:
        return 1.0 / servers
    return min(1.0, 2.0 / servers)


def measure(spec: Any, settings: CapacitySettings = DEFAULT_SETTINGS, *, lua_dir: Path | str | None = None,
            progress: ProgressFn | None = None, log: ProgressFn | None = None) -> CapacityFigures:
    """Start a fresh server (or cluster) from `spec`, measure it, stop it."""
    from echomq_bench.servers import start

    server = start(spec)
    try:
        # Keys stay only on what this process started and throws away.
        return run_capacity(server, settings, lua_dir=lua_dir, progress=progress, log=log,
                            cleanup=server.spec.kind == "url" or server.spec.url is not None)
    finally:
        server.stop()


def measure_server(spec: Any, settings: CapacitySettings = DEFAULT_SETTINGS, *, lua_dir: Path | str | None = None,
                   progress: ProgressFn | None = None) -> CapacityResult:
    """`measure` of one server, whose result has its histograms and ceiling whole (compare and --slo
    refuse a cluster before they start)."""
    result = measure(spec, settings, lua_dir=lua_dir, progress=progress)
    if not isinstance(result, CapacityResult):
        raise CapacityError(f"{spec}: a cluster, where one server was asked for")
    return result
