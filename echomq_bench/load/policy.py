"""What the load engine's roles are told and what they tell back: the
policies (frozen), the Fate of one attempt, the Event of one call, and the
Stop that ends a loop. See echomq_bench.load.engine.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from echomq_bench.measurement.workdist import Distribution

__all__ = ["Event", "Fate", "Stop", "OnEvent", "ProducerPolicy", "ConsumerPolicy", "PumpPolicy", "now"]

now = time.perf_counter  # CLOCK_MONOTONIC on Linux: comparable across processes


class Fate(NamedTuple):
    """What one attempt will do: work `work_ms` (nominal), then `action`
    (complete, retry or crash); a crash abandons the job after `crash_ms`."""

    action: str
    work_ms: float
    crash_ms: float = 0.0


# A plain slotted record rather than a NamedTuple, whose `count` would
# shadow tuple.count; not frozen, as a frozen dataclass's __init__ costs
# about four times a tuple's, and one is built per call.
@dataclass(slots=True)
class Event:
    verb: str
    outcome: str
    queue: str
    job_id: str = ""
    token: int = 0
    t0: float = 0.0     # sent (for work: when the job's work ended)
    t1: float = 0.0     # answered
    count: int = 0      # reap and promote: jobs moved
    fate: Fate | None = None
    error: BaseException | None = None


OnEvent = Callable[[Event], None]


class Stop:
    """When a role's loop ends: an event is set, a deadline passed
    (perf_counter), or `alive()` turned false (a parent that went away)."""

    def __init__(self, event: Any = None, deadline: float | None = None,
                 alive: Callable[[], bool] | None = None) -> None:
        self.event = event if event is not None else threading.Event()
        self.deadline, self.alive = deadline, alive

    def is_set(self) -> bool:
        if self.event.is_set():
            return True
        if self.deadline is not None and now() >= self.deadline:
            return True
        return self.alive is not None and not self.alive()

    def set(self) -> None:
        self.event.set()


@dataclass(frozen=True)
class ProducerPolicy:
    rate: float | None = None       # jobs/s over all queues; None: as fast as answered
    batch: int = 1                  # enqueues per round trip (pipelined when over 1)
    payload: bytes = b"x"
    total: int | None = None        # stop after this many sent
    backlog: int | None = None      # instead of a rate: keep this many pending, topping up to 1.5x
    refill_s: float = 0.01          # backlog: how often pending is checked
    refill_max: int | None = None   # backlog: enqueues per top-up at most (None: to 1.5x in one)
    catch_up_s: float = 0.0         # behind schedule by more than this: start afresh, no burst (inf: catch up)
    backoff_s: float = 0.05         # pause after an unanswered or failed call


@dataclass(frozen=True)
class ConsumerPolicy:
    lease_ms: int = 30_000
    work: Distribution | None = None   # nominal work time; None: no sleep
    time_scale: float = 1.0            # work sleeps work_ms / time_scale
    handle: Callable[[bytes], object] | None = None  # real work on the payload, before the sleep
    fail_rate: float = 0.0             # share of attempts that end in retry
    crash_rate: float = 0.0            # share that crash: abandon the job part way through its work
    retry_delay_ms: int = 0
    retry_error: bytes = b"simulated failure"
    max_attempts: int = 3
    claim_batch: int = 1               # claims per round trip (pipelined when over 1); pipelined: jobs in flight
    rate: float | None = None          # claims/s, open loop; None: claim again as soon as a round is settled
    until_empty: bool = False          # stop at the first round that finds every queue empty
    idle_s: float = 0.005              # sleep after a round of empty claims
    backoff_s: float = 0.05

    def retry_delay(self, attempt: int, rng: random.Random) -> int:
        """How long a retried job waits, after its attempt number `attempt`
        (the claim's token); a subclass may back off (see the Locust users)."""
        return self.retry_delay_ms

    def fate(self, rng: random.Random) -> Fate:
        """The crash and failure rules; a subclass may draw differently."""
        work_ms = self.work.sample_ms(rng) if self.work is not None else 0.0
        if self.crash_rate or self.fail_rate:
            u = rng.random()
            if u < self.crash_rate:
                return Fate("crash", work_ms, rng.random() * work_ms)
            if u < self.crash_rate + self.fail_rate:
                return Fate("retry", work_ms)
        return Fate("complete", work_ms)


@dataclass(frozen=True)
class PumpPolicy:
    interval_s: float = 0.02
    reap_limit: int = 100
    promote: bool = True               # promote due retries too (after reaping)
    promote_limit: int = 100
    max_attempts: int = 3
    random_phase: bool = False         # first tick at a random point of the first interval
    reap: bool = True                  # reap expired leases each tick (False: a promote-only pump)
    drain_rounds: int = 1              # per tick and queue, call again while a call moved its whole limit
