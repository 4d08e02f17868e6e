"""What every peer adapter provides, and the one job they all run.

An adapter drives one queue library the way its own documentation says to:
its producer API to enqueue, its own worker to drain, in one of two modes:
`default` (the library's defaults) and `throughput` (its documented
high-throughput settings). The runner never imports a peer library; it
starts child processes (`python -m echomq_bench.peers`, or the command an
adapter names, such as node) that do, so a missing package is a note, and
each side's CPU is its own.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, AsyncContextManager, Awaitable, Callable, Protocol

from echomq_bench.errors import BenchError

__all__ = [
    "Enqueue",
    "produce_async",
    "enqueue_in_flight",
    "PAYLOAD",
    "PAYLOAD_BYTES",
    "EXTRA_HINT",
    "ARQ_HINT",
    "PeerMissingError",
    "DEFAULT",
    "THROUGHPUT",
    "MODES",
    "PYTHON_CHILD",
    "NODE_DIR",
    "Gate",
    "Peer",
    "Leftovers",
    "require",
    "version_of",
]

PAYLOAD_BYTES = 64
# 64 ASCII bytes: each peer carries it as the job's one argument through its
# own serializer (BullMQ JSON, RQ and arq pickle, echomq raw bytes).
PAYLOAD = ("0123456789abcdef" * 4)[:PAYLOAD_BYTES]
EXTRA_HINT = "pip install -e '.[peers]'"
# arq cannot share the extra with bullmq (see pyproject.toml): it goes in after it, without its pin.
ARQ_HINT = "pip install -e '.[peers]' && pip install --no-deps 'arq==0.28.0'"


DEFAULT, THROUGHPUT = "default", "throughput"
MODES: tuple[str, ...] = (DEFAULT, THROUGHPUT)
# The child process most adapters run in: this package's own entry point.
PYTHON_CHILD: tuple[str, ...] = (sys.executable, "-m", "echomq_bench.peers")
# Where setup.sh installs the npm packages (BullMQ on Node): .peers/node in the checkout,
# or the folder ECHOMQ_PEERS_NODE names.
NODE_DIR = Path(os.environ.get("ECHOMQ_PEERS_NODE") or Path(__file__).resolve().parents[2] / ".peers" / "node")


class PeerMissingError(BenchError):
    """The peer's package is not installed; the message says how to get it."""


def require(module: str, distribution: str, hint: str = EXTRA_HINT) -> Any:
    """Import a peer library or say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PeerMissingError(
            f"the {distribution!r} package is not installed ({exc}); install the peers extra: {hint}"
        ) from None


def version_of(distribution: str) -> str | None:
    """A Python distribution's version, or an npm package's (`npm:NAME`) as installed in NODE_DIR."""
    if distribution.startswith("npm:"):
        manifest = NODE_DIR / "node_modules" / distribution.removeprefix("npm:") / "package.json"
        try:
            return str(json.loads(manifest.read_text())["version"])
        except (OSError, ValueError, KeyError):
            return None
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


class Gate(Protocol):
    """The child's side of the runner's barrier.

    `ready()` says setup is done (connections open, scripts loaded) and
    blocks until the runner starts the clock; `done()` stops this process's
    clock the moment its share of the work is finished, before teardown
    (`at`, a perf_counter time, when that moment has already passed).
    """

    stop: threading.Event  # set when the runner has seen every job run: a worker with no burst mode stops

    def ready(self) -> None: ...

    def done(self, at: float | None = None) -> None: ...


@dataclass(frozen=True)
class Leftovers:
    """What the server still holds of a queue after the drain, counted with
    plain commands on the peer's own keys:

    pending  jobs in any unfinished state (waiting, active, delayed, failed)
    kept     finished jobs the peer kept (results, a completed set)
    rows     job records (hashes, strings) still present, whatever their state

    All three are zero after a full drain with remove-on-complete."""

    pending: int
    kept: int
    rows: int
    detail: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return self.pending == 0 and self.kept == 0 and self.rows == 0


class Peer(Protocol):
    """One queue library in one mode; `get(name, mode)` builds it as `Adapter(mode)`."""

    name: str
    distribution: str          # the package whose version the report names
    modes: tuple[str, ...]     # the modes it runs in, DEFAULT first
    mode: str
    drain_mode: str            # one line: how the consumers take jobs, in this mode
    enqueue_mode: str          # one line: how the producer adds them
    child: tuple[str, ...]     # the command of its child processes (PYTHON_CHILD for most)

    def __init__(self, mode: str) -> None: ...

    def check(self) -> None:
        """Raise PeerMissingError when the library cannot be imported."""

    def settings(self, consumers: int) -> dict[str, Any]:
        """The settings this run uses, named for the report."""

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        """Enqueue n jobs carrying PAYLOAD; return how many were accepted."""

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        """Run this peer's worker until the queue is empty; every job calls jobs.run_job."""

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        """Count, with plain commands, what remains of the queue on the server."""


def count_keys(client: Any, pattern: str) -> int:
    """Keys matching a glob, by SCAN (never KEYS: a benchmark server may be big)."""
    return sum(1 for _ in client.scan_iter(match=pattern, count=1000))


async def enqueue_in_flight(n: int, in_flight: int, enqueue_one: Callable[[], Awaitable[Any]],
                            progress: Callable[[int], None]) -> int:
    """n enqueues for a library with no bulk add, `in_flight` awaited at a
    time; how many the library accepted (a None reply is a refusal)."""
    sent = accepted = 0
    while sent < n:
        size = min(in_flight, n - sent)
        got = await asyncio.gather(*(enqueue_one() for _ in range(size)))
        accepted += sum(1 for job in got if job is not None)
        sent += size
        if sent % 1000 < in_flight:
            progress(sent)
    progress(sent)
    return accepted


# What an async producer enqueues with once connected: (n, progress) -> jobs accepted.
Enqueue = Callable[[int, Callable[[int], None]], Awaitable[int]]


def produce_async(connect: Callable[[], AsyncContextManager[Enqueue]], n: int, gate: Gate,
                  progress: Callable[[int], None], *, done_after_close: bool = False) -> int:
    """The producer of an asyncio library: connect (before the clock), enqueue n
    jobs (timed), close. `connect()` opens the library's client and yields its
    `Enqueue`; leaving it closes the client. The clock stops once the last job
    is enqueued; `done_after_close` tells the runner so only once the client is
    closed, for a library whose open connections would be counted in the
    server's memory after the enqueue."""

    async def run() -> int:
        async with connect() as enqueue:
            gate.ready()
            accepted = await enqueue(n, progress)
            enqueued_at = time.perf_counter()
            if not done_after_close:
                gate.done(at=enqueued_at)
        if done_after_close:
            gate.done(at=enqueued_at)
        return accepted

    return asyncio.run(run())
