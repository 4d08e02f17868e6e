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

from echomq_bench.peers.base import (DEFAULT, EXTRA_HINT, MODES, PAYLOAD, PAYLOAD_BYTES, THROUGHPUT, Leftovers,
                                     Peer, PeerMissingError)
from echomq_bench.peers.registry import BASELINE, PEERS, get, modes_of

__all__ = ["PEERS", "BASELINE", "get", "modes_of", "Peer", "Leftovers", "PeerMissingError", "PAYLOAD",
           "PAYLOAD_BYTES", "EXTRA_HINT", "DEFAULT", "THROUGHPUT", "MODES"]
