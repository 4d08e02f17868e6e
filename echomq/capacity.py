"""How many claim/complete cycles per second does this server sustain?

`run_capacity(server, settings)` drives a running server at its limit with
`echomq.driver` workers (processes of pipelined connections sending raw
EVALSHA of the project's scripts), and returns a `CapacityResult` that says
not only the rate but whether the server was the bottleneck: its main
thread's CPU over wall time (INFO cpu), its CPU per cycle, the commandstats
beside it, the driver's own CPU, and the ceiling that redis-benchmark gets
from the same claim script (`echomq.ceiling`).

On a machine with two or more cores the server's threads are pinned to the
first core this process may use and the driver (and the C benchmark client)
to the others, so the server never shares its core with its load, and the
result says so. A server given by URL is never pinned: its pid is not ours.

Feeds: `backlog` pre-fills enough pending jobs for the whole run and lets
the consumers drain it (a cycle is claim + complete); `produce` keeps a
small backlog topped up by producer connections (a cycle then also carries
its enqueue, and the server cost per cycle includes it).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import secrets
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Sequence
from urllib.parse import parse_qs, unquote, urlsplit

from . import serverstats
from .audit import Ledger, audit
from .backlog import fill, remove_queue
from .capresult import CapacityResult, build_result, format_table
from .ceiling import Ceiling, run_ceiling
from .driver import BIN_S, Window, WorkerPlan, worker_main
from .errors import EchoMQError
from .queue import Queue
from .wire import Target

__all__ = ["CapacitySettings", "CapacityResult", "CapacityError", "run_capacity", "run_alternating", "measure",
           "write_capacity",
           "target_of", "configure", "run"]

Say = Callable[[str], None]
READY_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 120.0
DEFAULT_RATE_HINT = 60_000.0   # cycles/s assumed when nothing better is known, to size a backlog
SLOT_S = 0.25                  # alternating runs: each server's turn


class CapacityError(EchoMQError):
    """The driver could not run or its run cannot be trusted; the message says why."""

    code = "EMQCAPACITY"


@dataclass(frozen=True)
class CapacitySettings:
    duration_s: float = 10.0
    warmup_s: float = 1.0
    processes: int = 1
    connections: int = 4          # per process
    pipeline: int = 64            # jobs in flight per connection
    payload_bytes: int = 64
    lease_ms: int = 60_000
    work: str = "const:0"         # echomq.dist spec; 0 for capacity
    rate: float | None = None     # cycles/s over all processes: open loop; None: closed loop
    feed: Literal["backlog", "produce"] = "backlog"
    backlog: int | None = None    # jobs to pre-fill; None sizes it from the ceiling or a rate hint
    ceiling: bool = True
    ceiling_requests: int = 100_000
    pin: bool = True
    queues: int = 1
    ledger: bool = False          # keep every id, then audit the server's sets against it
    keep_keys: bool = False       # leave the queue's keys on the server after the run

    def check(self) -> None:
        problems = []
        if not self.duration_s > 0:
            problems.append(f"duration must be > 0 s, got {self.duration_s}")
        if self.warmup_s < 0:
            problems.append(f"warmup must be >= 0 s, got {self.warmup_s}")
        for name in ("processes", "connections", "pipeline", "lease_ms", "queues", "ceiling_requests"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.payload_bytes < 0:
            problems.append(f"payload must be >= 0 bytes, got {self.payload_bytes}")
        if self.rate is not None and not self.rate > 0:
            problems.append(f"rate must be > 0 cycles/s, got {self.rate}")
        if self.feed not in ("backlog", "produce"):
            problems.append(f"feed must be backlog or produce, got {self.feed!r}")
        if self.backlog is not None and self.backlog < 0:
            problems.append(f"backlog must be >= 0 jobs, got {self.backlog}")
        from .dist import DistError, parse_dist

        try:
            parse_dist(self.work)
        except DistError as exc:
            problems.append(str(exc))
        if problems:
            raise CapacityError("bad capacity settings: " + "; ".join(problems))


def target_of(server: Any) -> Target:
    """Host, port and credentials of a started server (EmbeddedServer or UrlServer)."""
    url = getattr(server, "url", None)
    if getattr(server.spec, "kind", "embedded") == "url" and url:
        parts = urlsplit(url)
        if parts.scheme.lower() != "redis":
            raise CapacityError(f"the capacity driver speaks plain TCP only; {parts.scheme}:// is not supported")
        query = parse_qs(parts.query)
        password = unquote(parts.password) if parts.password is not None else (query.get("password") or [None])[0]
        db = parts.path.strip("/")
        return Target(parts.hostname or "127.0.0.1", parts.port or 6379,
                      unquote(parts.username) if parts.username else None, password, int(db) if db else 0)
    return Target(server.host, server.port, None, getattr(server, "_password", None))


def _pin(server: Any, enabled: bool) -> tuple[str, tuple[int, ...] | None]:
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
class _Session:
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
    say: Say
    ceiling: Ceiling | None = None
    backlog: int = 0
    ledger: Ledger = field(default_factory=Ledger)


def _open(server: Any, settings: CapacitySettings, lua_dir: Path | str | None, progress: Say | None) -> _Session:
    from .meta import describe_server

    client = server.client()
    try:
        described = describe_server(server)
        names = tuple(f"cap-{secrets.token_hex(3)}-{i}" for i in range(settings.queues))
        queues = [Queue(client, name, lua_dir=lua_dir) for name in names]
        pinning, client_cpus = _pin(server, settings.pin)
        return _Session(
            server=server, client=client, target=target_of(server), names=names, scripts=queues[0].scripts,
            shas={verb: queues[0].scripts.sha(verb) for verb in ("claim", "complete", "enqueue")},
            described=described, version=described.get("version") or server.version(), pinning=pinning,
            client_cpus=client_cpus,
            say=(lambda text: progress(f"{server.name}: {text}")) if progress else (lambda _: None))
    except BaseException:
        client.close()
        raise


def _prepare(s: _Session, settings: CapacitySettings, rate_hint: float | None, share: float = 1.0) -> None:
    payload = b"x" * settings.payload_bytes
    if settings.ceiling:
        s.ceiling = run_ceiling(s.client, s.target, s.shas["claim"], s.version, requests=settings.ceiling_requests,
                                payload=payload, lease_ms=settings.lease_ms, cpus=s.client_cpus, say=s.say)
    s.backlog = _backlog_size(settings, s.ceiling, rate_hint, share)
    s.say(f"filling {s.backlog:,} jobs")
    for i, name in enumerate(s.names):
        ids = fill(s.target, name, s.backlog // len(s.names) + (i < s.backlog % len(s.names)), payload)
        if settings.ledger:
            s.ledger.enqueued.update(x.decode() for x in ids)


def _collect(s: _Session, settings: CapacitySettings, results: list[dict[str, Any]],
             measured: Measured) -> CapacityResult:
    counts: dict[str, int] = {}
    warnings: list[str] = []
    for r in results:
        for key, value in r["counts"].items():
            counts[key] = counts.get(key, 0) + value
        if r.get("error"):
            warnings.append(f"worker {r['index']}: {r['error']}")
    audit_out: dict[str, Any] | None = None
    if settings.ledger:
        for r in results:
            part = r["ledger"]
            s.ledger.enqueued.update(part["enqueued"])
            for job_id, n in part["accepted"].items():
                s.ledger.accepted[job_id] += n
            s.ledger.refused.extend((i, int(t)) for i, t in part["refused"])
        audit_out = audit(s.client, s.names, s.ledger).to_dict()
    return build_result(s.server.name, s.version, settings, s.scripts, s.ceiling, s.backlog, s.pinning,
                        s.client_cpus, results, counts, measured, audit_out, warnings, s.described)


def _close(s: _Session, settings: CapacitySettings, cleanup: bool) -> None:
    try:
        if cleanup and not settings.keep_keys:
            remove_queue(s.client, s.names)
    finally:
        s.client.close()


def run_capacity(server: Any, settings: CapacitySettings = CapacitySettings(), *,
                 lua_dir: Path | str | None = None, progress: Say | None = None,
                 rate_hint: float | None = None, cleanup: bool = True) -> CapacityResult:
    """Measure one running server. It is left running; the run's keys are removed
    unless settings.keep_keys (or cleanup=False: the caller throws the server away)."""
    settings.check()
    s = _open(server, settings, lua_dir, progress)
    try:
        _prepare(s, settings, rate_hint)
        ((results, measured),) = _drive([(_plans(settings, s), s)], settings, s.say)
        return _collect(s, settings, results, measured)
    finally:
        _close(s, settings, cleanup)


def run_alternating(servers: Sequence[Any], settings: CapacitySettings = CapacitySettings(), *,
                    lua_dirs: Sequence[Path | str | None] | None = None, slot_s: float = SLOT_S,
                    progress: Say | None = None, rate_hint: float | None = None,
                    cleanup: bool = True) -> list[CapacityResult]:
    """Load several running servers in turn, `slot_s` seconds each, round and
    round through one window; results in the order given.

    The servers share one core (each is pinned to it) and only one is loaded
    at a time, so a machine that speeds up or slows down over seconds (other
    processes, a neighbour on the host) does so for all of them alike. Rates
    are over each server's own slots; its CPU per cycle is over all its
    cycles in the window, the few that finish just after its slot included.
    """
    settings.check()
    if settings.rate is not None:
        raise CapacityError("alternating slots need a closed loop: leave out --rate")
    if not slot_s > 0:
        raise CapacityError(f"slot must be > 0 s, got {slot_s}")
    dirs = list(lua_dirs) if lua_dirs is not None else [None] * len(servers)
    sessions: list[_Session] = []
    try:
        for server, folder in zip(servers, dirs):
            sessions.append(_open(server, settings, folder, progress))
            _prepare(sessions[-1], settings, rate_hint, share=1.0 / len(servers))
        groups = [(_plans(settings, s, slot=(slot_s, i, len(sessions))), s) for i, s in enumerate(sessions)]
        driven = _drive(groups, settings, sessions[0].say if len(sessions) == 1 else _joint_say(progress))
        return [_collect(s, settings, results, measured) for s, (results, measured) in zip(sessions, driven)]
    finally:
        for s in sessions:
            _close(s, settings, cleanup)


def _joint_say(progress: Say | None) -> Say:
    return (lambda text: progress(f"alternating: {text}")) if progress else (lambda _: None)


def _backlog_size(settings: CapacitySettings, ceiling: Ceiling | None, hint: float | None,
                  share: float = 1.0) -> int:
    slack = settings.processes * settings.connections * settings.pipeline * 2
    if settings.feed == "produce":
        return settings.backlog if settings.backlog is not None else max(1000, slack)
    if settings.backlog is not None:
        return settings.backlog
    # A cycle is a claim plus a complete, so the driver cannot outrun the C
    # client's claim-only rate. Its server cost per claim says how many
    # claims a saturated server gives, even if the C client did not saturate it.
    at_limit = 1e6 / ceiling.server_us_per_claim if ceiling and ceiling.server_us_per_claim > 0 else None
    rate = settings.rate or at_limit or hint or DEFAULT_RATE_HINT
    return int(rate * (settings.warmup_s + settings.duration_s) * share) + slack


def _plans(settings: CapacitySettings, s: _Session,
           slot: tuple[float, int, int] | None = None) -> list[WorkerPlan]:
    n, names = settings.processes, s.names
    slot_s, slot_index, slot_count = slot if slot else (None, 0, 1)
    return [WorkerPlan(index=i, node=i + 1, target=s.target, queues=names[i % len(names):] + names[:i % len(names)],
                       shas=s.shas, connections=settings.connections, pipeline=settings.pipeline,
                       lease_ms=settings.lease_ms, payload_bytes=settings.payload_bytes, work=settings.work,
                       rate=settings.rate / n if settings.rate else None, produce=settings.feed == "produce",
                       produce_ahead=s.backlog // n, ledger=settings.ledger, cpus=s.client_cpus, seed=i,
                       slot_s=slot_s, slot_index=slot_index, slot_count=slot_count)
            for i in range(n)]


@dataclass(frozen=True)
class Measured:
    """What the parent saw of one server over the window, beside the workers' own counts."""

    use: serverstats.Usage
    client_cpu_s: float
    server_wait_s: float | None   # server main thread runnable but off-CPU (None: pid unknown)
    client_wait_s: float
    steal: float                  # share of the server's CPU(s) the hypervisor took
    owned_s: float                # the part of the window that was this server's (all of it unless alternating)
    bins: tuple[float, tuple[int, ...]] = (BIN_S, ())   # timeline: bin length, this server's whole bins in the window


def _own_bins(window: Window, slot: tuple[float | None, int, int]) -> tuple[float, tuple[int, ...]]:
    """The timeline bins that lie wholly inside the window and belong to this server."""
    slot_s, index, count = slot
    size = slot_s or BIN_S
    first = math.ceil((window.t_start - window.t_begin) / size - 1e-9)
    last = math.floor((window.t_end - window.t_begin) / size + 1e-9)
    return size, tuple(k for k in range(first, last) if slot_s is None or k % count == index)


def _owned_s(window: Window, slot: tuple[float | None, int, int]) -> float:
    slot_s, index, count = slot
    if slot_s is None:
        return window.t_end - window.t_start
    total, k = 0.0, int((window.t_start - window.t_begin) / slot_s)
    while window.t_begin + k * slot_s < window.t_end:
        if k % count == index:
            lo = max(window.t_start, window.t_begin + k * slot_s)
            hi = min(window.t_end, window.t_begin + (k + 1) * slot_s)
            total += max(0.0, hi - lo)
        k += 1
    return total


def _drive(groups: list[tuple[list[WorkerPlan], _Session]], settings: CapacitySettings,
           say: Say) -> list[tuple[list[dict[str, Any]], Measured]]:
    """Fork every group's workers, open one window for all, sample each server around it."""
    # fork: the workers need no fresh interpreter, and start in milliseconds.
    ctx = multiprocessing.get_context("fork")
    procs, pipes = [], []
    client_cpus = groups[0][1].client_cpus
    server_cpus = tuple(sorted(set(range(os.cpu_count() or 1)) - set(client_cpus))) if client_cpus else ()
    try:
        for plans, _ in groups:
            for plan in plans:
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=worker_main, args=(plan, child), daemon=True)
                proc.start()
                child.close()
                procs.append(proc)
                pipes.append((parent, plan))
        group_pids: list[list[int]] = []
        cursor = 0
        for plans, _ in groups:
            mine = pipes[cursor:cursor + len(plans)]
            cursor += len(plans)
            group_pids.append([_expect(p, "ready", READY_TIMEOUT_S, plan.index)["ready"] for p, plan in mine])
        begin = time.perf_counter() + 0.05
        window = Window(begin, begin + settings.warmup_s, begin + settings.warmup_s + settings.duration_s)
        for pipe, _ in pipes:
            pipe.send(window)
        _sleep_until(window.t_start)
        before = [_snapshot(s, ps) for (_, s), ps in zip(groups, group_pids)]
        st0 = serverstats.steal_s(server_cpus)
        while (left := window.t_end - time.perf_counter()) > 0:
            say(f"measuring {settings.duration_s - left:4.1f}/{settings.duration_s:g} s")
            time.sleep(min(1.0, left))
        after = [_snapshot(s, ps) for (_, s), ps in zip(groups, group_pids)]
        st1 = serverstats.steal_s(server_cpus)
        results = [_expect(pipe, "counts", DRAIN_TIMEOUT_S, plan.index) for pipe, plan in pipes]
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
    steal = (st1[0] - st0[0]) / (st1[1] - st0[1]) if st1[1] > st0[1] else 0.0
    out, cursor = [], 0
    for (plans, _), b, a in zip(groups, before, after):
        mine = results[cursor:cursor + len(plans)]
        cursor += len(plans)
        p = plans[0]
        out.append((mine, Measured(
            use=serverstats.usage(b["info"], a["info"]), client_cpu_s=a["cpu"] - b["cpu"],
            server_wait_s=a["server"][1] - b["server"][1] if a["server"][0] > 0 else None,
            client_wait_s=a["client"][1] - b["client"][1], steal=steal,
            owned_s=_owned_s(window, (p.slot_s, p.slot_index, p.slot_count)),
            bins=_own_bins(window, (p.slot_s, p.slot_index, p.slot_count)))))
    return out


def _snapshot(s: _Session, pids: list[int]) -> dict[str, Any]:
    server_pids = [s.server.pid] if getattr(s.server, "pid", None) else []
    return {"info": serverstats.sample(s.client), "cpu": serverstats.process_cpu_s(pids),
            "server": serverstats.sched_s(server_pids, main_thread_only=True), "client": serverstats.sched_s(pids)}


def _expect(pipe: Any, key: str, timeout: float, index: int) -> dict[str, Any]:
    if not pipe.poll(timeout):
        raise CapacityError(f"driver worker {index} did not answer within {timeout:g} s")
    try:
        message = pipe.recv()
    except EOFError:
        raise CapacityError(f"driver worker {index} died") from None
    if "error" in message and key not in message:
        raise CapacityError(f"driver worker {index} failed: {message['error']}")
    return message


def _sleep_until(t: float) -> None:
    left = t - time.perf_counter()
    if left > 0:
        time.sleep(left)


def measure(spec: Any, settings: CapacitySettings = CapacitySettings(), *, lua_dir: Path | str | None = None,
            progress: Say | None = None, rate_hint: float | None = None) -> CapacityResult:
    """Start a fresh server from `spec`, measure it, stop it."""
    from .servers import start

    server = start(spec)
    try:
        return run_capacity(server, settings, lua_dir=lua_dir, progress=progress, rate_hint=rate_hint,
                            cleanup=server.spec.kind == "url")
    finally:
        server.stop()


# --------------------------------------------------------------------------
# Command line: `echomq-bench capacity`


def configure(parser: argparse.ArgumentParser) -> None:
    from .workload import add_workload_options

    parser.description = __doc__.split("\n\n")[0]
    add_workload_options(parser)
    parser.add_argument("--audit", action="store_true",
                        help="keep every job id and check the server's sets against them after the run")


def write_capacity(out: Path, results: list[CapacityResult], argv: list[str] | None = None) -> Path:
    """The run's files in `out`: meta.json, capacity.csv, summary.json, one .hgrm per build and verb."""
    from . import meta
    from .results import write_json, write_tidy

    out.mkdir(parents=True, exist_ok=True)
    settings = results[0].settings if results else CapacitySettings()
    info = meta.collect(servers=(), argv=argv, workload=asdict(settings))
    info["servers"] = [r.server for r in results]
    info["pinning"] = {r.build: r.pinning for r in results}
    write_json(out / "meta.json", info)
    write_tidy(out / "capacity.csv", [row for r in results for row in r.rows(trial=1)])
    write_tidy(out / "timeline.csv", [row for r in results for row in r.timeline_rows(trial=1)])
    for r in results:
        r.write_hgrm(out)
    write_json(out / "summary.json", {"kind": "capacity", "builds": {r.build: r.headline() for r in results}})
    return out


def run(args: argparse.Namespace) -> int:
    from .results import new_run_dir
    from .workload import StderrProgress, settings_from_args

    settings = settings_from_args(args, ledger=args.audit)
    clusters = [spec.describe() for spec in args.server if spec.kind == "cluster"]
    if clusters:
        # The driver's workers hold hand-encoded RESP sockets to one address
        # and sample one server's CPU; a cluster needs a socket per master and
        # per-node samples. Until then, the per-node figures come from
        # bench/cluster_scaling.py and the Locust scenarios.
        print(f"echomq-bench capacity: error: {', '.join(clusters)}: the capacity driver measures one server, "
              "not a cluster; measure each node's build with --server redis|valkey, and a cluster with "
              "bench/cluster_scaling.py or the Locust scenarios (--server redis-cluster --queues 3)", file=sys.stderr)
        return 2
    progress = StderrProgress()
    results: list[CapacityResult] = []
    for spec in args.server:
        results.append(measure(spec, settings, progress=progress))
        progress.done()
    out = write_capacity(new_run_dir("capacity", args.out), results)
    print(format_table(results))
    for r in results:
        print(f"{r.build}: {r.pinning}; {r.cycles:,} cycles in {r.window_s:g} s; scripts {r.scripts}")
        for text in r.warnings:
            print(f"{r.build}: WARNING {text}")
        if r.audit is not None:
            print(f"{r.build}: audit {'PASS' if r.audit['passed'] else 'FAIL'}")
    print(f"results: {out}")
    failed = any(r.audit is not None and not r.audit["passed"] for r in results)
    return 1 if failed else 0
