"""The pumps a Worker runs beside its rounds, and the health it shows.

A thread of their own sends reap every `pump_interval_ms` and promote every
`promote_interval_ms`, in one round trip when both are due (`PumpClock`).
A retry the Worker schedules tells the clock when it falls due, and promote
runs then: a retry's delay is honoured to within a round trip, not to
within the cadence. A round fails three ways: the server does not answer
(ServerUnavailableError), it refuses a call (an error reply), or anything
else raises, a bug in the client included. Each is counted in the Worker's
`errors`, logged and kept as its last error, and the next round goes on:
a pump thread that ended would leave expired leases unreaped for good while
the Worker looked healthy. Only what is not an Exception (KeyboardInterrupt,
SystemExit) ends the thread.

`Tally` holds the counts that both the rounds and the pump thread write,
under one lock, and makes the `WorkerHealth` a caller reads from any thread.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Protocol, Sequence

import redis

from . import pipeline
from .errors import EchoMQError
from .queue import Queue
from .verbs import ScriptCall

__all__ = ["WorkerHealth", "Tally", "PumpClock", "pump_thread"]

log = logging.getLogger("echomq.worker")

# What each pump verb's reply counts in the stats.
MOVED = {"reap": "reaped", "promote": "promoted"}


class Counts(Protocol):
    """The WorkerStats fields a Tally reads and writes."""

    rounds: int
    errors: int
    reaped: int
    promoted: int


@dataclass(frozen=True)
class WorkerHealth:
    """How a Worker fares at one moment (`Worker.health()`): a snapshot, safe to
    take from any thread while run() runs in another."""

    running: bool                # run() is under way
    pumps_alive: bool            # the pump thread is running; False when run() is not under way,
    #                              or when the pumps are off (WorkerSettings(pumps=False))
    rounds: int                  # the Worker's rounds (WorkerStats.rounds), claims that found nothing included
    pump_rounds: int             # pump round trips done, failed ones included
    pump_failures: int           # pump rounds that raised or had a call refused
    errors: int                  # WorkerStats.errors: claim and pump calls that failed
    last_error: str | None       # the latest failure counted in errors, "where: TypeName: message"
    #                              (where: claim, pump, reap or promote); None when there was none
    last_error_at: float | None  # when it was counted, as time.time()
    last_round_at: float | None = None   # when the latest round trip of claims and settles ended, its lost
    #                                      replies judged, as time.time(); an idle Worker still makes one
    #                                      every poll_ms, so a stale value means stuck, not idle
    waiting_since: float | None = None   # when the round trip under way began (time.time()); None between them


class Tally:
    """The counts the rounds and the pump thread both write, under one lock,
    and the pump thread while it runs."""

    def __init__(self, stats: Counts) -> None:
        self.stats = stats
        self._lock = threading.Lock()
        self._pump_rounds = 0
        self._pump_failures = 0
        self._last_error: str | None = None
        self._last_error_at: float | None = None
        self._traced: str | None = None  # the last unexpected failure logged with its traceback
        self._thread: threading.Thread | None = None
        self._last_round_at: float | None = None
        self._waiting_since: float | None = None

    def health(self, running: bool) -> WorkerHealth:
        with self._lock:
            thread = self._thread
            return WorkerHealth(running, thread is not None and thread.is_alive(), self.stats.rounds,
                                self._pump_rounds, self._pump_failures, self.stats.errors,
                                self._last_error, self._last_error_at, self._last_round_at, self._waiting_since)

    @contextmanager
    def round_trip(self) -> Iterator[None]:
        """A round trip of the rounds, from its send to its last judged reply."""
        with self._lock:
            self._waiting_since = time.time()
        try:
            yield
        finally:
            with self._lock:
                self._waiting_since, self._last_round_at = None, time.time()

    def pumping(self, thread: threading.Thread | None) -> None:
        """The pump thread from now on; None once it has ended."""
        with self._lock:
            self._thread = thread

    def error(self, where: str, exc: BaseException, count: int) -> None:
        """`count` calls of the rounds failed with `exc`: counted in errors, kept as the last error, logged."""
        self._record({}, [(where, exc, count)], pump_round=False)

    def pumped(self, moved: dict[str, int], failed: Sequence[tuple[str, BaseException, int]]) -> None:
        """A pump round: what it moved, and each (where, error, calls) it failed with."""
        self._record(moved, failed, pump_round=True)

    def _record(self, moved: dict[str, int], failed: Sequence[tuple[str, BaseException, int]],
                pump_round: bool) -> None:
        with self._lock:  # one snapshot never shows a round's errors without the round
            for verb, count in moved.items():
                setattr(self.stats, MOVED[verb], getattr(self.stats, MOVED[verb]) + count)
            if pump_round:
                self._pump_rounds += 1
                self._pump_failures += bool(failed)
            logs = [self._note(where, exc, count) for where, exc, count in failed]
        for text, exc, trace in logs:
            if trace:
                log.error("%s; the next round goes on", text, exc_info=exc)
            else:
                log.warning("%s", text)

    def _note(self, where: str, exc: BaseException, count: int) -> tuple[str, BaseException, bool]:
        """Count a failure (under the lock): its text, and whether to log its traceback."""
        self.stats.errors += count
        self._last_error = f"{where}: {type(exc).__name__}: {exc}"
        self._last_error_at = time.time()
        if isinstance(exc, (EchoMQError, redis.exceptions.RedisError)):
            return f"{where}: {exc}", exc, False
        # Not the server's failure: a bug, most likely. Its traceback is logged once,
        # not every interval while the same failure repeats.
        trace, self._traced = self._last_error != self._traced, self._last_error
        return self._last_error, exc, trace


def _pump_round(queue: Queue, calls: Sequence[ScriptCall],
                timeout_s: float) -> tuple[dict[str, int], list[tuple[str, Any, int]]]:
    """One round trip of the pump calls: what each moved, and each refusal.
    Raises when no reply can be used (none within `timeout_s` included: a
    silent server must not hold the thread past the Worker's stop), so that
    the round counts nothing it moved."""
    replies = pipeline.send(queue, calls, deadline=time.monotonic() + timeout_s)
    refused = [(call.verb, reply, 1) for call, reply in zip(calls, replies) if isinstance(reply, Exception)]
    moved = {call.verb: int(reply) for call, reply in zip(calls, replies) if not isinstance(reply, Exception)}
    return moved, refused


class PumpClock:
    """When the pump thread next sends each pump, and the wake-ups the rounds
    ask for: a retry this Worker scheduled falls due at a known moment, so
    promote runs then instead of waiting for its cadence."""

    def __init__(self, reap_s: float, promote_s: float) -> None:
        self.reap_s, self.promote_s = reap_s, promote_s
        now = time.monotonic()
        self.next_reap, self.next_promote = now + reap_s, now + promote_s
        self._due: list[float] = []  # a heap of monotonic times at which a scheduled retry falls due
        self._cond = threading.Condition()
        self._done = False

    def due_at(self, at: float) -> None:
        """A retry scheduled by this Worker falls due at monotonic `at`: promote then."""
        with self._cond:
            heapq.heappush(self._due, at)
            if self._due[0] == at:
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._done = True
            self._cond.notify()

    def next_calls(self) -> tuple[bool, bool] | None:
        """Wait for the next moment a pump is due: (reap, promote) to send then; None once stopped."""
        with self._cond:
            while not self._done:
                now = time.monotonic()
                promote_at = min(self.next_promote, self._due[0] if self._due else self.next_promote)
                wake = min(self.next_reap, promote_at)
                if now >= wake:
                    reap, promote = now >= self.next_reap, now >= promote_at
                    if reap:
                        self.next_reap = now + self.reap_s
                    if promote:
                        self.next_promote = now + self.promote_s
                        while self._due and self._due[0] <= now:
                            heapq.heappop(self._due)
                    return reap, promote
                self._cond.wait(wake - now)
            return None


def _pump(queue: Queue, calls: dict[str, ScriptCall], clock: PumpClock, tally: Tally, timeout_s: float) -> None:
    while (due := clock.next_calls()) is not None:
        reap, promote = due
        round_calls = [calls[verb] for verb, go in (("reap", reap), ("promote", promote)) if go]
        try:
            moved, refused = _pump_round(queue, round_calls, timeout_s)
            tally.pumped(moved, refused)
        except Exception as exc:  # unanswered, a reply that is not a count, a bug: no call of the round counts
            tally.pumped({}, [("pump", exc, len(round_calls))])


@contextmanager
def pump_thread(queue: Queue, reap: ScriptCall, promote: ScriptCall, clock: PumpClock, tally: Tally,
                timeout_s: float) -> Iterator[None]:
    """reap and promote sent on the clock's cadences in a thread, each first
    one interval in (promote earlier when a retry falls due), in one round
    trip when both are due, until the block ends; the tally counts each round."""
    thread = threading.Thread(target=_pump, args=(queue, {"reap": reap, "promote": promote}, clock, tally, timeout_s),
                              name="echomq-pumps", daemon=True)
    tally.pumping(thread)
    thread.start()
    try:
        yield
    finally:
        clock.stop()
        thread.join()
        tally.pumping(None)
