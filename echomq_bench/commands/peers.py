"""Run the same no-op jobs through echomq, BullMQ, RQ and arq on the same server.

For each server, trial and queue: a fresh server (an embedded build is
started anew; a running server's database must be empty and is flushed
after each queue), one producer process enqueues N jobs with a 64-byte
payload, then C consumer processes drain them. Around each phase the runner
reads INFO cpu, INFO commandstats and INFO memory, and nothing else, so
the server's figures are the peer's own. Afterwards it counts, with plain
commands on the peer's keys, that nothing is left pending or kept, and the
consumers report how many times the job function ran.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import quote

from echomq_bench.progress import Progress
from echomq_bench.records import meta as meta_mod
from echomq_bench.records import files as results
from echomq_bench.measurement import serverstats
from echomq_bench.servers.embedded import EmbeddedServer, Server, ServerSpec, UrlServer, start
from echomq_bench.peers import PEERS, get
from echomq_bench.peers.base import PAYLOAD_BYTES, PeerMissingError, version_of

__all__ = ["configure", "run", "measure", "PeerRun", "Phase", "RunnerError"]

QUEUE_NAME = "peers"
# Commands the runner itself sends between samples; never counted as the peer's.
OWN_COMMANDS = frozenset({"info", "config|resetstat"})
SCRIPT_COMMANDS = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})
SETUP_TIMEOUT_S = 60.0
LOG_TAIL = 15
MAX_JOBS = 10_000_000
MAX_CONSUMERS = 64


class RunnerError(RuntimeError):
    """A peer's run went wrong; the message says what and where its log is."""


@dataclass(frozen=True)
class Phase:
    """One phase (enqueue or drain) of one peer run."""

    jobs: int
    wall_s: float
    server: serverstats.Usage
    client_cpu_s: float

    def _per_job(self, value: float) -> float:
        return value / self.jobs if self.jobs else float("nan")

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def server_us_per_job(self) -> float:
        """Main-thread CPU (where commands and scripts run) per job, µs."""
        return self._per_job(self.server.main_cpu_s * 1e6)

    @property
    def server_all_threads_us_per_job(self) -> float:
        return self._per_job(self.server.cpu_s * 1e6)

    @property
    def commands(self) -> dict[str, tuple[int, int]]:
        return {k: v for k, v in self.server.commands.items() if k not in OWN_COMMANDS}

    @property
    def commands_per_job(self) -> float:
        """Every command the server executed, those run inside scripts and MULTI included."""
        return self._per_job(sum(calls for calls, _ in self.commands.values()))

    @property
    def scripts_per_job(self) -> float:
        """Script calls (EVAL, EVALSHA, FCALL and their _RO forms) per job."""
        return self._per_job(sum(calls for name, (calls, _) in self.commands.items() if name in SCRIPT_COMMANDS))

    @property
    def transactions_per_job(self) -> float:
        """MULTI/EXEC blocks per job."""
        return self._per_job(self.commands.get("exec", (0, 0))[0])

    @property
    def client_us_per_job(self) -> float:
        return self._per_job(self.client_cpu_s * 1e6)

    @property
    def server_utilization(self) -> float:
        return self.server.main_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def client_utilization(self) -> float:
        """Client CPU over wall time, in cores (several consumer processes can exceed 1)."""
        return self.client_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def bottleneck(self) -> str:
        return serverstats.bound(self.server_utilization, self.client_utilization)

    def figures(self) -> dict[str, Any]:
        return {
            "jobs_per_s": self.jobs_per_s,
            "wall_s": self.wall_s,
            "server_us_per_job": self.server_us_per_job,
            "server_all_threads_us_per_job": self.server_all_threads_us_per_job,
            "commands_per_job": self.commands_per_job,
            "scripts_per_job": self.scripts_per_job,
            "transactions_per_job": self.transactions_per_job,
            "client_us_per_job": self.client_us_per_job,
            "server_utilization": self.server_utilization,
            "client_utilization": self.client_utilization,
            "bottleneck": self.bottleneck,
        }


@dataclass(frozen=True)
class PeerRun:
    """Everything one peer did in one trial on one server."""

    server: str
    server_version: str
    queue: str
    trial: int
    jobs: int
    consumers: int
    enqueue: Phase
    drain: Phase
    used_memory_before: int
    used_memory_enqueued: int
    used_memory_drained: int
    accepted: int
    ran: int
    intact: int
    after_enqueue: dict[str, Any]
    leftovers: dict[str, Any]
    keys_after: int
    key_sample: list[str] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return self.enqueue.wall_s + self.drain.wall_s

    @property
    def jobs_per_s(self) -> float:
        """A job's whole life: enqueued and drained, N over both walls."""
        return self.jobs / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def server_us_per_job(self) -> float:
        return self.enqueue.server_us_per_job + self.drain.server_us_per_job

    @property
    def commands_per_job(self) -> float:
        return self.enqueue.commands_per_job + self.drain.commands_per_job

    @property
    def scripts_per_job(self) -> float:
        return self.enqueue.scripts_per_job + self.drain.scripts_per_job

    @property
    def transactions_per_job(self) -> float:
        return self.enqueue.transactions_per_job + self.drain.transactions_per_job

    @property
    def client_us_per_job(self) -> float:
        return self.enqueue.client_us_per_job + self.drain.client_us_per_job

    @property
    def bytes_per_pending_job(self) -> float:
        return (self.used_memory_enqueued - self.used_memory_before) / self.jobs

    @property
    def residual_bytes(self) -> int:
        """Memory the drained queue still holds (event streams, registries, counters)."""
        return self.used_memory_drained - self.used_memory_before

    @property
    def clean(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        out = []
        if self.accepted != self.jobs:
            out.append(f"producer had {self.accepted} of {self.jobs} jobs accepted")
        if self.after_enqueue["pending"] != self.jobs:
            out.append(f"the server held {self.after_enqueue['pending']} pending jobs after enqueueing {self.jobs}")
        if self.ran != self.jobs:
            out.append(f"the job function ran {self.ran} times for {self.jobs} jobs")
        if self.intact != self.ran:
            out.append(f"{self.ran - self.intact} jobs saw a payload other than the one enqueued")
        lo = self.leftovers
        if lo["pending"] or lo["kept"] or lo["rows"]:
            out.append(f"left on the server: {lo['pending']} pending, {lo['kept']} kept, {lo['rows']} job rows "
                       f"({lo['detail']})")
        return out


# -- child processes ---------------------------------------------------------

class Child:
    """One `python -m echomq_bench.peers` process; its stderr goes to a log file."""

    def __init__(self, config: dict[str, Any], log_path: Path) -> None:
        self.label = f"{config['peer']} {config['role']}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "echomq_bench.peers"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env,
            cwd=os.getcwd(),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(config) + "\n").encode())
        self.proc.stdin.flush()
        self._buf = b""
        self.progress = 0
        self.done_at: float | None = None
        self.result: dict[str, Any] | None = None
        self.ready = False
        self.eof = False

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def feed(self) -> list[tuple[str, str]]:
        """Read what is there; return the complete protocol lines."""
        assert self.proc.stdout is not None
        chunk = os.read(self.proc.stdout.fileno(), 65536)
        if not chunk:
            self.eof = True
            return []
        self._buf += chunk
        lines = []
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            word, _, rest = line.decode("utf-8", "replace").partition(" ")
            lines.append((word, rest))
        return lines

    def log_tail(self) -> str:
        self._log.flush()
        try:
            text = self.log_path.read_text(errors="replace").rstrip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-LOG_TAIL:])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.close()


def pump(children: list[Child], until: Callable[[Child], bool], timeout: float, what: str,
         tick: Callable[[], None] = lambda: None) -> None:
    """Read every child's lines until `until` holds for all of them."""
    sel = selectors.DefaultSelector()
    for child in children:
        if not until(child):
            sel.register(child.proc.stdout, selectors.EVENT_READ, child)  # type: ignore[arg-type]
    deadline = time.monotonic() + timeout
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                waiting = ", ".join(key.data.label for key in sel.get_map().values())
                raise RunnerError(f"timed out after {timeout:.0f} s waiting for {waiting} to {what}")
            for key, _ in sel.select(timeout=min(left, 0.2)):
                child: Child = key.data
                for word, rest in child.feed():
                    _handle(child, word, rest)
                if child.eof and not until(child):
                    raise RunnerError(f"{child.label} exited early (code {child.proc.wait()}); "
                                      f"last lines of {child.log_path}:\n{child.log_tail()}")
                if until(child):
                    sel.unregister(child.proc.stdout)
            tick()
    finally:
        sel.close()


def _handle(child: Child, word: str, rest: str) -> None:
    if word == "ready":
        child.ready = True
    elif word == "progress":
        child.progress = int(rest)
    elif word == "done":
        child.done_at = float(rest)
    elif word == "result":
        child.result = json.loads(rest)
    elif word == "missing":
        raise PeerMissingError(rest)
    elif word == "error":
        raise RunnerError(f"{child.label} failed: {rest}\nlast lines of {child.log_path}:\n{child.log_tail()}")


# -- one peer, one trial -----------------------------------------------------

def child_url(server: Server) -> str:
    """A URL the child can connect with, password included (it travels on stdin only)."""
    if isinstance(server, UrlServer):
        return server.url
    kw = server.client().connection_pool.connection_kwargs
    auth = ""
    if kw.get("password"):
        user = quote(kw.get("username") or "", safe="")
        auth = f"{user}:{quote(kw['password'], safe='')}@"
    return f"redis://{auth}{kw['host']}:{kw['port']}/{kw.get('db', 0)}"


def used_memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


Tick = Callable[[str, int], None]


def measure(server: Server, peer_name: str, n: int, consumers: int, *, trial: int = 0,
            log_dir: Path, timeout_s: float = 600.0, tick: Tick = lambda phase, done: None) -> PeerRun:
    """Enqueue n jobs with one producer, drain them with `consumers` consumers, on this server."""
    peer = get(peer_name)
    admin = server.client()
    try:
        admin.config_resetstat()
    except Exception:  # a managed server may refuse CONFIG; deltas still hold
        pass
    version = server.version()
    url = child_url(server)

    def config(role: str) -> dict[str, Any]:
        return {"role": role, "peer": peer_name, "url": url, "queue": QUEUE_NAME, "n": n}

    children: list[Child] = []
    try:
        producer = Child(config("produce"), log_dir / f"{server.name}-{peer_name}-t{trial}-produce.log")
        children.append(producer)
        pump([producer], lambda c: c.ready, SETUP_TIMEOUT_S, "get ready")
        mem0 = used_memory(admin)
        s0 = serverstats.sample(admin)
        t0 = time.perf_counter()
        producer.go()
        pump([producer], lambda c: c.done_at is not None, timeout_s, "enqueue", lambda: tick("enqueue", producer.progress))
        s1 = serverstats.sample(admin)
        mem1 = used_memory(admin)
        pump([producer], lambda c: c.result is not None, SETUP_TIMEOUT_S, "report and exit")
        assert producer.done_at is not None and producer.result is not None
        enqueue = Phase(n, producer.done_at - t0, serverstats.usage(s0, s1), producer.result["cpu_s"])
        producer.close()
        # Outside both measured windows: what the server holds once enqueued.
        queued = peer.leftovers(admin, QUEUE_NAME)

        workers = [Child(config("consume"), log_dir / f"{server.name}-{peer_name}-t{trial}-consume{i}.log")
                   for i in range(consumers)]
        children.extend(workers)
        pump(workers, lambda c: c.ready, SETUP_TIMEOUT_S, "get ready")
        s2 = serverstats.sample(admin)
        t2 = time.perf_counter()
        for w in workers:
            w.go()
        pump(workers, lambda c: c.done_at is not None, timeout_s, "drain",
             lambda: tick("drain", sum(w.progress for w in workers)))
        s3 = serverstats.sample(admin)
        pump(workers, lambda c: c.result is not None, SETUP_TIMEOUT_S, "report and exit")
        done = [w.result for w in workers]
        drain = Phase(n, max(w.done_at for w in workers) - t2, serverstats.usage(s2, s3),  # type: ignore[type-var]
                      sum(r["cpu_s"] for r in done))  # type: ignore[index]
        for w in workers:
            w.close()
        # Once the consumers are gone, so that their connection buffers are not counted as the queue's.
        mem2 = used_memory(admin)

        left = peer.leftovers(admin, QUEUE_NAME)
        keys = [k.decode("utf-8", "replace") for k in admin.scan_iter(count=1000)]
        return PeerRun(
            server=server.name, server_version=version, queue=peer_name, trial=trial, jobs=n,
            consumers=consumers, enqueue=enqueue, drain=drain,
            used_memory_before=mem0, used_memory_enqueued=mem1, used_memory_drained=mem2,
            accepted=int(producer.result["accepted"]),
            ran=sum(r["ran"] for r in done), intact=sum(r["intact"] for r in done),  # type: ignore[index]
            after_enqueue={"pending": queued.pending, "rows": queued.rows, "detail": queued.detail},
            leftovers={"pending": left.pending, "kept": left.kept, "rows": left.rows, "detail": left.detail},
            keys_after=len(keys), key_sample=sorted(keys)[:20],
        )
    finally:
        for child in children:
            child.kill()
        admin.close()


# -- the command ---------------------------------------------------------------

def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Enqueue N no-op jobs (64-byte payload) with one producer, then drain them with C consumer "
        "processes, through echomq, BullMQ, RQ and arq in turn on a fresh server each; report jobs/s, "
        "server CPU µs per job, server commands per job and memory per pending job.")
    parser.add_argument("--jobs", type=int, default=30_000, metavar="N", help="jobs per queue and trial (default 30000)")
    parser.add_argument("--consumers", type=int, default=2, metavar="C",
                        help="consumer processes draining each queue (default 2)")
    parser.add_argument("--trials", type=int, default=1, metavar="T",
                        help="rounds; each round runs every queue once, interleaved (default 1)")
    parser.add_argument("--queue", action="append", choices=list(PEERS), metavar="NAME",
                        help=f"only these queues (repeatable; default all: {', '.join(PEERS)}). "
                             "A queue asked for by name whose package is missing is an error, not a skip.")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="give up on a phase after S seconds (default 600)")
    parser.add_argument("--out", type=Path, help="results folder (default results/<utc-time>-peers)")


def _bad(message: str) -> int:
    print(f"echomq-bench peers: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.jobs <= MAX_JOBS:
        return _bad(f"--jobs must be from 1 to {MAX_JOBS}, got {args.jobs}")
    if not 1 <= args.consumers <= MAX_CONSUMERS:
        return _bad(f"--consumers must be from 1 to {MAX_CONSUMERS}, got {args.consumers}")
    if not 1 <= args.trials <= 100:
        return _bad(f"--trials must be from 1 to 100, got {args.trials}")
    if not args.timeout > 0:
        return _bad(f"--timeout must be positive, got {args.timeout}")
    try:
        names, skipped = choose_queues(args.queue or [])
    except PeerMissingError as exc:
        return _bad(str(exc))
    for name, why in skipped.items():
        print(f"note: skipping {name}: {why}", file=sys.stderr)
    if not names:
        return _bad("no queue left to run")

    for spec in args.server:
        if spec.kind == "url":
            problem = _check_empty(spec)
            if problem:
                return _bad(problem)

    load_start = os.getloadavg()
    out = results.new_run_dir("peers", args.out)
    log_dir = Path(tempfile.mkdtemp(prefix="echomq-peers-logs-"))
    runs: list[PeerRun] = []
    failures: list[dict[str, Any]] = []
    described: dict[str, dict[str, Any]] = {}
    total = len(args.server) * args.trials * len(names)
    step = 0
    progress = Progress()
    for trial in range(args.trials):
        for spec in args.server:
            for name in names:
                step += 1
                label = f"[{step}/{total}] {spec.name} {name} trial {trial + 1}/{args.trials}"
                try:
                    with _fresh(spec) as server:
                        described.setdefault(spec.name, meta_mod.describe_server(server))
                        pr = measure(server, name, args.jobs, args.consumers, trial=trial, log_dir=log_dir,
                                     timeout_s=args.timeout,
                                     tick=lambda phase, done, label=label: progress.show(
                                         f"{label}: {phase} {done:,}/{args.jobs:,}"))
                except PeerMissingError as exc:
                    progress.end(f"{label}: skipped: {exc}")
                    skipped[name] = str(exc)
                    continue
                except (RunnerError, OSError) as exc:
                    progress.end(f"{label}: FAILED: {exc}")
                    failures.append({"server": spec.name, "queue": name, "trial": trial, "error": str(exc)})
                    continue
                runs.append(pr)
                verdict = "ok" if pr.clean else "NOT CLEAN: " + "; ".join(pr.problems())
                progress.end(f"{label}: enqueue {pr.enqueue.jobs_per_s:,.0f}/s, drain {pr.drain.jobs_per_s:,.0f}/s, "
                             f"server {pr.server_us_per_job:.1f} µs/job, {pr.commands_per_job:.1f} cmds/job -- {verdict}")

    summary = build_summary(runs, names, skipped, failures, args)
    meta = meta_mod.collect(argv=sys.argv, kind="peers", jobs=args.jobs, consumers=args.consumers,
                            trials=args.trials, payload_bytes=PAYLOAD_BYTES, queues=names,
                            peer_packages={n: version_of(get(n).distribution) for n in PEERS})
    meta["servers"] = list(described.values())
    # Shared machines: what else was running says how far to trust the walls.
    meta["machine"]["loadavg_1_5_15_at_start"] = list(load_start)
    meta["machine"]["loadavg_1_5_15_at_end"] = list(os.getloadavg())
    results.write_record(out, results.Record(
        kind="peers", summary={k: v for k, v in summary.items() if k != "kind"}, meta=meta,
        tables={"peers": tidy_rows(runs), "peers_commands": command_rows(runs)}))
    print(format_table(summary))
    print(f"\nresults: {out}")
    if failures or any(not r.clean for r in runs):
        print(f"child logs kept in {log_dir}", file=sys.stderr)
        return 1
    _remove_tree(log_dir)
    return 0


def choose_queues(asked: list[str]) -> tuple[list[str], dict[str, str]]:
    """The queues to run and, for each one left out, why.

    Every queue by default, skipping those whose package is missing; a
    queue asked for by name whose package is missing is an error instead
    (PeerMissingError), since the run could not be what was asked for.
    """
    asked = list(dict.fromkeys(asked))
    names, skipped = [], {}
    for name in asked or list(PEERS):
        try:
            get(name).check()
        except PeerMissingError as exc:
            if asked:
                raise PeerMissingError(f"queue {name!r} was asked for, but {exc}") from None
            skipped[name] = str(exc)
            continue
        names.append(name)
    return names, skipped


def _check_empty(spec: ServerSpec) -> str | None:
    server = start(spec)
    with server.client() as client:
        size = int(client.dbsize())
    if size:
        return (f"server {spec.name!r} holds {size} keys in its database; peers writes there and flushes it "
                "after each queue, so give it an empty database (another /DB in the URL)")
    return None


class _fresh:
    """An embedded server started for one peer run, or a URL server flushed after it."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.server: Server | None = None

    def __enter__(self) -> Server:
        self.server = start(self.spec)
        return self.server

    def __exit__(self, *exc: object) -> None:
        assert self.server is not None
        if isinstance(self.server, EmbeddedServer):
            self.server.stop()
        else:
            with self.server.client() as client:
                client.flushdb()


def _remove_tree(path: Path) -> None:
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


# -- summary, tidy rows, table ---------------------------------------------------

def _median(values: Iterable[float]) -> float:
    return float(statistics.median(values))


def _spread(values: list[float]) -> list[float]:
    return [min(values), max(values)]


def _phase_summary(phases: list[Phase]) -> dict[str, Any]:
    keys = ("jobs_per_s", "server_us_per_job", "server_all_threads_us_per_job", "commands_per_job",
            "scripts_per_job", "transactions_per_job", "client_us_per_job", "server_utilization",
            "client_utilization")
    out: dict[str, Any] = {k: _median(getattr(p, k) for p in phases) for k in keys}
    bounds = [p.bottleneck for p in phases]
    out["bottleneck"] = max(set(bounds), key=bounds.count)
    return out


def build_summary(runs: list[PeerRun], names: list[str], skipped: dict[str, str],
                  failures: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    entries = []
    servers = list(dict.fromkeys(r.server for r in runs)) or [s.name for s in args.server]
    for server in servers:
        for name in names:
            mine = [r for r in runs if r.server == server and r.queue == name]
            if not mine:
                continue
            peer = get(name)
            entry: dict[str, Any] = {
                "server": server,
                "server_version": mine[0].server_version,
                "queue": name,
                "library": f"{peer.distribution} {version_of(peer.distribution)}",
                "enqueue_mode": peer.enqueue_mode,
                "drain_mode": peer.drain_mode,
                "settings": peer.settings(args.consumers),
                "jobs": args.jobs,
                "consumers": args.consumers,
                "trials": len(mine),
                "jobs_per_s": _median(r.jobs_per_s for r in mine),
                "server_us_per_job": _median(r.server_us_per_job for r in mine),
                "commands_per_job": _median(r.commands_per_job for r in mine),
                "scripts_per_job": _median(r.scripts_per_job for r in mine),
                "transactions_per_job": _median(r.transactions_per_job for r in mine),
                "client_us_per_job": _median(r.client_us_per_job for r in mine),
                "enqueue": _phase_summary([r.enqueue for r in mine]),
                "drain": _phase_summary([r.drain for r in mine]),
                "memory": {
                    "bytes_per_pending_job": _median(r.bytes_per_pending_job for r in mine),
                    "residual_bytes_after_drain": _median(r.residual_bytes for r in mine),
                    "keys_after_drain": _median(r.keys_after for r in mine),
                    "key_sample_after_drain": mine[-1].key_sample,
                },
                "spread": {k: _spread([getattr(r, k) for r in mine])
                           for k in ("jobs_per_s", "server_us_per_job", "commands_per_job")},
                "drained_clean": all(r.clean for r in mine),
                "ran": [r.ran for r in mine],
                "leftovers": mine[-1].leftovers,
            }
            entry["spread"]["drain_jobs_per_s"] = _spread([r.drain.jobs_per_s for r in mine])
            entries.append(entry)
    return {
        "kind": "peers",
        "jobs": args.jobs,
        "consumers": args.consumers,
        "trials": args.trials,
        "payload_bytes": PAYLOAD_BYTES,
        "figures": {
            "jobs_per_s": "N / (enqueue wall + drain wall): a job's whole life",
            "server_us_per_job": "server main-thread CPU (INFO cpu *_main_thread deltas) over both phases, per job",
            "commands_per_job": "commandstats calls over both phases per job, commands inside scripts and "
                                "MULTI/EXEC included; the runner's own INFO calls excluded",
            "scripts_per_job": "EVAL/EVALSHA/FCALL calls per job; the commands they run count in commands_per_job",
            "bytes_per_pending_job": "INFO used_memory after enqueue minus before, over N",
            "bottleneck": "server when its main thread was >= 85% busy or busier than the client processes "
                          "(client CPU in cores), else client",
        },
        "queues": entries,
        "skipped": skipped,
        "failures": failures,
    }


def tidy_rows(runs: list[PeerRun]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for r in runs:
        base = {"server": r.server, "server_version": r.server_version, "queue": r.queue, "trial": r.trial,
                "jobs": r.jobs, "consumers": r.consumers}
        for phase_name, phase in (("enqueue", r.enqueue), ("drain", r.drain)):
            for metric, value in phase.figures().items():
                if metric == "bottleneck":
                    continue
                rows.append({**base, "phase": phase_name, "metric": metric, "value": value, "unit": _unit(metric)})
        for metric in ("jobs_per_s", "server_us_per_job", "commands_per_job", "scripts_per_job",
                       "transactions_per_job", "client_us_per_job", "bytes_per_pending_job", "residual_bytes"):
            rows.append({**base, "phase": "total", "metric": metric, "value": getattr(r, metric),
                         "unit": _unit(metric)})
    return rows


def command_rows(runs: list[PeerRun]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        for phase_name, phase in (("enqueue", r.enqueue), ("drain", r.drain)):
            for command, (calls, usec) in sorted(phase.commands.items()):
                base = {"server": r.server, "queue": r.queue, "trial": r.trial, "phase": phase_name,
                        "command": command}
                rows.append({**base, "metric": "calls_per_job", "value": calls / r.jobs, "unit": "calls"})
                rows.append({**base, "metric": "usec_per_job", "value": usec / r.jobs, "unit": "us"})
    return rows


def _unit(metric: str) -> str:
    if metric.endswith("_per_s"):
        return "jobs/s"
    if "us_per_job" in metric:
        return "us"
    if metric.endswith("_s"):
        return "s"
    if "bytes" in metric:
        return "bytes"
    if "utilization" in metric:
        return "cores"
    return "count"


def format_table(summary: dict[str, Any]) -> str:
    head = (f"{'server':<14} {'queue':<12} {'enq/s':>8} {'drain/s':>8} {'jobs/s':>8} "
            f"{'srv µs/job':>10} {'range':>13} {'enq+drain':>12} {'cmds/job':>8} {'B/pending':>9} "
            f"{'cli µs/job':>10} {'drain bound':>11}  clean")
    lines = [f"peers: {summary['jobs']:,} jobs, {summary['consumers']} consumers, "
             f"{summary['trials']} trial(s), medians; µs are server main-thread CPU", head]
    for e in summary["queues"]:
        split = f"{e['enqueue']['server_us_per_job']:.1f}+{e['drain']['server_us_per_job']:.1f}"
        lo, hi = e["spread"]["server_us_per_job"]
        lines.append(
            f"{e['server_version']:<14} {e['queue']:<12} {e['enqueue']['jobs_per_s']:>8,.0f} "
            f"{e['drain']['jobs_per_s']:>8,.0f} {e['jobs_per_s']:>8,.0f} {e['server_us_per_job']:>10.1f} "
            f"{f'{lo:.1f}..{hi:.1f}':>13} {split:>12} {e['commands_per_job']:>8.1f} {e['memory']['bytes_per_pending_job']:>9,.0f} "
            f"{e['client_us_per_job']:>10.0f} {e['drain']['bottleneck']:>11}  "
            f"{'yes' if e['drained_clean'] else 'NO'}")
    lines.append("")
    seen = set()
    for e in summary["queues"]:
        if e["queue"] in seen:
            continue
        seen.add(e["queue"])
        lines.append(f"{e['queue']} ({e['library']}): enqueue {e['enqueue_mode']}; drain {e['drain_mode']}")
    for name, why in summary["skipped"].items():
        lines.append(f"skipped {name}: {why}")
    for f in summary["failures"]:
        lines.append(f"FAILED {f['server']} {f['queue']} trial {f['trial']}: {f['error'].splitlines()[0]}")
    return "\n".join(lines)
