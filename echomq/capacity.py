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
import multiprocessing
import os
import secrets
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Literal
from urllib.parse import parse_qs, unquote, urlsplit

from . import serverstats
from .audit import Ledger, audit
from .backlog import fill, remove_queue
from .capresult import CapacityResult, build_result, format_table
from .ceiling import Ceiling, run_ceiling
from .driver import Window, WorkerPlan, worker_main
from .errors import EchoMQError
from .queue import Queue
from .wire import Target

__all__ = ["CapacitySettings", "CapacityResult", "CapacityError", "run_capacity", "measure", "target_of"]

Say = Callable[[str], None]
READY_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 120.0
DEFAULT_RATE_HINT = 60_000.0   # cycles/s assumed when nothing better is known, to size a backlog


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
    """Pin the server to one core and hand the rest to the client; describe what was done."""
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
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), {server_cpu})
    except OSError as exc:
        return f"off (cannot pin the server: {exc.strerror})", None
    shown = ",".join(map(str, client_cpus))
    return f"server on cpu {server_cpu}, driver and C client on cpu {shown}", client_cpus


def run_capacity(server: Any, settings: CapacitySettings = CapacitySettings(), *,
                 lua_dir: Path | str | None = None, progress: Say | None = None,
                 rate_hint: float | None = None, cleanup: bool = True) -> CapacityResult:
    """Measure one running server. It is left running; the run's keys are removed
    unless settings.keep_keys (or cleanup=False: the caller throws the server away)."""
    settings.check()
    say: Say = (lambda text: progress(f"{server.name}: {text}")) if progress else (lambda _: None)
    from .meta import describe_server

    client = server.client()
    target = target_of(server)
    described = describe_server(server)
    version = described.get("version") or server.version()
    names = tuple(f"cap-{secrets.token_hex(3)}-{i}" for i in range(settings.queues))
    queues = [Queue(client, name, lua_dir=lua_dir) for name in names]
    shas = {verb: queues[0].scripts.sha(verb) for verb in ("claim", "complete", "enqueue")}
    pinning, client_cpus = _pin(server, settings.pin)
    payload = b"x" * settings.payload_bytes
    warnings: list[str] = []
    try:
        ceiling = run_ceiling(client, target, shas["claim"], version, requests=settings.ceiling_requests,
                              payload=payload, lease_ms=settings.lease_ms, cpus=client_cpus,
                              say=say) if settings.ceiling else None
        backlog = _backlog_size(settings, ceiling, rate_hint)
        ledger = Ledger()
        say(f"filling {backlog:,} jobs")
        for i, name in enumerate(names):
            ids = fill(target, name, backlog // len(names) + (i < backlog % len(names)), payload)
            if settings.ledger:
                ledger.enqueued.update(x.decode() for x in ids)
        plans = _plans(settings, target, names, shas, client_cpus, backlog)
        results, measured = _drive(plans, settings, client, getattr(server, "pid", None), say)
        counts: dict[str, int] = {}
        for r in results:
            for key, value in r["counts"].items():
                counts[key] = counts.get(key, 0) + value
            if r.get("error"):
                warnings.append(f"worker {r['index']}: {r['error']}")
        if settings.ledger:
            for r in results:
                part = r["ledger"]
                ledger.enqueued.update(part["enqueued"])
                for job_id, n in part["accepted"].items():
                    ledger.accepted[job_id] += n
                ledger.refused.extend((i, int(t)) for i, t in part["refused"])
            report = audit(client, names, ledger)
            audit_out: dict[str, Any] | None = report.to_dict()
        else:
            audit_out = None
    finally:
        if cleanup and not settings.keep_keys:
            remove_queue(client, names)
        client.close()
    return build_result(server.name, version, settings, queues[0].scripts, ceiling, backlog, pinning, client_cpus,
                   results, counts, measured, audit_out, warnings, described)


def _backlog_size(settings: CapacitySettings, ceiling: Ceiling | None, hint: float | None) -> int:
    slack = settings.processes * settings.connections * settings.pipeline * 2
    if settings.feed == "produce":
        return settings.backlog if settings.backlog is not None else max(1000, slack)
    if settings.backlog is not None:
        return settings.backlog
    # A cycle is a claim plus a complete, so the driver cannot outrun the C
    # client's claim-only rate: sized from it, the backlog outlasts the run.
    # The C client's server cost per claim says how many claims a saturated
    # server gives, even when the C client itself did not saturate it.
    at_limit = 1e6 / ceiling.server_us_per_claim if ceiling and ceiling.server_us_per_claim > 0 else None
    rate = settings.rate or at_limit or hint or DEFAULT_RATE_HINT
    return int(rate * (settings.warmup_s + settings.duration_s)) + slack


def _plans(settings: CapacitySettings, target: Target, names: tuple[str, ...], shas: dict[str, str],
           cpus: tuple[int, ...] | None, backlog: int) -> list[WorkerPlan]:
    n = settings.processes
    return [WorkerPlan(index=i, node=i + 1, target=target, queues=names[i % len(names):] + names[:i % len(names)],
                       shas=shas, connections=settings.connections, pipeline=settings.pipeline,
                       lease_ms=settings.lease_ms, payload_bytes=settings.payload_bytes, work=settings.work,
                       rate=settings.rate / n if settings.rate else None, produce=settings.feed == "produce",
                       produce_ahead=backlog // n, ledger=settings.ledger, cpus=cpus, seed=i)
            for i in range(n)]


@dataclass(frozen=True)
class Measured:
    """What the parent saw over the window, beside the workers' own counts."""

    use: serverstats.Usage
    client_cpu_s: float
    server_wait_s: float | None   # server main thread runnable but off-CPU (None: pid unknown)
    client_wait_s: float


def _drive(plans: list[WorkerPlan], settings: CapacitySettings, client: Any, server_pid: int | None,
           say: Say) -> tuple[list[dict[str, Any]], Measured]:
    # fork: the workers need no fresh interpreter, and start in milliseconds.
    ctx = multiprocessing.get_context("fork")
    procs, pipes = [], []
    server_pids = [server_pid] if server_pid else []
    try:
        for plan in plans:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker_main, args=(plan, child), daemon=True)
            proc.start()
            child.close()
            procs.append(proc)
            pipes.append(parent)
        pids = [_expect(pipe, "ready", READY_TIMEOUT_S, plan.index)["ready"] for pipe, plan in zip(pipes, plans)]
        begin = time.perf_counter() + 0.05
        window = Window(begin, begin + settings.warmup_s, begin + settings.warmup_s + settings.duration_s)
        for pipe in pipes:
            pipe.send(window)
        _sleep_until(window.t_start)
        before, cpu0 = serverstats.sample(client), serverstats.process_cpu_s(pids)
        s0, c0 = serverstats.sched_s(server_pids, main_thread_only=True), serverstats.sched_s(pids)
        while (left := window.t_end - time.perf_counter()) > 0:
            say(f"measuring {settings.duration_s - left:4.1f}/{settings.duration_s:g} s")
            time.sleep(min(1.0, left))
        after, cpu1 = serverstats.sample(client), serverstats.process_cpu_s(pids)
        s1, c1 = serverstats.sched_s(server_pids, main_thread_only=True), serverstats.sched_s(pids)
        results = [_expect(pipe, "counts", DRAIN_TIMEOUT_S, plan.index) for pipe, plan in zip(pipes, plans)]
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
    measured = Measured(serverstats.usage(before, after), cpu1 - cpu0,
                        s1[1] - s0[1] if server_pids and s1[0] > 0 else None, c1[1] - c0[1])
    return results, measured


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


def run(args: argparse.Namespace) -> int:
    from . import meta
    from .results import new_run_dir, write_json, write_tidy
    from .workload import StderrProgress, add_workload_options, settings_from_args

    settings = settings_from_args(args, ledger=args.audit)
    progress = StderrProgress()
    results: list[CapacityResult] = []
    for spec in args.server:
        results.append(measure(spec, settings, progress=progress))
        progress.done()
    out = new_run_dir("capacity", args.out)
    info = meta.collect(servers=(), argv=sys.argv, workload=asdict(settings))
    info["servers"] = [r.server for r in results]
    info["pinning"] = {r.build: r.pinning for r in results}
    write_json(out / "meta.json", info)
    write_tidy(out / "capacity.csv", [row for r in results for row in r.rows(trial=1)])
    for r in results:
        r.write_hgrm(out)
    write_json(out / "summary.json", {"kind": "capacity", "builds": {r.build: r.headline() for r in results}})
    print(format_table(results))
    for r in results:
        print(f"{r.build}: {r.pinning}; {r.counts.get('w_completed', 0):,} cycles in {r.window_s:g} s; "
              f"scripts {r.scripts}")
        for text in r.warnings:
            print(f"{r.build}: WARNING {text}")
        if r.audit is not None:
            print(f"{r.build}: audit {'PASS' if r.audit['passed'] else 'FAIL'}")
    print(f"results: {out}")
    failed = any(r.audit is not None and not r.audit["passed"] for r in results)
    return 1 if failed else 0
