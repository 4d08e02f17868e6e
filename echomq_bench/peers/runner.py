"""One peer in one mode, one trial, on one server: what the `peers` rounds repeat.

One producer process enqueues N jobs with a 64-byte payload, then C
consumer processes drain them. Around each phase the runner reads INFO
stats, cpu, commandstats and memory, and nothing else, so the server's
figures are the peer's own. A consumer whose library has no burst mode is
told to stop once the consumers together report N jobs run. Afterwards the
runner counts, with plain commands on the peer's keys, that nothing is left
pending or kept, and the consumers report how many times the job function ran.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from echomq_bench.errors import MeasurementError
from echomq_bench.load.harness import Child, Harness
from echomq_bench.measurement import serverstats
from echomq_bench.peers.base import DEFAULT
from echomq_bench.peers.registry import get
from echomq_bench.peers.base import PeerMissingError
from echomq_bench.peers.result import PeerRun, Phase
from echomq_bench.servers import Server, UrlServer

__all__ = ["measure", "Watch", "child_url", "RunnerError", "QUEUE_NAME", "MAX_JOBS", "MAX_CONSUMERS", "OWN_READS",
           "SETUP_TIMEOUT_S"]

QUEUE_NAME = "peers"
MAX_JOBS = 10_000_000
MAX_CONSUMERS = 64
SETUP_TIMEOUT_S = 60.0
EXIT_S = 10.0   # for a child to exit once it has reported

Tick = Callable[[str, int], None]


class RunnerError(MeasurementError):
    """A peer's run went wrong; the message says what and where its log is."""


# Read events the runner's own INFO calls add between two readings of
# total_reads_processed: the two of one sample, the two of the next, and
# the closing INFO stats itself (the server counts a read before running it).
OWN_READS = 5


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


def reads_processed(client: Any) -> int:
    """The server's read events so far: one per request the client sent, a pipeline counted once
    (a request larger than the server's read buffer counts more than once)."""
    return int(client.info("stats")["total_reads_processed"])


@dataclass(frozen=True)
class _Trial:
    """Where one peer's trial runs and how its children are configured."""

    server: Server
    peer_name: str
    mode: str
    command: tuple[str, ...]
    n: int
    consumers: int
    trial: int
    log_dir: Path
    timeout_s: float
    tick: Tick
    url: str

    def config(self, role: str) -> dict[str, Any]:
        return {"role": role, "peer": self.peer_name, "mode": self.mode, "url": self.url, "queue": QUEUE_NAME,
                "n": self.n}

    def log(self, role: str) -> Path:
        return self.log_dir / f"{self.server.name}-{self.peer_name}-{self.mode}-t{self.trial}-{role}.log"

    def child(self, harness: Harness, role: str) -> Child:
        label = f"{self.peer_name} ({self.mode}) {role}"
        return harness.spawn(label, self.command, self.config(role), self.log(role))


def _children() -> Harness:
    """The harness of one phase's children: each speaks the line protocol of `echomq_bench.peers.__main__`."""
    return Harness(error=RunnerError, grace_s=EXIT_S, fatal={"missing": PeerMissingError})


def _ran(child: Child) -> int:
    return int(child.heard.get("progress", 0))


def _enqueue(t: _Trial, admin: Any) -> tuple[Phase, int, int, int]:
    """One producer enqueues n jobs: the phase, memory before and after, jobs accepted."""
    with _children() as harness:
        producer = t.child(harness, "produce")
        harness.ready(SETUP_TIMEOUT_S)
        mem0 = used_memory(admin)
        r0 = reads_processed(admin)
        s0 = serverstats.sample(admin)
        t0 = time.perf_counter()
        harness.go()
        (done_at,) = harness.wait_for("done", t.timeout_s, "enqueue", tick=lambda: t.tick("enqueue", _ran(producer)))
        s1 = serverstats.sample(admin)
        reads = reads_processed(admin) - r0 - OWN_READS
        mem1 = used_memory(admin)
        (result,) = [json.loads(r) for r in harness.results(SETUP_TIMEOUT_S)]
    enqueue = Phase(t.n, float(done_at) - t0, serverstats.usage(s0, s1), result["cpu_s"], reads)
    return enqueue, mem0, mem1, int(result["accepted"])


def _drain(t: _Trial, admin: Any) -> tuple[Phase, list[dict[str, Any]]]:
    """`t.consumers` consumer processes drain the queue: the phase and each consumer's report."""
    with _children() as harness:
        workers = [t.child(harness, f"consume{i}") for i in range(t.consumers)]
        harness.ready(SETUP_TIMEOUT_S)
        r2 = reads_processed(admin)
        s2 = serverstats.sample(admin)
        t2 = time.perf_counter()
        harness.go()
        stopped = False

        def watch() -> None:
            nonlocal stopped
            ran = sum(_ran(w) for w in workers)
            t.tick("drain", ran)
            if ran >= t.n and not stopped:  # every job has run: a worker with no burst mode may go
                stopped = True
                for w in workers:
                    w.send("stop")

        done_at = [float(at) for at in harness.wait_for("done", t.timeout_s, "drain", tick=watch)]
        s3 = serverstats.sample(admin)
        reads = reads_processed(admin) - r2 - OWN_READS
        done = [json.loads(r) for r in harness.results(SETUP_TIMEOUT_S)]
    drain = Phase(t.n, max(done_at) - t2, serverstats.usage(s2, s3), sum(r["cpu_s"] for r in done), reads)
    return drain, done


@dataclass(frozen=True)
class Watch:
    """How the runner waits on a trial: how long a phase may take, and what it shows meanwhile."""

    timeout_s: float = 600.0
    tick: Tick = lambda phase, done: None


def measure(server: Server, peer_name: str, n: int, consumers: int, *, mode: str = DEFAULT, trial: int = 0,
            log_dir: Path, watch: Watch = Watch()) -> PeerRun:
    """Enqueue n jobs with one producer, drain them with `consumers` consumers, on this server."""
    peer = get(peer_name, mode)
    admin = server.client()
    try:
        admin.config_resetstat()
    except Exception:  # a managed server may refuse CONFIG; deltas still hold
        pass
    t = _Trial(server, peer_name, mode, peer.child, n, consumers, trial, log_dir, watch.timeout_s, watch.tick,
               child_url(server))
    try:
        return _run_trial(t, admin)
    finally:
        admin.close()


def _run_trial(t: _Trial, admin: Any) -> PeerRun:
    peer = get(t.peer_name, t.mode)
    version = t.server.version()
    enqueue, mem0, mem1, accepted = _enqueue(t, admin)
    # Outside both measured windows: what the server holds once enqueued.
    queued = peer.leftovers(admin, QUEUE_NAME)
    drain, done = _drain(t, admin)
    # Once the consumers are gone, so that their connection buffers are not counted as the queue's.
    mem2 = used_memory(admin)
    left = peer.leftovers(admin, QUEUE_NAME)
    keys = [k.decode("utf-8", "replace") for k in admin.scan_iter(count=1000)]
    return PeerRun(
        server=t.server.name, server_version=version, queue=t.peer_name, mode=t.mode, trial=t.trial, jobs=t.n,
        consumers=t.consumers, enqueue=enqueue, drain=drain,
        used_memory_before=mem0, used_memory_enqueued=mem1, used_memory_drained=mem2,
        accepted=accepted,
        ran=sum(r["ran"] for r in done), intact=sum(r["intact"] for r in done),
        after_enqueue={"pending": queued.pending, "rows": queued.rows, "detail": queued.detail},
        leftovers={"pending": left.pending, "kept": left.kept, "rows": left.rows, "detail": left.detail},
        keys_after=len(keys), key_sample=sorted(keys)[:20],
    )
