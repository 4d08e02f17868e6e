"""echomq (through its Worker) beside the queues teams run: BullMQ on Node and in
Python, RQ, arq, Celery, Dramatiq, Huey, SAQ, streaQ and taskiq: the same no-op jobs,
the same server.

One adapter module per queue library; `runner` is the `peers` command, and
`python -m echomq_bench.peers` is the child process that runs one producer or one
consumer of one adapter (BullMQ on Node runs `node` instead). Peer libraries
are imported only by the adapters, so the core install needs none of them
(they come with the `peers` extra; BullMQ's Node package with setup.sh).
"""

from __future__ import annotations

import importlib

from echomq_bench.peers.base import (DEFAULT, EXTRA_HINT, MODES, PAYLOAD, PAYLOAD_BYTES, THROUGHPUT, Leftovers,
                                     Peer, PeerMissingError)

__all__ = ["PEERS", "BASELINE", "get", "modes_of", "Peer", "Leftovers", "PeerMissingError", "PAYLOAD",
           "PAYLOAD_BYTES", "EXTRA_HINT", "DEFAULT", "THROUGHPUT", "MODES"]

# queue name -> (module, class); the order is the report's order.
PEERS: dict[str, tuple[str, str]] = {
    "echomq": ("echomq_bench.peers.echomq", "EchoMQ"),
    "echomq-raw": ("echomq_bench.peers.echomq", "EchoMQRaw"),
    "bullmq-node": ("echomq_bench.peers.bullmq_node", "BullMQNode"),
    "bullmq-py": ("echomq_bench.peers.bullmq", "BullMQ"),
    "rq": ("echomq_bench.peers.rq", "RQ"),
    "arq": ("echomq_bench.peers.arq", "Arq"),
    "celery": ("echomq_bench.peers.celery", "Celery"),
    "dramatiq": ("echomq_bench.peers.dramatiq", "Dramatiq"),
    "huey": ("echomq_bench.peers.huey", "Huey"),
    "saq": ("echomq_bench.peers.saq", "Saq"),
    "streaq": ("echomq_bench.peers.streaq", "Streaq"),
    "taskiq": ("echomq_bench.peers.taskiq", "Taskiq"),
}
# The queue every ratio is taken against: the BullMQ that teams deploy.
BASELINE = "bullmq-node"


def _adapter(name: str) -> type[Peer]:
    try:
        module, cls = PEERS[name]
    except KeyError:
        raise ValueError(f"unknown queue {name!r}; choose from {', '.join(PEERS)}") from None
    adapter: type[Peer] = getattr(importlib.import_module(module), cls)
    return adapter


def modes_of(name: str) -> tuple[str, ...]:
    """The modes a queue runs in."""
    return _adapter(name).modes


def get(name: str, mode: str = DEFAULT) -> Peer:
    """The adapter for one queue name in one mode (adapter modules import no peer library at import time)."""
    adapter = _adapter(name)
    if mode not in modes_of(name):
        raise ValueError(f"queue {name!r} has no mode {mode!r}; it has {', '.join(modes_of(name))}")
    peer: Peer = adapter(mode)
    return peer
