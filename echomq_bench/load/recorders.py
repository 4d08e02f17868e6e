"""Recorders for the load engine's events that more than one caller wants.

`LedgerRecorder` turns events into the audit's Ledger, keeping apart the
calls whose reply never came (in doubt: they may or may not have run), and
resolves those against what the server holds once the load is over.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from echomq_bench.load.audit import Ledger
from echomq_bench.load.engine import Event

__all__ = ["LedgerRecorder", "Doubts"]


@dataclass(frozen=True)
class Doubts:
    """How the calls in doubt were settled by `LedgerRecorder.resolve`."""

    enqueue: int
    enqueue_found: int
    complete: int
    complete_gone: int


@dataclass
class LedgerRecorder:
    """Thread-safe: one recorder can hear every role of a run."""

    ledger: Ledger = field(default_factory=Ledger)
    doubt_enqueue: set[str] = field(default_factory=set)
    doubt_complete: set[str] = field(default_factory=set)
    errors: Counter[str] = field(default_factory=Counter)   # exception type -> calls
    first_error: float | None = None
    last_error: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: Event) -> None:
        verb, outcome = event.verb, event.outcome
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
                    self.ledger.record_complete(event.job_id, event.token, outcome == "accepted")
                elif outcome in ("unanswered", "error"):
                    self.doubt_complete.add(event.job_id)

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
