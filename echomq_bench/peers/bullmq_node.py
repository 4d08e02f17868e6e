"""`bullmq-node`: BullMQ on Node, the BullMQ teams deploy, with ioredis 5
(ioredis 6 needs Node 20, newer than Debian 12's).

The children are `node node/bullmq_peer.js`, which speaks the runner's line
protocol itself, so its CPU is node's own. setup.sh installs the npm
packages pinned by node/package-lock.json into .peers/node (or the folder
ECHOMQ_PEERS_NODE names) with Debian's node.

Enqueue: `Queue.addBulk`, 1000 jobs per call (one MULTI/EXEC of addStandardJob
scripts), every job with removeOnComplete. Drain: one `Worker` per consumer
process, concurrency 1 (BullMQ's default) or 100 (`throughput`), every other
option the default (lockDuration 30 s, stalledInterval 30 s, drainDelay
5 s, the events stream capped near 10,000). It stops when the runner says
every job has run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from echomq_bench.peers.base import MODES, NODE_DIR, Gate, Leftovers, PeerMissingError
from echomq_bench.peers.bullmq import ADD_BATCH, CONCURRENCY, bullmq_leftovers

__all__ = ["BullMQNode", "SCRIPT"]

SCRIPT = Path(__file__).resolve().parent / "node" / "bullmq_peer.js"
SETUP_HINT = "run `bash setup.sh`, which installs it with npm into .peers/node"


class BullMQNode:
    name = "bullmq-node"
    distribution = "npm:bullmq"
    modes = MODES
    enqueue_mode = f"Queue.addBulk, {ADD_BATCH} jobs per call (one MULTI/EXEC of addStandardJob scripts)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.concurrency = CONCURRENCY[mode]
        self.drain_mode = (f"Worker(concurrency={self.concurrency}) per consumer on Node: moveToActive, then "
                           "moveToFinished per job, which also fetches the next")
        self.child = (shutil.which("node") or "node", str(SCRIPT), str(NODE_DIR / "node_modules"))

    def check(self) -> None:
        if shutil.which("node") is None:
            raise PeerMissingError(f"node is not installed; {SETUP_HINT} (Debian's nodejs and npm)")
        if not (NODE_DIR / "node_modules" / "bullmq" / "package.json").exists():
            raise PeerMissingError(f"the 'bullmq' npm package is not installed in {NODE_DIR}; {SETUP_HINT}")

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"runtime": "node", "client": "ioredis", "removeOnComplete": True, "concurrency": self.concurrency,
                "add_batch": ADD_BATCH, "lockDuration_ms": 30_000, "stalledInterval_ms": 30_000,
                "drainDelay_s": 5, "consumers": consumers, "in_flight_per_consumer": self.concurrency}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        raise RuntimeError("bullmq-node runs in node (node/bullmq_peer.js), not in a Python child")

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        raise RuntimeError("bullmq-node runs in node (node/bullmq_peer.js), not in a Python child")

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        return bullmq_leftovers(client, queue)
