"""The interleaved rounds of a `peers` run: every queue in every mode on every
server, once per trial, each on a fresh server.

An embedded build is started anew for every queue and trial; a server given
by URL must have an empty database, and is flushed after each queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from echomq_bench.peers import PEERS, get, modes_of
from echomq_bench.peers.base import PeerMissingError
from echomq_bench.peers.children import RunnerError
from echomq_bench.peers.result import PeerRun
from echomq_bench.peers.runner import Watch, measure
from echomq_bench.progress import Progress
from echomq_bench.records import meta as meta_mod
from echomq_bench.servers import EmbeddedServer, Server, ServerSpec, start

__all__ = ["PeersSettings", "PeersOutcome", "run_rounds", "choose_queues", "pairs", "check_empty", "remove_tree"]


@dataclass(frozen=True)
class PeersSettings:
    """One peers run: how many jobs, consumers and rounds, in which modes, on which servers."""

    jobs: int
    consumers: int
    trials: int
    timeout_s: float
    servers: tuple[ServerSpec, ...]
    modes: tuple[str, ...]


@dataclass
class PeersOutcome:
    """What the rounds produced: the clean and unclean runs, the failures, each server described once."""

    runs: list[PeerRun] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    described: dict[str, dict[str, Any]] = field(default_factory=dict)


def pairs(names: list[str], modes: tuple[str, ...]) -> list[tuple[str, str]]:
    """(queue, mode) in the report's order: each queue in each asked mode it has."""
    return [(name, mode) for name in names for mode in modes if mode in modes_of(name)]


def run_rounds(settings: PeersSettings, names: list[str], log_dir: Path) -> PeersOutcome:
    """Every queue in every mode on every server, once per trial, interleaved so drift hits them alike."""
    outcome = PeersOutcome()
    todo = pairs(names, settings.modes)
    total = len(settings.servers) * settings.trials * len(todo)
    step = 0
    progress = Progress()
    for trial in range(settings.trials):
        for spec in settings.servers:
            for name, mode in todo:
                step += 1
                label = f"[{step}/{total}] {spec.name} {name} ({mode}) trial {trial + 1}/{settings.trials}"
                _one_round(settings, spec, (name, mode), trial, log_dir, label, progress, outcome)
    return outcome


def _one_round(settings: PeersSettings, spec: ServerSpec, queue: tuple[str, str], trial: int, log_dir: Path,
               label: str, progress: Progress, outcome: PeersOutcome) -> None:
    name, mode = queue
    try:
        with _fresh(spec) as server:
            outcome.described.setdefault(spec.name, meta_mod.describe_server(server))
            watch = Watch(settings.timeout_s,
                          lambda phase, done: progress.show(f"{label}: {phase} {done:,}/{settings.jobs:,}"))
            pr = measure(server, name, settings.jobs, settings.consumers, mode=mode, trial=trial, log_dir=log_dir,
                         watch=watch)
    except PeerMissingError as exc:
        progress.end(f"{label}: skipped: {exc}")
        outcome.skipped[name] = str(exc)
        return
    except (RunnerError, OSError) as exc:
        progress.end(f"{label}: FAILED: {exc}")
        outcome.failures.append({"server": spec.name, "queue": name, "mode": mode, "trial": trial,
                                 "error": str(exc)})
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
