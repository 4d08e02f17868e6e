"""The reshard under load: move a queue's cluster slot between two masters,
key by key, and audit where every job went.

A local cluster (no replicas: nothing is killed) runs the failover's small
steady load (`echomq_bench.faults.clusterload`): one producer over Q queues
spread across the masters, consumers that claim and complete, a pump that
reaps. Meanwhile the slot of queue 0 is moved to another master and back,
again and again, as `redis-cli --cluster reshard` moves a slot: IMPORTING
and MIGRATING, then MIGRATE a few keys at a time, then SETSLOT NODE
(`echomq_bench.servers.slotmove`). All along some of the queue's keys are on
one node and some on the other, and the scripts must refuse whatever they
cannot do whole there.

After a drain the client ledger is checked against the server's sets
(`echomq_bench.load.audit`), every job row is looked for in a set and every
set member for its row, and the call-log check classifies every job from
the calls each role recorded, stamped with the fault while the slot moves.

The command around it (arguments, the record, what it prints) is
`echomq-bench reshard`; the verdict and the record are
`echomq_bench.faults.reshard_result`.
"""

from __future__ import annotations

import random
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import redis

from echomq._instrument import QueueKeys
from echomq_bench.faults.clusterload import PAUSE_AFTER_ERROR_S, ClusterLoad, LoadPolicies, cluster_client
from echomq_bench.faults.reshard_result import judged
from echomq_bench.load.audit import audit
from echomq_bench.load.drain import drain, places
from echomq_bench.load.engine import now
from echomq_bench.load.policy import ConsumerPolicy, ProducerPolicy, PumpPolicy
from echomq_bench.measurement.calllog_check import check_files
from echomq_bench.progress import ProgressFn, silent
from echomq_bench.records.kinds.reshard import ReshardRun
from echomq_bench.servers import BUILTIN_BINARIES, EmbeddedCluster, ServerSpec, ServerSpecError
from echomq_bench.servers import format_placements, queue_slot, spread_queues
from echomq_bench.servers.slotmove import SlotMove

__all__ = ["reshard_spec", "run_reshard", "BACKLOG"]

CONSUMERS = 2
BACKLOG = 200  # pending jobs the producer keeps per queue: the rows a move splits from their sets
LEASE_MS = 500
MAX_ATTEMPTS = 3
FAULT = "reshard"  # the fault kind the call log names, while the slot moves
KEYS_PER_MIGRATE = 1  # one, so that the queue spends most of the move split across two nodes
LISTED_KEYS = 1000  # keys listed, then shuffled, at a time
PAUSE_S = 0.005  # between MIGRATE calls: the load runs in the gaps
DRAIN_S = 10.0  # at most, for the consumers to settle every job; a lease lost in a refused call comes back by reap


def reshard_spec(spec: ServerSpec) -> ServerSpec:
    """A local cluster spec; `redis` and `valkey` mean their cluster. A cluster
    given by URL is refused: this command moves slots, which is no test to
    run on a cluster someone uses."""
    if spec.kind == "embedded" and spec.name in BUILTIN_BINARIES and not spec.args:
        spec = ServerSpec(name=f"{spec.name}-cluster", kind="cluster", binary=spec.binary)
    if spec.kind != "cluster" or spec.url is not None:
        raise ServerSpecError(f"reshard needs a local cluster it may move slots on (redis-cluster, "
                              f"valkey-cluster), not {spec}")
    return spec


def run_reshard(spec: ServerSpec, *, queues: int = 3, claim_rate: float = 300.0, moving_s: float = 3.0,
                log: ProgressFn | None = None, call_log_dir: Path | None = None) -> ReshardRun:
    """Start the cluster, load it, move queue 0's slot back and forth for
    `moving_s`, drain, audit and check the call log (kept in `call_log_dir`,
    else in a temporary folder). The cluster is stopped on the way out."""
    log = log or silent
    cluster = EmbeddedCluster(reshard_spec(spec))
    try:
        with ExitStack() as stack:
            if call_log_dir is None:
                call_log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="reshard-call-log-")))
            call_log_dir.mkdir(parents=True, exist_ok=True)
            return _run(cluster, queues, claim_rate, moving_s, log, call_log_dir)
    finally:
        cluster.stop()


def _run(cluster: EmbeddedCluster, queues: int, claim_rate: float, moving_s: float, log: ProgressFn,
         call_log_dir: Path) -> ReshardRun:
    placements = spread_queues(cluster, queues, prefix="rs")
    log(format_placements(placements))
    names = [p.queue for p in placements]
    load = ClusterLoad(cluster, names, claim_rate, CONSUMERS, call_log_dir, _policies(claim_rate))
    t_load = now()
    slot = queue_slot(names[0])
    load.start()
    try:  # a move that fails (a MIGRATE refused) stops the load before it is raised
        time.sleep(0.5)  # the load in its stride before the first move
        load.fault.kind = FAULT
        moved = _move_for(cluster, slot, placements[0].node, moving_s, log)
        load.fault.kind = None
        time.sleep(0.5)
        load.stop_producer()
        load_s = now() - t_load
        drain(cluster_client(cluster), names, DRAIN_S)
    finally:
        load.stop()
    client = cluster_client(cluster)
    final = places(client, names)
    in_no_set, without_row = _strays(cluster, names, set().union(*final.values()))
    doubts = load.recorder.resolve(set().union(*final.values()))
    return judged(ReshardRun(
        name=cluster.name, version=cluster.version(), queues=tuple(names), slot=slot, moves=moved.done,
        keys_moved=moved.keys, moving_s=moved.seconds, move_refused=moved.refused, load_s=load_s,
        errors=dict(load.recorder.errors), ops=load.watch.ops, in_no_set=in_no_set, without_row=without_row,
        doubt_enqueue=doubts.enqueue, doubt_enqueue_found=doubts.enqueue_found, doubt_complete=doubts.complete,
        doubt_complete_gone=doubts.complete_gone, audit=audit(client, names, load.recorder.ledger).to_dict(),
        history=check_files(call_log_dir.glob("*.jsonl"), final).to_dict()))


def _policies(claim_rate: float) -> LoadPolicies:
    """Every verb under the move: a standing backlog, consumers at `claim_rate` claims/s
    that retry some jobs (schedule, promote) and abandon some (reap, dead set)."""
    return LoadPolicies(
        ProducerPolicy(backlog=BACKLOG, payload=b"work", backoff_s=PAUSE_AFTER_ERROR_S),
        ConsumerPolicy(lease_ms=LEASE_MS, rate=claim_rate / CONSUMERS, fail_rate=0.2, crash_rate=0.05,
                       retry_delay_ms=50, max_attempts=MAX_ATTEMPTS, backoff_s=PAUSE_AFTER_ERROR_S),
        PumpPolicy(interval_s=0.05, promote=True, max_attempts=MAX_ATTEMPTS))


@dataclass(frozen=True)
class Moves:
    done: int            # whole moves
    keys: int            # keys moved, all moves together
    seconds: float       # time spent moving
    refused: str | None = None  # a MIGRATE the target refused, which stopped the moves


def _move_for(cluster: EmbeddedCluster, slot: int, owner: str, seconds: float, log: ProgressFn) -> Moves:
    """Move `slot` from its `owner` to another master and back until `seconds`
    have passed (at least once), or until a MIGRATE is refused."""
    masters = cluster.masters()
    moves = keys_moved = 0
    start = time.monotonic()
    while moves == 0 or time.monotonic() - start < seconds:
        source = next(m for m in masters if m.name == owner)
        target = next(m for m in masters if m.name != owner)
        move = SlotMove(slot, source, target)
        move.begin()
        # In a shuffled order, not GETKEYSINSLOT's: that one tends to move rows
        # before the sets, and every split of sets from rows is to be met.
        order = random.Random(f"{slot}:{moves}")
        while left := move.keys_left(LISTED_KEYS):
            order.shuffle(left)
            for at in range(0, len(left), KEYS_PER_MIGRATE):
                try:
                    move.move(left[at:at + KEYS_PER_MIGRATE])
                except redis.exceptions.ResponseError as exc:
                    # BUSYKEY: a script wrote a key on the target that the source
                    # still holds. The move cannot finish; the slot stays split.
                    refused = f"MIGRATE {left[at:at + KEYS_PER_MIGRATE]!r} refused: {exc}"
                    log(f"move {moves + 1} of slot {slot} stopped: {refused}")
                    return Moves(moves, keys_moved, time.monotonic() - start, refused)
                keys_moved += len(left[at:at + KEYS_PER_MIGRATE])
                time.sleep(PAUSE_S)
        move.finish(masters)
        owner = target.name
        moves += 1
    spent = time.monotonic() - start
    log(f"moved slot {slot} {moves} times between masters: {keys_moved} keys in {spent:.2f} s")
    return Moves(moves, keys_moved, spent)


def _strays(cluster: EmbeddedCluster, names: list[str], in_sets: set[str]) -> tuple[int, int]:
    """Rows whose id no set holds, and set members without a row, over every node."""
    client = cluster_client(cluster)
    rows: set[str] = set()
    for name in names:
        prefix = QueueKeys(name).job("")
        rows.update(k.decode()[len(prefix):] for k in client.scan_iter(match=f"{prefix}*", count=1000))
    return len(rows - in_sets), len(in_sets - rows)
