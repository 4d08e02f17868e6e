"""The pumps a Worker runs beside its rounds, and the health it shows.

A thread of their own sends reap then promote in one round trip every
interval. A round fails three ways: the server does not answer
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

__all__ = ["WorkerHealth", "Tally", "pump_thread"]

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

    def health(self, running: bool) -> WorkerHealth:
        with self._lock:
            thread = self._thread
            return WorkerHealth(running, thread is not None and thread.is_alive(), self.stats.rounds,
                                self._pump_rounds, self._pump_failures, self.stats.errors,
                                self._last_error, self._last_error_at)

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


def _pump_round(queue: Queue, calls: Sequence[ScriptCall]) -> tuple[dict[str, int], list[tuple[str, Any, int]]]:
    """One round trip of the pump calls: what each moved, and each refusal.
    Raises when no reply can be used, so that the round counts nothing it moved."""
    replies = pipeline.send(queue, calls)
    refused = [(call.verb, reply, 1) for call, reply in zip(calls, replies) if isinstance(reply, Exception)]
    moved = {call.verb: int(reply) for call, reply in zip(calls, replies) if not isinstance(reply, Exception)}
    return moved, refused


def _pump(queue: Queue, calls: Sequence[ScriptCall], interval_s: float, tally: Tally,
          done: threading.Event) -> None:
    while not done.wait(interval_s):
        try:
            moved, refused = _pump_round(queue, calls)
            tally.pumped(moved, refused)
        except Exception as exc:  # unanswered, a reply that is not a count, a bug: no call of the round counts
            tally.pumped({}, [("pump", exc, len(calls))])


@contextmanager
def pump_thread(queue: Queue, calls: Sequence[ScriptCall], interval_s: float, tally: Tally) -> Iterator[None]:
    """`calls` sent every `interval_s` in a thread, the first one interval in,
    until the block ends; the tally counts each round."""
    done = threading.Event()
    thread = threading.Thread(target=_pump, args=(queue, calls, interval_s, tally, done), name="echomq-pumps",
                              daemon=True)
    tally.pumping(thread)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        tally.pumping(None)
