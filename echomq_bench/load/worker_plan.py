"""What one capacity driver worker is told: its plan, its window, its time
slots, and the engine policies the plan stands for.

A `WorkerPlan` travels to a worker process by pickle, so it holds plain
values (a work distribution's text, not the parsed object); the worker turns
it into the load engine's `ConsumerPolicy` and `ProducerPolicy`, the same
policies every other loop of the suite is driven by.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from echomq_bench.load.policy import ConsumerPolicy, ProducerPolicy
from echomq_bench.measurement.workdist import parse_dist
from echomq_bench.load.wire import Target

__all__ = ["WorkerPlan", "Window", "slot_owner", "VERBS", "BIN_S"]

VERBS = ("claim", "complete", "enqueue", "cycle")
BIN_S = 0.25   # timeline resolution when not alternating


@dataclass(frozen=True)
class WorkerPlan:
    index: int
    node: int
    target: Target
    queues: tuple[str, ...]
    shas: dict[str, str]
    connections: int = 4
    pipeline: int = 64
    lease_ms: int = 60_000
    payload_bytes: int = 64
    work: str = "const:0"
    rate: float | None = None            # claims/s for this worker; None = closed loop
    reply_timeout_s: float = 5.0         # open loop: how long after the window replies still owed are awaited
    produce: bool = False                # producers keep pending fed
    produce_ahead: int = 0               # this worker's share of the pending backlog
    ledger: bool = False
    cpus: tuple[int, ...] | None = None  # pin this process here
    seed: int = 0
    # Time slots shared by several workers: this one loads its server only in
    # the slots `slot_owner` gives to slot_index (slot_s None: always).
    slot_s: float | None = None
    slot_index: int = 0
    slot_count: int = 1
    slot_seed: int = 0

    def consumer_policy(self) -> ConsumerPolicy:
        """One connection's consumer: `pipeline` jobs in flight, and its share
        of the worker's open-loop claim rate."""
        rate = self.rate / self.connections if self.rate else None
        return ConsumerPolicy(lease_ms=self.lease_ms, work=parse_dist(self.work), claim_batch=self.pipeline,
                              rate=rate)

    def producer_policy(self) -> ProducerPolicy:
        """The enqueue backfill: keep this worker's share of pending, with as
        many enqueues in flight as all its consumers have jobs, or it would
        fall behind them."""
        return ProducerPolicy(backlog=self.produce_ahead, batch=self.pipeline * self.connections,
                              payload=b"x" * self.payload_bytes)


def slot_owner(k: int, count: int, seed: int) -> int:
    """Which of `count` servers owns time slot k.

    Slots go in rounds of `count`, each server once per round, in an order
    drawn afresh for every round from `seed`: randomised multiple interleaved
    trials, so no periodic disturbance lines up with one server's turns.
    """
    if count <= 1:
        return 0
    order = list(range(count))
    random.Random(seed * 1_000_003 + k // count).shuffle(order)
    return order[k % count]


@dataclass(frozen=True)
class Window:
    t_begin: float   # perf_counter: start sending (warm-up starts)
    t_start: float   # counting starts
    t_end: float     # counting stops; no new claims after this
