"""The machinery under `echomq_bench.commands.capacity`: a server made ready for a run
(a `Session`: scripts loaded, main thread pinned, ceiling taken, backlog
filled), the driver's workers forked and timed through one window, and
what the parent samples of each server around it.
"""

from __future__ import annotations

import math
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from echomq_bench.measurement import serverstats
from echomq_bench.load.audit import Ledger, audit
from echomq_bench.load.bulk import drop_queue, fill_in_turn
from echomq_bench.capacity.result import CapacityResult, Measured, RunSetup, build_result
from echomq_bench.capacity.settings import CapacityError, CapacitySettings
from echomq_bench.load.ceiling import Ceiling, CeilingOptions, run_ceiling
from echomq_bench.load.driver import BIN_S, Window, WorkerPlan, slot_owner
from echomq_bench.load.driver_process import worker_main
from echomq_bench.load.harness import Harness
from echomq import Queue
from echomq_bench.load.wire import Target
from echomq_bench.progress import ProgressFn, prefixed

__all__ = ["Session", "Measured", "target_of", "pin", "open_session", "prepare", "fill_sessions", "collect",
           "close_session", "backlog_size", "plans", "drive"]

READY_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 120.0
BACKLOG_RATE = 80_000.0   # cycles/s a default backlog lasts for (this VM: 30-55k)


def target_of(server: Any) -> Target:
    """Host, port, db and credentials of a started server (any `Server`)."""
    options = server.connection_kwargs()
    if options.get("ssl"):
        scheme = urlsplit(server.url).scheme
        raise CapacityError(f"the capacity driver speaks plain TCP only; {scheme}:// is not supported")
    return Target(options["host"], options["port"], options.get("username"), options.get("password"),
                  options.get("db", 0))


def pin(server: Any, enabled: bool) -> tuple[str, tuple[int, ...] | None]:
    """Pin the server's main thread (where commands and scripts run) to one
    core and hand the others to the client; describe what was done. Other
    server threads (background jobs, io-threads) stay free to move."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pid = getattr(server, "pid", None)
    if not enabled:
        return "off (not asked)", None
    if pid is None:
        return "off (server given by URL: its pid is not ours)", None
    if len(cpus) < 2:
        return f"off (only {len(cpus)} core available)", None
    server_cpu, client_cpus = cpus[0], tuple(cpus[1:])
    try:
        os.sched_setaffinity(pid, {server_cpu})  # the main thread's tid is the pid
    except OSError as exc:
        return f"off (cannot pin the server: {exc.strerror})", None
    shown = ",".join(map(str, client_cpus))
    return f"server main thread on cpu {server_cpu}, driver and C client on cpu {shown}", client_cpus


@dataclass
class Session:
    """One server made ready for a run: scripts loaded, pinned, ceiling taken, backlog filled."""

    server: Any
    client: Any
    target: Target
    names: tuple[str, ...]
    scripts: Any
    shas: dict[str, str]
    described: dict[str, Any]
    version: str
    pinning: str
    client_cpus: tuple[int, ...] | None
    progress: ProgressFn
    ceiling: Ceiling | None = None
    backlog: int = 0
    ledger: Ledger = field(default_factory=Ledger)


def open_session(server: Any, settings: CapacitySettings, lua_dir: Path | str | None,
                 progress: ProgressFn | None, *,
                 names: tuple[str, ...] | None = None, target: Target | None = None,
                 pinning: str | None = None) -> Session:
    """Scripts loaded on `server`, the queues named (fresh random names unless
    given), the server pinned unless `pinning` already says how it runs."""
    from echomq_bench.records.meta import describe_server

    client = server.client()
    try:
        described = describe_server(server)
        names = names or tuple(f"cap-{secrets.token_hex(3)}-{i}" for i in range(settings.queues or 1))
        # Scripts are per server, not per queue: one SCRIPT LOAD of each serves every queue.
        scripts = Queue(client, names[0], lua_dir=lua_dir).scripts
        client_cpus = None
        if pinning is None:
            pinning, client_cpus = pin(server, settings.pin)
        return Session(
            server=server, client=client, target=target or target_of(server), names=names, scripts=scripts,
            shas={verb: scripts.sha(verb) for verb in ("claim", "complete", "enqueue")},
            described=described, version=described.get("version") or server.version(), pinning=pinning,
            client_cpus=client_cpus,
            progress=prefixed(progress, f"{server.name}:"))
    except BaseException:
        client.close()
        raise


def prepare(sessions: list[Session], settings: CapacitySettings, share: float = 1.0) -> None:
    """Ceilings first, then every server's backlog, filled a chunk each in turn.
    `share`: the part of the window each server is loaded (alternating runs)."""
    payload = b"x" * settings.payload_bytes
    for s in sessions:
        if settings.ceiling:
            s.ceiling = run_ceiling(s.client, s.target, s.shas["claim"], s.version,
                                    CeilingOptions(requests=settings.ceiling_requests, payload=payload,
                                                   lease_ms=settings.lease_ms, cpus=s.client_cpus, progress=s.progress))
        s.backlog = backlog_size(settings, share)
        s.progress(f"filling {s.backlog:,} jobs")
    fill_sessions(sessions, payload, keep_ids=settings.ledger)


def fill_sessions(sessions: list[Session], payload: bytes, keep_ids: bool) -> dict[str, int]:
    """Each session's `backlog` split over its queues, filled a chunk per queue
    in turn; the ids go to the session's ledger when kept. Returns the jobs
    put on each queue."""
    jobs = [(s.target, name, s.backlog // len(s.names) + (i < s.backlog % len(s.names)), s)
            for s in sessions for i, name in enumerate(s.names)]
    filled = fill_in_turn([job[:3] for job in jobs], payload, keep_ids=keep_ids)
    for (_, _, _, s), ids in zip(jobs, filled):
        s.ledger.enqueued.update(x.decode() for x in ids)
    return {name: n for _, name, n, _ in jobs}


def collect(s: Session, settings: CapacitySettings, results: list[dict[str, Any]],
            measured: Measured) -> CapacityResult:
    audit_out: dict[str, Any] | None = None
    if settings.ledger:
        for r in results:
            part = r["ledger"]
            s.ledger.enqueued.update(part["enqueued"])
            for job_id, n in part["accepted"].items():
                s.ledger.accepted[job_id] += n
            s.ledger.refused.extend((i, int(t)) for i, t in part["refused"])
        audit_out = audit(s.client, s.names, s.ledger).to_dict()
    setup = RunSetup(build=s.server.name, version=s.version, settings=settings,
                     scripts=str(s.scripts.sources["claim"].path.parent), ceiling=s.ceiling, backlog=s.backlog,
                     pinning=s.pinning, client_cpus=s.client_cpus, server=s.described)
    return build_result(setup, results, measured, audit_out)


def close_session(s: Session, settings: CapacitySettings, cleanup: bool) -> None:
    try:
        if cleanup and not settings.keep_keys:
            for name in s.names:
                drop_queue(s.client, name)
    finally:
        s.client.close()


def backlog_size(settings: CapacitySettings, share: float = 1.0) -> int:
    """Jobs to pre-fill: --backlog, else enough for BACKLOG_RATE cycles/s (or
    the open loop's rate) through warm-up and window.

    The size never depends on the build or on what an earlier run reached:
    a bigger backlog is a bigger working set (more cache misses per cycle),
    so two builds compared on different sizes would not be compared alike.
    A backlog that runs dry is reported, never hidden.
    """
    slack = settings.processes * settings.connections * settings.pipeline * 2
    if settings.feed == "produce":
        return settings.backlog if settings.backlog is not None else max(1000, slack)
    if settings.backlog is not None:
        return settings.backlog
    rate = settings.rate or BACKLOG_RATE
    return int(rate * (settings.warmup_s + settings.duration_s) * share) + slack


def plans(settings: CapacitySettings, s: Session,
          slot: tuple[float, int, int, int] | None = None) -> list[WorkerPlan]:
    n, names = settings.processes, s.names
    slot_s, slot_index, slot_count, slot_seed = slot if slot else (None, 0, 1, 0)
    return [WorkerPlan(index=i, node=i + 1, target=s.target, queues=names[i % len(names):] + names[:i % len(names)],
                       shas=s.shas, connections=settings.connections, pipeline=settings.pipeline,
                       lease_ms=settings.lease_ms, payload_bytes=settings.payload_bytes, work=settings.work,
                       rate=settings.rate / n if settings.rate else None, reply_timeout_s=settings.reply_timeout_s,
                       produce=settings.feed == "produce",
                       produce_ahead=s.backlog // n, ledger=settings.ledger, cpus=s.client_cpus, seed=i,
                       slot_s=slot_s, slot_index=slot_index, slot_count=slot_count, slot_seed=slot_seed)
            for i in range(n)]


def _own_bins(window: Window, p: WorkerPlan) -> tuple[float, tuple[int, ...]]:
    """The timeline bins that lie wholly inside the window and belong to this server."""
    size = p.slot_s or BIN_S
    first = math.ceil((window.t_start - window.t_begin) / size - 1e-9)
    last = math.floor((window.t_end - window.t_begin) / size + 1e-9)
    return size, tuple(k for k in range(first, last)
                       if p.slot_s is None or slot_owner(k, p.slot_count, p.slot_seed) == p.slot_index)


def _owned_s(window: Window, p: WorkerPlan) -> float:
    slot_s = p.slot_s
    if slot_s is None:
        return window.t_end - window.t_start
    total, k = 0.0, int((window.t_start - window.t_begin) / slot_s)
    while window.t_begin + k * slot_s < window.t_end:
        if slot_owner(k, p.slot_count, p.slot_seed) == p.slot_index:
            lo = max(window.t_start, window.t_begin + k * slot_s)
            hi = min(window.t_end, window.t_begin + (k + 1) * slot_s)
            total += max(0.0, hi - lo)
        k += 1
    return total


def drive(groups: list[tuple[list[WorkerPlan], Session]], settings: CapacitySettings,
          progress: ProgressFn, sharing: int = 1) -> list[tuple[list[dict[str, Any]], Measured]]:
    """Fork every group's workers, open one window for all, sample each server around it."""
    client_cpus = groups[0][1].client_cpus
    server_cpus = tuple(sorted(set(range(os.cpu_count() or 1)) - set(client_cpus))) if client_cpus else ()
    with Harness(error=CapacityError) as harness:
        pids = [[harness.fork(f"driver worker {plan.index}", worker_main, plan).pid for plan in plans]
                for plans, _ in groups]
        harness.ready(READY_TIMEOUT_S)
        begin = time.perf_counter() + 0.05
        window = Window(begin, begin + settings.warmup_s, begin + settings.warmup_s + settings.duration_s)
        harness.go(window)
        _sleep_until(window.t_start)
        before = [_snapshot(s, ps) for (_, s), ps in zip(groups, pids)]
        st0 = serverstats.steal_s(server_cpus)
        while (left := window.t_end - time.perf_counter()) > 0:
            progress(f"measuring {settings.duration_s - left:4.1f}/{settings.duration_s:g} s")
            time.sleep(min(1.0, left))
        after = [_snapshot(s, ps) for (_, s), ps in zip(groups, pids)]
        st1 = serverstats.steal_s(server_cpus)
        results: list[dict[str, Any]] = harness.results(DRAIN_TIMEOUT_S)
    steal = (st1[0] - st0[0]) / (st1[1] - st0[1]) if st1[1] > st0[1] else 0.0
    out, cursor = [], 0
    for (plans, _), b, a in zip(groups, before, after):
        counts = results[cursor:cursor + len(plans)]
        cursor += len(plans)
        p = plans[0]
        out.append((counts, Measured(
            use=serverstats.usage(b["info"], a["info"]), client_cpu_s=a["cpu"] - b["cpu"],
            server_wait_s=a["server"][1] - b["server"][1] if a["server"][0] > 0 else None,
            client_wait_s=a["client"][1] - b["client"][1], steal=steal,
            owned_s=_owned_s(window, p), bins=_own_bins(window, p), sharing=sharing)))
    return out


def _snapshot(s: Session, pids: list[int]) -> dict[str, Any]:
    server_pids = [s.server.pid] if getattr(s.server, "pid", None) else []
    return {"info": serverstats.sample(s.client), "cpu": serverstats.process_cpu_s(pids),
            "server": serverstats.sched_s(server_pids, main_thread_only=True), "client": serverstats.sched_s(pids)}


def _sleep_until(t: float) -> None:
    left = t - time.perf_counter()
    if left > 0:
        time.sleep(left)
