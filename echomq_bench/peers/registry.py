"""The queues `peers` knows: each name's adapter, found by module and class
and imported only when asked for, so the core install needs no peer library.

The package's `__init__` re-exports this; the package's own modules import it
from here.
"""

from __future__ import annotations

import importlib

from echomq_bench.peers.base import DEFAULT, Peer

__all__ = ["PEERS", "BASELINE", "HEADLINE", "get", "modes_of"]

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
# The queue whose ratio to BASELINE is the run's headline, sized by its own rounds.
HEADLINE = "echomq"


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
