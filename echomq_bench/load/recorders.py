"""The one recorder of a load's events into the audit's books.

`LedgerRecorder` hears the load engine's events (echomq_bench.load.engine),
whoever runs the roles: the engine's threads, Locust's greenlets
(echomq_bench.locust), the cluster load of a failover or a resharding
(echomq_bench.faults.clusterload). It keeps

- the audit's Ledger: enqueues and completes that were answered;
- the calls in doubt (their reply never came: they may or may not have
  run), which `resolve` settles against what the server holds once the
  load is over;
- the flow: retries scheduled and dead, jobs reaped and promoted, and
  completes accepted per queue;
- the errors, by type, and when the first and last came.

A caller that needs more of the events (a failover's watch for the first
enqueue after its kill) hears them beside it, not through it.
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from echomq_bench.load.audit import Ledger
from echomq_bench.load.engine import Event

__all__ = ["LedgerRecorder", "Doubts"]

# The flow counters' names, by the event that moves them.
_FLOW = {("retry", "scheduled"): "retry_scheduled", ("retry", "dead"): "retry_dead"}
_MOVED = {"reap": "reaped", "promote": "promoted"}


@dataclass(frozen=True)
class Doubts:
    """How the calls in doubt were settled by `LedgerRecorder.resolve`."""

    enqueue: int
    enqueue_found: int
    complete: int
    complete_gone: int


@dataclass
class LedgerRecorder:
    """Thread-safe by default: one recorder can hear every role of a run.
    Greenlets of one process (Locust) pass `lock=contextlib.nullcontext()`:
    none of them can be switched out inside a call of this recorder."""

    ledger: Ledger = field(default_factory=Ledger)
    flow: Counter[str] = field(default_factory=Counter)
    completed: Counter[str] = field(default_factory=Counter)  # queue -> completes accepted
    doubt_enqueue: set[str] = field(default_factory=set)
    doubt_complete: set[str] = field(default_factory=set)
    errors: Counter[str] = field(default_factory=Counter)   # exception type -> calls
    first_error: float | None = None
    last_error: float | None = None
    lock: AbstractContextManager[object] = field(default_factory=threading.Lock)

    def __call__(self, event: Event) -> None:
        verb, outcome = event.verb, event.outcome
        if verb == "claim" or verb == "work":
            if event.error is not None:
                self._error(event)
            return  # most events: nothing for the books
        if event.error is not None and outcome != "refused":
            self._error(event)
        with self.lock:
            if verb == "enqueue":
                if outcome in ("enqueued", "duplicate"):
                    self.ledger.record_enqueue(event.job_id, outcome)
                elif outcome in ("unanswered", "error"):
                    self.doubt_enqueue.add(event.job_id)
            elif verb == "complete":
                if outcome in ("accepted", "refused"):
                    accepted = outcome == "accepted"
                    self.ledger.record_complete(event.job_id, event.token, accepted)
                    if accepted:
                        self.completed[event.queue] += 1
                elif outcome in ("unanswered", "error"):
                    self.doubt_complete.add(event.job_id)
            elif (verb, outcome) in _FLOW:
                self.flow[_FLOW[verb, outcome]] += 1
            elif verb in _MOVED and outcome == "ok":
                self.flow[_MOVED[verb]] += event.count

    def _error(self, event: Event) -> None:
        with self.lock:
            self.errors[type(event.error).__name__] += 1
            self.first_error = self.first_error or event.t1
            self.last_error = event.t1

    def resolve(self, on_server: set[str]) -> Doubts:
        """Settle the calls in doubt by what the server holds now (every id in
        any of the queues' sets): a doubtful enqueue whose id shows up
        anywhere happened; a doubtful complete whose job is held nowhere and
        was not completed otherwise landed (a landed complete deletes the row)."""
        ledger = self.ledger
        touched = on_server | set(ledger.accepted) | {i for i, _ in ledger.refused}
        found = {i for i in self.doubt_enqueue if i in touched}
        ledger.enqueued |= found
        gone = {i for i in self.doubt_complete if i not in on_server and not ledger.accepted.get(i)}
        for job_id in gone:
            ledger.accepted[job_id] += 1
        return Doubts(len(self.doubt_enqueue), len(found), len(self.doubt_complete), len(gone))

    @property
    def errors_window_s(self) -> float:
        if self.first_error is None or self.last_error is None:
            return 0.0
        return self.last_error - self.first_error
