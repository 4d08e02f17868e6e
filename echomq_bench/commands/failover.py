"""Kill a cluster master under load and audit where every job went.

A local cluster with one replica per master runs a small steady load:
one producer enqueues onto Q queues spread over the masters, consumers
claim and complete, a pump reaps expired leases. Then the master that owns
queue 0 gets SIGKILL, its replica is elected, the load goes on, and after a
drain the client ledger is checked against the server's sets with
`echomq_bench.load.audit`.

Replication from a master to its replica is asynchronous: a write the master
acknowledged and had not yet sent can vanish with it. The run reports that
honestly instead of hiding it:

- a call whose reply never came (the connection died mid-call) is *in doubt*:
  an enqueue may or may not have happened, a complete may have deleted the
  row. After the run, a doubtful enqueue whose id shows up anywhere is
  counted as enqueued, and a doubtful complete whose row is gone counted as
  completed (the worker did the job; the reply was lost);
- what is left is the truth: `lost` are acknowledged enqueues that no node
  has; `in two places` are acknowledged completes whose job came back (the
  delete never reached the replica: the job runs again).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import redis

from echomq_bench.load.audit import AuditReport, Ledger, audit
from echomq_bench.records.record import Record, write_record
from echomq_bench.servers.cluster import EmbeddedCluster, format_placements, spread_queues
from echomq.errors import EchoMQError, StaleTokenError
from echomq.ids import mint
from echomq.queue import Queue
from echomq_bench.servers.embedded import BUILTIN_BINARIES, ServerSpec, ServerSpecError

__all__ = ["FailoverResult", "failover_spec", "run_failover", "failover_record", "configure", "run"]

DEFAULT_NODE_TIMEOUT_MS = 1000
LEASE_MS = 2000
PAUSE_AFTER_ERROR_S = 0.02
LOAD_S = 2.0  # load before the kill and after recovery
QUICK_LOAD_S = 0.5


@dataclass
class _Shared:
    """What the load threads record; one lock guards it."""

    ledger: Ledger = field(default_factory=Ledger)
    doubt_enqueue: set[str] = field(default_factory=set)
    doubt_complete: set[str] = field(default_factory=set)
    errors: Counter[str] = field(default_factory=Counter)
    first_error: float | None = None
    last_error: float | None = None
    ops: int = 0
    victim_queue: str = ""
    kill_at: float | None = None
    resumed_at: float | None = None  # first acknowledged enqueue on the victim's queue sent after the kill
    lock: threading.Lock = field(default_factory=threading.Lock)

    def error(self, exc: BaseException) -> None:
        now = time.perf_counter()
        with self.lock:
            self.errors[type(exc).__name__] += 1
            self.first_error = self.first_error or now
            self.last_error = now


@dataclass(frozen=True)
class FailoverResult:
    name: str
    version: str
    queues: list[str]
    victim: str
    new_master: str
    kill_to_promoted_s: float
    kill_to_ready_s: float
    kill_to_resumed_s: float | None  # None: no enqueue on the victim's queue succeeded before the load stopped
    errors_window_s: float
    errors: dict[str, int]
    ops: int
    load_s: float  # how long the producer ran
    doubt_enqueue: int
    doubt_enqueue_found: int
    doubt_complete: int
    doubt_complete_gone: int
    report: AuditReport

    def format(self) -> str:
        lines = [
            f"== {self.name}: {self.version} ==",
            f"{self.report.enqueued} jobs enqueued in {self.load_s:.1f} s "
            f"({self.report.enqueued / self.load_s:.0f}/s) on {', '.join(self.queues)}",
            f"killed master {self.victim} (SIGKILL); replica {self.new_master} took its slots",
            f"  promoted after {self.kill_to_promoted_s:.2f} s, every node ok after {self.kill_to_ready_s:.2f} s, "
            f"enqueues on {self.queues[0]} acknowledged again after "
            + (f"{self.kill_to_resumed_s:.2f} s" if self.kill_to_resumed_s is not None else "never"),
            f"  calls that failed: {sum(self.errors.values())} of {self.ops} "
            f"({', '.join(f'{k} {v}' for k, v in sorted(self.errors.items())) or 'none'}), "
            f"over {self.errors_window_s:.2f} s",
            f"  in doubt: {self.doubt_enqueue} enqueues ({self.doubt_enqueue_found} found on the server, so counted), "
            f"{self.doubt_complete} completes ({self.doubt_complete_gone} rows gone, so counted completed)",
            self.report.format(),
        ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "report"}
        out["audit"] = self.report.to_dict()
        return out


def failover_spec(spec: ServerSpec, node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS) -> ServerSpec:
    """A local cluster spec with one replica per master (unless it asks for
    more) and a short node timeout (unless it sets one); `redis` and
    `valkey` mean their cluster."""
    if spec.kind == "embedded" and spec.name in BUILTIN_BINARIES and not spec.args:
        spec = ServerSpec(name=f"{spec.name}-cluster", kind="cluster", binary=spec.binary)
    if spec.kind != "cluster" or spec.url is not None:
        raise ServerSpecError(
            f"failover needs a local cluster it can kill a node of (redis-cluster, valkey-cluster), not {spec}"
        )
    args = list(spec.args)
    lowered = [a.lower() for a in args]
    if "--replicas" not in lowered:
        args += ["--replicas", "1"]
    elif args[lowered.index("--replicas") + 1] == "0":
        raise ServerSpecError(f"failover needs replicas; {spec} has --replicas 0")
    if "--cluster-node-timeout" not in lowered:
        args += ["--cluster-node-timeout", str(node_timeout_ms)]
    return replace(spec, args=tuple(args))


def _producer(queues: list[Queue], rate: float, stop: threading.Event, shared: _Shared) -> None:
    gap = 1.0 / rate
    due = time.perf_counter()
    n = 0
    while not stop.is_set():
        q = queues[n % len(queues)]
        n += 1
        job_id = mint()
        started = time.perf_counter()
        try:
            reply = q.enqueue(job_id, b"work")
            with shared.lock:
                shared.ledger.record_enqueue(job_id, reply)
                shared.ops += 1
                # A call sent before the kill may still have been answered by the old master.
                if (shared.kill_at is not None and started > shared.kill_at and shared.resumed_at is None
                        and q.name == shared.victim_queue):
                    shared.resumed_at = time.perf_counter()
        except EchoMQError as exc:
            shared.error(exc)
            with shared.lock:
                shared.doubt_enqueue.add(job_id)
                shared.ops += 1
            time.sleep(PAUSE_AFTER_ERROR_S)
        due += gap
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        else:
            due = time.perf_counter()  # fell behind during the outage: no burst after it


def _consumer(queues: list[Queue], stop: threading.Event, shared: _Shared) -> None:
    n = 0
    idle = 0
    while not stop.is_set():
        q = queues[n % len(queues)]
        n += 1
        try:
            job = q.claim(LEASE_MS)
        except EchoMQError as exc:
            shared.error(exc)
            time.sleep(PAUSE_AFTER_ERROR_S)
            continue
        if job is None:
            idle += 1
            if idle >= len(queues):
                time.sleep(0.005)
                idle = 0
            continue
        idle = 0
        try:
            q.complete(job.id, job.token)
            accepted = True
        except StaleTokenError:
            accepted = False
        except EchoMQError as exc:
            shared.error(exc)
            with shared.lock:
                shared.doubt_complete.add(job.id)
            time.sleep(PAUSE_AFTER_ERROR_S)
            continue
        with shared.lock:
            shared.ledger.record_complete(job.id, job.token, accepted)
            shared.ops += 2


def _reaper(queues: list[Queue], stop: threading.Event, shared: _Shared) -> None:
    while not stop.wait(0.2):
        for q in queues:
            try:
                q.reap()
            except EchoMQError as exc:
                shared.error(exc)


def _cluster_client(cluster: EmbeddedCluster) -> redis.RedisCluster:
    # Short socket timeouts: a call to the dead master fails in a second,
    # and redis-py then re-reads the slot map, which finds the new master.
    return cluster.client(socket_timeout=1, socket_connect_timeout=1)


def _promoted(cluster: EmbeddedCluster, masters_before: set[str]) -> str | None:
    """A node that serves slots now and did not before the kill, as any live node sees it."""
    for node in cluster.nodes:
        if not node.running:
            continue
        try:
            view = node.state()
        except (redis.RedisError, OSError):
            continue
        for s in view:
            if s.role == "master" and s.slots and not s.failed and s.addr not in masters_before:
                return s.addr
    return None


def run_failover(
    spec: ServerSpec,
    *,
    queues: int = 3,
    rate: float = 300.0,
    consumers: int = 2,
    before_s: float = 2.0,
    after_s: float = 2.0,
    drain_s: float = 10.0,
    log: Any = None,
) -> FailoverResult:
    """Start the cluster, load it, kill the master of queue 0, audit. The
    cluster is stopped on the way out."""
    say = log or (lambda text: None)
    spec = failover_spec(spec)
    cluster = EmbeddedCluster(spec)
    try:
        masters = cluster.masters()
        placements = spread_queues(cluster, queues, prefix="fo")
        say(format_placements(placements))
        names = [p.queue for p in placements]
        victim = next(m for m in masters if m.name == placements[0].node)
        shared = _Shared()
        stop_producer, stop_consumers = threading.Event(), threading.Event()
        producer_client = _cluster_client(cluster)
        producer_queues = [Queue(producer_client, n) for n in names]
        threads = [threading.Thread(target=_producer, args=(producer_queues, rate, stop_producer, shared),
                                    daemon=True)]
        for _ in range(consumers):
            c = _cluster_client(cluster)
            threads.append(threading.Thread(target=_consumer, args=([Queue(c, n) for n in names],
                                                                   stop_consumers, shared), daemon=True))
        reaper_client = _cluster_client(cluster)
        threads.append(threading.Thread(target=_reaper, args=([Queue(reaper_client, n) for n in names],
                                                             stop_consumers, shared), daemon=True))
        t_load = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(before_s)
        say(f"killing master {victim.name} (pid {victim.pid}), which owns {placements[0].queue}")
        assert victim.pid is not None
        with shared.lock:
            shared.victim_queue = names[0]
            t_kill = shared.kill_at = time.perf_counter()
        os.kill(victim.pid, signal.SIGKILL)
        new_master = None
        while new_master is None:
            new_master = _promoted(cluster, {m.name for m in masters})
            if time.perf_counter() - t_kill > 60:
                raise EchoMQError(f"no replica took over from {victim.name} within 60 s")
            if new_master is None:
                time.sleep(0.05)
        t_promoted = time.perf_counter()
        cluster.wait_ready(60, expect_masters=len(masters))
        t_ready = time.perf_counter()
        say(f"replica {new_master} promoted after {t_promoted - t_kill:.2f} s; cluster ok after {t_ready - t_kill:.2f} s")
        time.sleep(after_s)
        stop_producer.set()
        threads[0].join()
        load_s = time.perf_counter() - t_load
        _drain(cluster, names, shared, drain_s)
        stop_consumers.set()
        for t in threads[1:]:
            t.join()
        return _result(cluster, names, victim.name, new_master, t_kill, t_promoted, t_ready, load_s, shared)
    finally:
        cluster.stop()


def _drain(cluster: EmbeddedCluster, names: list[str], shared: _Shared, seconds: float) -> None:
    """Let the consumers empty the queues: lost claims come back when their lease expires."""
    client = _cluster_client(cluster)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            left = sum(int(client.zcard(f"emq:{{{n}}}:{kind}")) for n in names for kind in ("pending", "active"))
        except redis.RedisError:
            left = -1
        if left == 0:
            return
        time.sleep(0.1)


def _result(cluster: EmbeddedCluster, names: list[str], victim: str, new_master: str, t_kill: float,
            t_promoted: float, t_ready: float, load_s: float, shared: _Shared) -> FailoverResult:
    client = _cluster_client(cluster)
    ledger = shared.ledger
    on_server: set[str] = set()
    for n in names:
        for kind in ("pending", "active", "schedule", "dead"):
            on_server |= {m.decode() for m in client.zrange(f"emq:{{{n}}}:{kind}", 0, -1)}
    touched = on_server | set(ledger.accepted) | {i for i, _ in ledger.refused}
    found = {i for i in shared.doubt_enqueue if i in touched}
    ledger.enqueued |= found
    gone = {i for i in shared.doubt_complete if i not in on_server and not ledger.accepted.get(i)}
    for job_id in gone:
        ledger.accepted[job_id] += 1
    report = audit(client, names, ledger)
    window = (shared.last_error - shared.first_error) if shared.first_error and shared.last_error else 0.0
    return FailoverResult(
        name=cluster.name, version=cluster.version(), queues=names, victim=victim, new_master=new_master,
        kill_to_promoted_s=t_promoted - t_kill, kill_to_ready_s=t_ready - t_kill,
        kill_to_resumed_s=shared.resumed_at - t_kill if shared.resumed_at is not None else None,
        errors_window_s=window,
        errors=dict(shared.errors), ops=shared.ops, load_s=load_s, doubt_enqueue=len(shared.doubt_enqueue),
        doubt_enqueue_found=len(found), doubt_complete=len(shared.doubt_complete),
        doubt_complete_gone=len(gone), report=report,
    )


# --------------------------------------------------------------------------
# CLI


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Kill a master of a local cluster (one replica per master) under a small load; "
        "report the failover time and the audit of every job. --server redis|valkey means their cluster."
    )
    from echomq_bench.options import add_out, add_quick, duration_s

    parser.add_argument("--queues", type=int, default=3, help="queues spread over the masters (default 3)")
    parser.add_argument("--rate", type=float, default=300.0, metavar="JOBS_PER_S",
                        help="jobs/s offered over all queues, by one producer (default 300)")
    parser.add_argument("--before", type=duration_s, default=None, metavar="DURATION",
                        help=f"load before the kill, e.g. 2s (default {LOAD_S:g}s; {QUICK_LOAD_S:g}s with --quick)")
    parser.add_argument("--after", type=duration_s, default=None, metavar="DURATION",
                        help=f"load after recovery, e.g. 2s (default {LOAD_S:g}s; {QUICK_LOAD_S:g}s with --quick)")
    add_quick(parser, f"{QUICK_LOAD_S:g}s of load before the kill and after recovery (the failover itself "
                      "takes what it takes)")
    add_out(parser, "results/<time>-failover")


def run(args: argparse.Namespace) -> int:
    from echomq_bench.records import meta
    from echomq_bench.records.files import new_run_dir

    load_s = QUICK_LOAD_S if args.quick else LOAD_S
    args.before = load_s if args.before is None else args.before
    args.after = load_s if args.after is None else args.after
    if not 1 <= args.queues <= 1000 or not 1 <= args.rate <= 100_000 or args.before < 0 or args.after < 0:
        print("echomq-bench failover: error: --queues 1..1000, --rate 1..100000, --before/--after >= 0",
              file=sys.stderr)
        return 2
    specs = [failover_spec(s) for s in args.server]  # refuses a URL before anything starts
    results = []
    for spec in specs:
        result = run_failover(spec, queues=args.queues, rate=args.rate, before_s=args.before,
                              after_s=args.after, log=lambda text: print(text, file=sys.stderr, flush=True))
        print(result.format(), flush=True)
        results.append(result)
    out = new_run_dir("failover", args.out)
    info = meta.collect([], queues=args.queues, rate=args.rate, before_s=args.before, after_s=args.after,
                        specs=[str(s) for s in specs])
    write_record(out, failover_record(results, info))
    print(f"results: {out}")
    return 0 if all(r.report.passed for r in results) else 1


def failover_record(results: list[FailoverResult], info: dict[str, Any]) -> Record:
    """The run as it is written: the results in summary.json, one tidy row per figure."""
    rows = []
    for r in results:
        for metric, value, unit in (
            ("kill_to_promoted", r.kill_to_promoted_s, "s"), ("kill_to_ready", r.kill_to_ready_s, "s"),
            ("kill_to_resumed", r.kill_to_resumed_s, "s"),
            ("failed_calls", sum(r.errors.values()), "calls"), ("calls", r.ops, "calls"),
            ("load", r.load_s, "s"),
            ("enqueued", r.report.enqueued, "jobs"), ("lost", r.report.lost, "jobs"),
            ("in_two_places", r.report.in_two_places, "jobs"), ("audit_passed", int(r.report.passed), "bool"),
        ):
            rows.append({"server": r.name, "version": r.version, "metric": metric, "value": value, "unit": unit})
    return Record(kind="failover", summary={"runs": [r.to_dict() for r in results]}, meta=info,
                  tables={"failover": rows})
