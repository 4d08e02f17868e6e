"""The process's books and the drain gate, and what the measured client
(`echomq_bench.locust.calls.LocustCalls`) names its requests.

Every call a Locust process makes goes through its `LocustCalls`; what the
calls learn goes into the process's `Books` (the audit ledger, flow
counters, recovery histograms). A `Gate` knows which calls are on the wire,
so the end of a run can wait for them (drain) instead of killing a greenlet
between a complete the server applied and the ledger line saying so: once
draining, a greenlet about to call ends instead. A call that is killed
anyway (a ramp-down) is kept as unresolved and settled against the server
at the audit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

from gevent import GreenletExit
from gevent.event import Event

from echomq_bench.load.audit import Ledger
from echomq_bench.measurement.latency import Latency

__all__ = ["Books", "Gate", "Drained", "Claimed", "REQUEST_TYPE", "RECOVERY_TYPE", "RECOVERY_METRICS",
           "DEADLINE_TO_CLAIM", "CRASH_TO_CLAIM", "CRASH_RECORD_TTL_MS"]

REQUEST_TYPE = "echomq"
RECOVERY_TYPE = "recovery"
DEADLINE_TO_CLAIM = "lease deadline -> claim"
CRASH_TO_CLAIM = "crash -> claim"
RECOVERY_METRICS = (DEADLINE_TO_CLAIM, CRASH_TO_CLAIM)
# A crash record outlives any sane recovery, then expires by itself.
CRASH_RECORD_TTL_MS = 600_000


class Claimed(NamedTuple):
    id: str
    payload: bytes
    token: int
    deadline: float  # client wall clock, s: reply time + lease (estimate of the server's deadline)


@dataclass
class Books:
    """What one process learned during one run; merged across processes."""

    ledger: Ledger = field(default_factory=Ledger)
    counters: Counter[str] = field(default_factory=Counter)
    unresolved: list[list[Any]] = field(default_factory=list)
    recovery: dict[str, Latency] = field(default_factory=lambda: {m: Latency() for m in RECOVERY_METRICS})
    completed: Counter[str] = field(default_factory=Counter)  # queue -> completes accepted (per-node cycles/s)

    def to_message(self) -> dict[str, Any]:
        return {"ledger": self.ledger.to_json(), "counters": dict(self.counters), "completed": dict(self.completed),
                "unresolved": self.unresolved,
                "recovery": {k: v.encode() for k, v in self.recovery.items() if v.count}}

    def merge_message(self, data: dict[str, Any]) -> None:
        self.ledger.merge(Ledger.from_json(data["ledger"]))
        self.counters.update(data["counters"])
        self.completed.update(data.get("completed", {}))
        self.unresolved.extend(data["unresolved"])
        for name, blob in data["recovery"].items():
            self.recovery[name].merge(Latency.decode(blob))


class Drained(GreenletExit):  # type: ignore[misc]  # gevent ships no type information
    """The run is draining: the greenlet that would make a call ends instead.
    A GreenletExit, so Locust stops the user quietly (without waiting out a
    --stop-timeout) and gevent prints nothing for a background greenlet."""


class Gate:
    """Who is on the wire. Once draining, no new call starts: the caller's
    greenlet ends with `Drained`."""

    def __init__(self) -> None:
        self.draining = False
        self.busy: dict[int, Sequence[list[Any]]] = {}  # caller id -> the ops of its call on the wire
        self._idle = Event()

    def enter(self, caller: object, ops: Sequence[list[Any]]) -> None:
        if self.draining:
            raise Drained()
        self.busy[id(caller)] = ops

    def leave(self, caller: object) -> None:
        self.busy.pop(id(caller), None)
        if self.draining and not self.busy:
            self._idle.set()

    def drain(self, timeout: float) -> list[list[Any]]:
        """Stop new calls, wait for the ones on the wire; return the ops of
        those still there (a server that stopped answering)."""
        self.draining = True
        if self.busy:
            self._idle.wait(timeout)
        return [op for ops in self.busy.values() for op in ops]
