"""The interleaved rounds of a `peers` run: every queue in every mode on every
server, once per trial, each on a fresh server; then, with a precision, the
headline rounds: the headline pair alone.

An embedded build is started anew for every queue and trial; a server given
by URL must have an empty database, and is flushed after each queue.

The headline is echomq's server µs per job against the baseline queue's, in
each mode on each server. Its trial-to-trial spread is wider than the
rounds every queue gets can narrow, so after them echomq and the baseline
run on alone, round after round, until every headline ratio's interval over
the headline rounds (never pooled with the interleaved ones: see
`echomq_bench.peers.headline`) is within ±precision at the headline's
level, or `max_trials` headline rounds, or the run has taken `budget_s`.
The rule looks at how wide the intervals are, never at where they lie, so
the verdicts keep the error rates of a fixed number of trials (as compare's
adaptive runs do). Every run is tagged with its kind of round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from echomq_bench.measurement.verdicts import precision_reached
from echomq_bench.peers.registry import BASELINE, HEADLINE, PEERS, get, modes_of
from echomq_bench.peers.base import PeerMissingError
from echomq_bench.peers.headline import headline_level, headline_ratios
from echomq_bench.peers.result import HEADLINE_ROUNDS, INTERLEAVED, PeerRun
from echomq_bench.peers.runner import RunnerError, Watch, measure
from echomq_bench.progress import Progress
from echomq_bench.records import meta as meta_mod
from echomq_bench.servers import EmbeddedServer, Server, ServerSpec, start

__all__ = ["PeersSettings", "PeersOutcome", "run_rounds", "choose_queues", "pairs", "check_empty", "remove_tree",
           "HEADLINE"]


@dataclass(frozen=True)
class PeersSettings:
    """One peers run: how many jobs, consumers and rounds, in which modes, on which servers."""

    jobs: int
    consumers: int
    trials: int
    timeout_s: float
    servers: tuple[ServerSpec, ...]
    modes: tuple[str, ...]
    precision: float | None = None   # the headline pair runs on until each ratio is within ±precision
    max_trials: int = 0              # the most headline rounds (the pair alone), beyond the `trials` rounds
    budget_s: float = float("inf")   # no headline round starts once the run has taken this long


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
    """Every queue in every mode on every server, once per trial, interleaved so drift hits them alike;
    then the headline pair alone until its ratios are precise enough (see the module's docstring)."""
    started = time.monotonic()
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
                _one_round(settings, spec, (name, mode), (trial, INTERLEAVED), log_dir, label, progress, outcome)
    _headline_rounds(settings, names, log_dir, outcome, progress, started)
    return outcome


def _headline_rounds(settings: PeersSettings, names: list[str], log_dir: Path, outcome: PeersOutcome,
                     progress: Progress, started: float) -> None:
    if settings.precision is None or HEADLINE not in names or BASELINE not in names:
        return
    precision = settings.precision
    todo = pairs([HEADLINE, BASELINE], settings.modes)
    modes = list(dict.fromkeys(mode for _, mode in todo))
    level = headline_level(len(modes))

    def precise() -> bool:
        return all(precision_reached(headline_ratios(outcome.runs, spec.name, mode), precision, level)
                   for spec in settings.servers for mode in modes)

    done = 0   # headline rounds; numbered on from the interleaved rounds, so a trial index names one round
    while done < settings.max_trials and not precise():
        if time.monotonic() - started >= settings.budget_s:
            progress.end(f"headline: the run's budget of {settings.budget_s:.0f} s is spent after {done} "
                         "headline rounds")
            return
        for spec in settings.servers:
            for name, mode in todo:
                label = f"[headline] {spec.name} {name} ({mode}) round {done + 1}/{settings.max_trials} at most"
                _one_round(settings, spec, (name, mode), (settings.trials + done, HEADLINE_ROUNDS), log_dir, label,
                           progress, outcome)
        done += 1
    if precise():
        progress.end(f"headline: every ratio of {HEADLINE} to {BASELINE} is within ±{precision:.0%} at "
                     f"{level:.1%} after {done} headline rounds")


def _one_round(settings: PeersSettings, spec: ServerSpec, queue: tuple[str, str], round_: tuple[int, str],
               log_dir: Path, label: str, progress: Progress, outcome: PeersOutcome) -> None:
    """One queue's run in one round: `round_` is the trial index and the kind of round."""
    name, mode = queue
    trial, kind = round_
    try:
        with _fresh(spec) as server:
            outcome.described.setdefault(spec.name, meta_mod.describe_server(server))
            watch = Watch(settings.timeout_s,
                          lambda phase, done: progress(f"{label}: {phase} {done:,}/{settings.jobs:,}"))
            pr = measure(server, name, settings.jobs, settings.consumers, mode=mode, trial=trial, log_dir=log_dir,
                         watch=watch)
    except PeerMissingError as exc:
        progress.end(f"{label}: skipped: {exc}")
        outcome.skipped[name] = str(exc)
        return
    except (RunnerError, OSError) as exc:
        progress.end(f"{label}: FAILED: {exc}")
        outcome.failures.append({"server": spec.name, "queue": name, "mode": mode, "trial": trial,
                                 "error": str(exc), "rounds": kind})
        return
    pr = replace(pr, rounds=kind)
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
