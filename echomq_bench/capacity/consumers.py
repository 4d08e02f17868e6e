"""Throughput against consumers, in trials: one window at one consumer count
on one server, every build at every count once per round, in an order drawn
per round (docs/design/consumers.md).

Builds and counts alternate instead of running back to back, so a slow
minute of a shared machine falls on a random few windows of every build
and count, where a round's ratio and the interval over rounds see it,
rather than on one build's whole curve or always on its last count. Each
consumer is one connection with one claim or complete in flight: a pool of
plain workers, not the pipelined driver of the capacity command.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Sequence

from echomq_bench.capacity.result import CapacityFigures, CapacityResult
from echomq_bench.capacity.runner import run_capacity
from echomq_bench.capacity.settings import CapacityError, CapacitySettings
from echomq_bench.progress import ProgressFn, silent

__all__ = ["ConsumerTrials", "Slot", "schedule", "run_consumer_trials"]


@dataclass(frozen=True)
class ConsumerTrials:
    """How the consumers part measures: the counts, the rounds, each window's length."""

    counts: tuple[int, ...]
    trials: int            # rounds; every build at every count once in each
    window_s: float
    warmup_s: float

    def check(self) -> None:
        if len(set(self.counts)) < 2 or min(self.counts) < 1:
            raise CapacityError(f"consumers need two or more distinct counts of at least 1, got {self.counts}")
        if self.trials < 1:
            raise CapacityError(f"consumers need at least one trial, got {self.trials}")


@dataclass(frozen=True)
class Slot:
    """One window of the schedule: which round, which build (by its index), how many consumers."""

    trial: int       # from 1
    build: int
    consumers: int


def schedule(builds: int, counts: Sequence[int], trials: int, seed: int) -> list[Slot]:
    """Round after round, each holding every (build, count) once in an order drawn from `seed` and the round."""
    out: list[Slot] = []
    for trial in range(1, trials + 1):
        pairs = [(b, c) for b in range(builds) for c in counts]
        random.Random(f"{seed}:{trial}").shuffle(pairs)
        out += [Slot(trial, b, c) for b, c in pairs]
    return out


def run_consumer_trials(servers: Sequence[Any], how: ConsumerTrials, seed: int,
                        progress: ProgressFn = silent) -> list[dict[str, Any]]:
    """Every slot of the schedule on the running `servers`: the capacity driver's tidy rows,
    each with its consumers, trial (round) and order (its place in the whole run)."""
    how.check()
    rows: list[dict[str, Any]] = []
    slots = schedule(len(servers), how.counts, how.trials, seed)
    for order, slot in enumerate(slots, 1):
        server = servers[slot.build]
        settings = CapacitySettings(duration_s=how.window_s, warmup_s=how.warmup_s, connections=slot.consumers,
                                    pipeline=1, ceiling=False, pin=False)
        progress(f"[{order}/{len(slots)}] trial {slot.trial}: {server.name}, {slot.consumers} consumers")
        result = run_capacity(server, settings)
        rows.extend(_without_latency(result).rows(consumers=slot.consumers, trial=slot.trial, order=order))
    return rows


def _without_latency(result: CapacityFigures) -> CapacityFigures:
    """The result without its latency histograms: summing them takes about 0.3 s a window here, a third of
    what a window costs beside its own time, and the question is throughput and its bound."""
    return replace(result, latency={}) if isinstance(result, CapacityResult) else result
