"""The process's books, the drain gate, and the measured calls that are not
the engine's: a zombie's complete and the crash bookkeeping.

The verbs the load itself sends go through the load engine's roles over
`echomq_bench.locust.calls.LocustCalls`; what they learn goes into the
process's `Books` (the audit ledger, flow counters, recovery histograms). A
`Gate` knows which calls are on the wire, so the end of a run can wait for
them (drain) instead of killing a greenlet between a complete the server
applied and the ledger line saying so: once draining, a greenlet about to
call ends instead. A call that is killed anyway (a ramp-down) is kept as
unresolved and settled against the server at the audit.

A zombie (a crashed consumer come back) completes through `EchoClient`: its
refusal is expected ("complete (zombie refused)"), its acceptance a failure.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gevent import GreenletExit
from gevent.event import Event

from echomq_bench.load.audit import Ledger
from echomq.errors import ServerUnavailableError, StaleTokenError
from echomq_bench.measurement.latency import Latency
from echomq_bench.locust.wire import AnyWire, QueueWire

__all__ = ["Books", "Gate", "Drained", "EchoClient", "Claimed", "REQUEST_TYPE", "RECOVERY_TYPE", "RECOVERY_METRICS"]

REQUEST_TYPE = "echomq"
RECOVERY_TYPE = "recovery"
DEADLINE_TO_CLAIM = "lease deadline -> claim"
CRASH_TO_CLAIM = "crash -> claim"
RECOVERY_METRICS = (DEADLINE_TO_CLAIM, CRASH_TO_CLAIM)
# A crash record outlives any sane recovery, then expires by itself.
CRASH_RECORD_TTL_MS = 600_000


class ZombieAccepted(AssertionError):
    """The fence failed: a complete with a superseded token was accepted."""


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
        self.busy: dict[int, list[list[Any]]] = {}  # caller id -> the ops of its call on the wire
        self._idle = Event()

    def enter(self, caller: object, ops: list[list[Any]]) -> None:
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


class EchoClient:
    """A zombie's complete and the crash notes over one wire, measured, with the books kept."""

    def __init__(self, environment: Any, wire: AnyWire, books: Books, gate: Gate) -> None:
        self._measure = environment.events.request.measure
        self._fire = environment.events.request.fire
        self.wire = wire
        self.books = books
        self.gate = gate

    # -- a zombie's complete -------------------------------------------------

    def complete(self, q: QueueWire, job_id: str, token: int, zombie: bool = False) -> bool:
        """True when the server accepted it. A zombie's refusal is expected;
        a lease holder's is a failure (its lease ran out under it)."""
        outcome: bool | None = None

        def judge(reply: Any, meta: dict[str, Any]) -> None:
            nonlocal outcome
            outcome = True
            if zombie:
                meta["name"] = "complete (zombie)"
                meta["exception"] = ZombieAccepted(f"zombie complete of {job_id} token {token} was accepted")

        def refused(exc: StaleTokenError, meta: dict[str, Any]) -> None:
            nonlocal outcome
            outcome = False
            if zombie:
                meta["name"] = "complete (zombie refused)"
            else:
                meta["exception"] = exc

        self._send("complete", q.complete(job_id, token), [["complete", q.name, job_id, token, zombie]], judge,
                   on_stale=refused)
        if outcome is not None:
            self.books.ledger.record_complete(job_id, token, outcome, zombie=zombie)
            if outcome:
                self.books.completed[q.name] += 1
        return bool(outcome)

    # -- crash bookkeeping (not verbs: not measured) -------------------------

    def note_crash(self, q: QueueWire, job: Claimed, crashed_at: float) -> None:
        """Leave a record where whichever process re-claims the job finds it."""
        if self.gate.draining:
            return  # the books are closed: a crash now would never be recovered
        record = f"{job.token} {crashed_at!r} {job.deadline!r}"
        self.wire.command("SET", q.crash_key(job.id), record, "PX", CRASH_RECORD_TTL_MS)
        self.books.counters["crashes"] += 1

    def note_reclaim(self, q: QueueWire, job_id: str, token: int) -> None:
        """A claim with token > 1: if a crash left it, record the recovery."""
        key = q.crash_key(job_id)
        record, _ = self.wire.pipeline([("GET", key), ("DEL", key)])  # GETDEL, on any version
        if not isinstance(record, bytes):
            return
        crashed_token, crashed_at, deadline = record.split()
        if int(crashed_token) != token - 1:
            return  # crashed earlier, then reaped and re-claimed in between: not this recovery
        now = time.time()
        self.books.counters["recovered"] += 1
        # Wall clocks: the crash and the re-claim may be on different machines.
        for name, since in ((DEADLINE_TO_CLAIM, float(deadline)), (CRASH_TO_CLAIM, float(crashed_at))):
            ms = (now - since) * 1000.0
            self.books.recovery[name].record_ms(max(ms, 0.001))
            self._fire(request_type=RECOVERY_TYPE, name=name, response_time=max(ms, 0.0), response_length=0,
                       exception=None, context={}, start_time=since)

    # -- plumbing ----------------------------------------------------------

    def _send(self, name: str, cmd: Any, ops: list[list[Any]], judge: Any, on_stale: Any) -> Any:
        """One measured call. `judge(reply, meta)` may rename the outcome or
        mark it failed; `on_stale(exc, meta)` handles an EMQSTALE refusal.
        A call whose reply never came (killed, connection lost) leaves its
        `ops` unresolved, for the audit to settle against the server."""
        gate = self.gate
        gate.enter(self, ops)
        reply = None
        with self._measure(REQUEST_TYPE, name) as meta:
            try:
                reply = self.wire.call(cmd)
            except StaleTokenError as exc:
                on_stale(exc, meta)
                return None
            except GreenletExit:
                meta["name"] = f"{name} (interrupted)"
                self.books.unresolved.extend(ops)
                raise
            except ServerUnavailableError:
                self.books.unresolved.extend(ops)
                raise
            finally:
                gate.leave(self)
            judge(reply, meta)
        return reply
