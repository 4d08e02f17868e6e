"""The failover under load: kill a cluster master and audit where every job went.

A local cluster with one replica per master runs a small steady load
(`echomq_bench.load.engine`): one producer enqueues onto Q queues spread
over the masters, consumers claim and complete, a pump reaps expired leases. Then the master that owns
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

Apart from the audit, every role records each call's invocation and outcome
to a call log, stamped with the fault from the kill until the cluster is ok
again, and the call-log check (echomq_bench.measurement.calllog_check)
classifies every job from it and checks the fencing tokens. A claim the old
master acknowledged and never replicated hands its token out again: the
fencing check says so.

Beside the load, a worker that only claims and completes
(`echomq_bench.faults.claimprobe`) works a queue of its own on the master
that is killed, through a cluster client it makes no other call with: the
time from the kill until one of its claims was answered again shows that the
client's own calls find the promoted replica. A run whose probe is never
answered again fails.

The command around it (arguments, the record, what it prints) is
`echomq-bench failover`; the record is `echomq_bench.faults.failover_result`.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import redis

from echomq_bench.faults.claimprobe import ClaimProbe, probe_jobs
from echomq_bench.faults.clusterload import ClusterLoad, cluster_client
from echomq_bench.load.audit import audit
from echomq_bench.load.drain import drain, held_ids, places
from echomq_bench.load.engine import now
from echomq_bench.records.kinds.failover import FailoverRun
from echomq_bench.measurement.calllog import CallLog
from echomq_bench.measurement.calllog_check import check_files
from echomq_bench.progress import ProgressFn, silent
from echomq_bench.servers import EmbeddedCluster, format_placements, spread_queues
from echomq_bench.servers import BUILTIN_BINARIES, ServerError, ServerSpec, ServerSpecError

__all__ = ["failover_spec", "run_failover"]

DEFAULT_NODE_TIMEOUT_MS = 1000
CONSUMERS = 2
DRAIN_S = 10.0  # at most, for the consumers to empty the queues after the load
FAULT = "failover"   # the fault kind the call log names, from the kill until every node is ok


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
    before_s: float = 2.0,
    after_s: float = 2.0,
    log: ProgressFn | None = None,
    call_log_dir: Path | None = None,
) -> FailoverRun:
    """Start the cluster, load it, kill the master of queue 0, audit and
    check the call log (kept in `call_log_dir`, else in a temporary folder).
    The cluster is stopped on the way out."""
    log = log or silent
    spec = failover_spec(spec)
    cluster = EmbeddedCluster(spec)
    try:
        with ExitStack() as stack:
            if call_log_dir is None:
                call_log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="failover-call-log-")))
            return _run(cluster, queues, rate, (before_s, after_s), log, call_log_dir, stack)
    finally:
        cluster.stop()


def _run(cluster: EmbeddedCluster, queues: int, rate: float, load_s: tuple[float, float], log: ProgressFn,
         call_log_dir: Path, stack: ExitStack) -> FailoverRun:
    masters = cluster.masters()
    placements = spread_queues(cluster, queues, prefix="fo")
    log(format_placements(placements))
    names = [p.queue for p in placements]
    victim = next(m for m in masters if m.name == placements[0].node)
    probe_queue = next(p.queue for p in spread_queues(cluster, len(masters), prefix="co") if p.node == victim.name)
    probe = stack.enter_context(ClaimProbe(cluster, probe_queue, probe_jobs(sum(load_s))))
    load = ClusterLoad(cluster, names, rate, CONSUMERS, call_log_dir)
    nemesis = CallLog(call_log_dir / "nemesis.jsonl")
    t_load = now()
    load.start()
    time.sleep(load_s[0])
    log(f"killing master {victim.name} (pid {victim.pid}), which owns {placements[0].queue}")
    assert victim.pid is not None
    load.fault.kind = FAULT
    nemesis.note("start", FAULT)
    t_kill = load.watch.kill(names[0])
    probe.killed(t_kill)
    os.kill(victim.pid, signal.SIGKILL)
    new_master = _wait_promoted(cluster, {m.name for m in masters}, victim.name, t_kill)
    t_promoted = now()
    cluster.wait_ready(60, expect_masters=len(masters))
    nemesis.note("stop", FAULT)
    load.fault.kind = None
    nemesis.close()
    times = _Times(t_kill, t_promoted, now(), 0.0)
    log(f"replica {new_master} promoted after {times.promoted_s:.2f} s; cluster ok after {times.ready_s:.2f} s")
    time.sleep(load_s[1])
    load.stop_producer()
    times = replace(times, load_s=now() - t_load)
    probe.stop()
    drain(cluster_client(cluster), names, DRAIN_S)  # lost claims come back when their lease expires
    load.stop()
    result = _result(cluster, names, (victim.name, new_master), times, load)
    answered = probe.answered_at - t_kill if probe.answered_at is not None else None
    return replace(result, history=_call_log_check(cluster, names, call_log_dir), kill_to_claim_only_s=answered,
                   claim_only_failed=probe.failed_claims)


def _call_log_check(cluster: EmbeddedCluster, names: list[str], call_log_dir: Path) -> dict[str, Any]:
    """The call-log check against what each of the queues' sets holds now."""
    return check_files(call_log_dir.glob("*.jsonl"), places(cluster_client(cluster), names)).to_dict()


@dataclass(frozen=True)
class _Times:
    kill: float
    promoted: float
    ready: float
    load_s: float

    @property
    def promoted_s(self) -> float:
        return self.promoted - self.kill

    @property
    def ready_s(self) -> float:
        return self.ready - self.kill


def _wait_promoted(cluster: EmbeddedCluster, masters_before: set[str], victim: str, t_kill: float) -> str:
    while True:
        new_master = _promoted(cluster, masters_before)
        if new_master is not None:
            return new_master
        if now() - t_kill > 60:
            raise ServerError(f"no replica took over from {victim} within 60 s")
        time.sleep(0.05)


def _result(cluster: EmbeddedCluster, names: list[str], nodes: tuple[str, str], times: _Times,
            load: ClusterLoad) -> FailoverRun:
    client = cluster_client(cluster)
    recorder, watch = load.recorder, load.watch
    doubts = recorder.resolve(held_ids(client, names))
    report = audit(client, names, recorder.ledger)
    return FailoverRun(
        name=cluster.name, version=cluster.version(), queues=tuple(names), victim=nodes[0], new_master=nodes[1],
        kill_to_promoted_s=times.promoted_s, kill_to_ready_s=times.ready_s,
        kill_to_resumed_s=watch.resumed_at - times.kill if watch.resumed_at is not None else None,
        errors_window_s=recorder.errors_window_s,
        errors=dict(recorder.errors), ops=watch.ops, load_s=times.load_s, doubt_enqueue=doubts.enqueue,
        doubt_enqueue_found=doubts.enqueue_found, doubt_complete=doubts.complete,
        doubt_complete_gone=doubts.complete_gone, audit=report.to_dict(),
    )
