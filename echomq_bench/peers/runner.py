"""The machinery under the `peers` command: one peer, one trial, one server, and the
interleaved rounds over all of them.

For each server, trial and queue: a fresh server (an embedded build is
started anew; a running server's database must be empty and is flushed
after each queue), one producer process enqueues N jobs with a 64-byte
payload, then C consumer processes drain them. Around each phase the runner
reads INFO cpu, INFO commandstats and INFO memory, and nothing else, so
the server's figures are the peer's own. Afterwards it counts, with plain
commands on the peer's keys, that nothing is left pending or kept, and the
consumers report how many times the job function ran.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from echomq_bench.measurement import serverstats
from echomq_bench.peers import PEERS, get
from echomq_bench.peers.base import PeerMissingError
from echomq_bench.peers.children import SETUP_TIMEOUT_S, Child, RunnerError, pump
from echomq_bench.peers.result import PeerRun, Phase
from echomq_bench.progress import Progress
from echomq_bench.records import meta as meta_mod
from echomq_bench.servers import EmbeddedServer, Server, ServerSpec, UrlServer, start

__all__ = ["PeersSettings", "PeersOutcome", "measure", "run_rounds", "choose_queues", "check_empty",
           "remove_tree", "Progress", "QUEUE_NAME", "MAX_JOBS", "MAX_CONSUMERS"]

QUEUE_NAME = "peers"
MAX_JOBS = 10_000_000
MAX_CONSUMERS = 64

Tick = Callable[[str, int], None]


@dataclass(frozen=True)
class PeersSettings:
    """One peers run: how many jobs, consumers and rounds, on which servers."""

    jobs: int
    consumers: int
    trials: int
    timeout_s: float
    servers: tuple[ServerSpec, ...]


@dataclass
class PeersOutcome:
    """What the rounds produced: the clean and unclean runs, the failures, each server described once."""

    runs: list[PeerRun] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    described: dict[str, dict[str, Any]] = field(default_factory=dict)


# -- one peer, one trial -----------------------------------------------------

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


@dataclass(frozen=True)
class _Trial:
    """Where one peer's trial runs and how its children are configured."""

    server: Server
    peer_name: str
    n: int
    consumers: int
    trial: int
    log_dir: Path
    timeout_s: float
    tick: Tick
    url: str

    def config(self, role: str) -> dict[str, Any]:
        return {"role": role, "peer": self.peer_name, "url": self.url, "queue": QUEUE_NAME, "n": self.n}

    def log(self, role: str) -> Path:
        return self.log_dir / f"{self.server.name}-{self.peer_name}-t{self.trial}-{role}.log"


def _enqueue(t: _Trial, admin: Any, children: list[Child]) -> tuple[Phase, int, int, int]:
    """One producer enqueues n jobs: the phase, memory before and after, jobs accepted."""
    producer = Child(t.config("produce"), t.log("produce"))
    children.append(producer)
    pump([producer], lambda c: c.ready, SETUP_TIMEOUT_S, "get ready")
    mem0 = used_memory(admin)
    s0 = serverstats.sample(admin)
    t0 = time.perf_counter()
    producer.go()
    pump([producer], lambda c: c.done_at is not None, t.timeout_s, "enqueue",
         lambda: t.tick("enqueue", producer.progress))
    s1 = serverstats.sample(admin)
    mem1 = used_memory(admin)
    pump([producer], lambda c: c.result is not None, SETUP_TIMEOUT_S, "report and exit")
    assert producer.done_at is not None and producer.result is not None
    enqueue = Phase(t.n, producer.done_at - t0, serverstats.usage(s0, s1), producer.result["cpu_s"])
    producer.close()
    return enqueue, mem0, mem1, int(producer.result["accepted"])


def _drain(t: _Trial, admin: Any, children: list[Child]) -> tuple[Phase, list[dict[str, Any]]]:
    """`t.consumers` consumer processes drain the queue: the phase and each consumer's report."""
    workers = [Child(t.config("consume"), t.log(f"consume{i}")) for i in range(t.consumers)]
    children.extend(workers)
    pump(workers, lambda c: c.ready, SETUP_TIMEOUT_S, "get ready")
    s2 = serverstats.sample(admin)
    t2 = time.perf_counter()
    for w in workers:
        w.go()
    pump(workers, lambda c: c.done_at is not None, t.timeout_s, "drain",
         lambda: t.tick("drain", sum(w.progress for w in workers)))
    s3 = serverstats.sample(admin)
    pump(workers, lambda c: c.result is not None, SETUP_TIMEOUT_S, "report and exit")
    done: list[dict[str, Any]] = []
    done_at: list[float] = []
    for w in workers:
        assert w.done_at is not None and w.result is not None  # the pumps above waited for both
        done.append(w.result)
        done_at.append(w.done_at)
    drain = Phase(t.n, max(done_at) - t2, serverstats.usage(s2, s3), sum(r["cpu_s"] for r in done))
    for w in workers:
        w.close()
    return drain, done


def measure(server: Server, peer_name: str, n: int, consumers: int, *, trial: int = 0,
            log_dir: Path, timeout_s: float = 600.0, tick: Tick = lambda phase, done: None) -> PeerRun:
    """Enqueue n jobs with one producer, drain them with `consumers` consumers, on this server."""
    admin = server.client()
    try:
        admin.config_resetstat()
    except Exception:  # a managed server may refuse CONFIG; deltas still hold
        pass
    t = _Trial(server, peer_name, n, consumers, trial, log_dir, timeout_s, tick, child_url(server))
    children: list[Child] = []
    try:
        return _run_trial(t, admin, children)
    finally:
        for child in children:
            child.kill()
        admin.close()


def _run_trial(t: _Trial, admin: Any, children: list[Child]) -> PeerRun:
    peer = get(t.peer_name)
    version = t.server.version()
    enqueue, mem0, mem1, accepted = _enqueue(t, admin, children)
    # Outside both measured windows: what the server holds once enqueued.
    queued = peer.leftovers(admin, QUEUE_NAME)
    drain, done = _drain(t, admin, children)
    # Once the consumers are gone, so that their connection buffers are not counted as the queue's.
    mem2 = used_memory(admin)
    left = peer.leftovers(admin, QUEUE_NAME)
    keys = [k.decode("utf-8", "replace") for k in admin.scan_iter(count=1000)]
    return PeerRun(
        server=t.server.name, server_version=version, queue=t.peer_name, trial=t.trial, jobs=t.n,
        consumers=t.consumers, enqueue=enqueue, drain=drain,
        used_memory_before=mem0, used_memory_enqueued=mem1, used_memory_drained=mem2,
        accepted=accepted,
        ran=sum(r["ran"] for r in done), intact=sum(r["intact"] for r in done),
        after_enqueue={"pending": queued.pending, "rows": queued.rows, "detail": queued.detail},
        leftovers={"pending": left.pending, "kept": left.kept, "rows": left.rows, "detail": left.detail},
        keys_after=len(keys), key_sample=sorted(keys)[:20],
    )


# -- the rounds ------------------------------------------------------------------

def run_rounds(settings: PeersSettings, names: list[str], log_dir: Path) -> PeersOutcome:
    """Every queue on every server, once per trial, interleaved so drift hits them alike."""
    outcome = PeersOutcome()
    total = len(settings.servers) * settings.trials * len(names)
    step = 0
    progress = Progress()
    for trial in range(settings.trials):
        for spec in settings.servers:
            for name in names:
                step += 1
                label = f"[{step}/{total}] {spec.name} {name} trial {trial + 1}/{settings.trials}"
                _one_round(settings, spec, name, trial, log_dir, label, progress, outcome)
    return outcome


def _one_round(settings: PeersSettings, spec: ServerSpec, name: str, trial: int, log_dir: Path, label: str,
               progress: Progress, outcome: PeersOutcome) -> None:
    try:
        with _fresh(spec) as server:
            outcome.described.setdefault(spec.name, meta_mod.describe_server(server))
            pr = measure(server, name, settings.jobs, settings.consumers, trial=trial, log_dir=log_dir,
                         timeout_s=settings.timeout_s,
                         tick=lambda phase, done: progress.show(f"{label}: {phase} {done:,}/{settings.jobs:,}"))
    except PeerMissingError as exc:
        progress.end(f"{label}: skipped: {exc}")
        outcome.skipped[name] = str(exc)
        return
    except (RunnerError, OSError) as exc:
        progress.end(f"{label}: FAILED: {exc}")
        outcome.failures.append({"server": spec.name, "queue": name, "trial": trial, "error": str(exc)})
        return
    outcome.runs.append(pr)
    verdict = "ok" if pr.clean else "NOT CLEAN: " + "; ".join(pr.problems())
    progress.end(f"{label}: enqueue {pr.enqueue.jobs_per_s:,.0f}/s, drain {pr.drain.jobs_per_s:,.0f}/s, "
                 f"server {pr.server_us_per_job:.1f} µs/job, {pr.commands_per_job:.1f} cmds/job -- {verdict}")


def choose_queues(asked: list[str]) -> tuple[list[str], dict[str, str]]:
    """The queues to run and, for each one left out, why.

    Every queue by default, skipping those whose package is missing; a
    queue asked for by name whose package is missing is an error instead
    (PeerMissingError), since the run could not be what was asked for.
    """
    asked = list(dict.fromkeys(asked))
    names, skipped = [], {}
    for name in asked or list(PEERS):
        try:
            get(name).check()
        except PeerMissingError as exc:
            if asked:
                raise PeerMissingError(f"queue {name!r} was asked for, but {exc}") from None
            skipped[name] = str(exc)
            continue
        names.append(name)
    return names, skipped


def check_empty(spec: ServerSpec) -> str | None:
    server = start(spec)
    with server.client() as client:
        size = int(client.dbsize())
    if size:
        return (f"server {spec.name!r} holds {size} keys in its database; peers writes there and flushes it "
                "after each queue, so give it an empty database (another /DB in the URL)")
    return None


class _fresh:
    """An embedded server started for one peer run, or a URL server flushed after it."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.server: Server | None = None

    def __enter__(self) -> Server:
        self.server = start(self.spec)
        return self.server

    def __exit__(self, *exc: object) -> None:
        assert self.server is not None
        if isinstance(self.server, EmbeddedServer):
            self.server.stop()
        else:
            with self.server.client() as client:
                client.flushdb()


def remove_tree(path: Path) -> None:
    for child in path.iterdir():
        child.unlink()
    path.rmdir()

