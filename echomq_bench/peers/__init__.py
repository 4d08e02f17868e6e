"""echomq (through its Worker) beside BullMQ, RQ and arq: the same no-op jobs, the same server.

One adapter module per queue library; `runner` is the `peers` command, and
`python -m echomq_bench.peers` is the child process that runs one producer or one
consumer of one adapter. Peer libraries are imported only by the adapters,
so the core install needs none of them (they come with the `peers` extra).
"""

from __future__ import annotations

import importlib

from echomq_bench.peers.base import EXTRA_HINT, PAYLOAD, PAYLOAD_BYTES, Leftovers, Peer, PeerMissingError

__all__ = ["PEERS", "get", "Peer", "Leftovers", "PeerMissingError", "PAYLOAD", "PAYLOAD_BYTES", "EXTRA_HINT"]

# queue name -> (module, class); the order is the report's order.
PEERS: dict[str, tuple[str, str]] = {
    "echomq": ("echomq_bench.peers.echomq", "EchoMQ"),
    "echomq-raw": ("echomq_bench.peers.echomq", "EchoMQRaw"),
    "bullmq": ("echomq_bench.peers.bullmq", "BullMQ"),
    "rq": ("echomq_bench.peers.rq", "RQ"),
    "arq": ("echomq_bench.peers.arq", "Arq"),
}


def get(name: str) -> Peer:
    """The adapter for one queue name (the adapter modules import no peer library at import time)."""
    try:
        module, cls = PEERS[name]
    except KeyError:
        raise ValueError(f"unknown queue {name!r}; choose from {', '.join(PEERS)}") from None
    adapter: type[Peer] = getattr(importlib.import_module(module), cls)
    return adapter()
