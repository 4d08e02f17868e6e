"""The measured verbs: every script call goes through Locust's
`events.request.measure` (request_type "echomq", name = the verb).

An outcome that is expected is counted under its own name, never as a
failure: "claim (empty)", "complete (zombie refused)", "retry (scheduled)",
"retry (dead)". A failure is what should not happen: a refused complete from
a lease holder, an accepted zombie complete, a wire error.

What the client learns goes into the process's `Books` (the audit ledger,
flow counters, recovery histograms). A `Gate` knows which calls are on the
wire, so the end of a run can wait for them (drain) instead of killing a
greenlet between a complete the server applied and the ledger line saying
so: once draining, a greenlet about to call ends instead. A call that is
killed anyway (a ramp-down) is kept as unresolved and settled against the
server at the audit.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import gevent
from gevent import GreenletExit
from gevent.event import Event

from echomq_bench.load.audit import Ledger
from echomq.errors import ServerUnavailableError, StaleTokenError
from echomq_bench.measurement.latency import Latency
from echomq_bench.locust.wire import QueueWire, Wire

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


class Drained(GreenletExit):
    """The run is draining: the greenlet that would make a call ends instead.
    A GreenletExit, so Locust stops the user quietly (without waiting out a
    --stop-timeout) and gevent prints nothing for a background greenlet."""


class Gate:
    """Who is on the wire. Once draining, no new call starts: the caller's
    greenlet ends with `Drained`."""

    def __init__(self) -> None:
        self.draining = False
        self.busy: dict[int, list[Any] | None] = {}  # client id -> its call's op
        self._idle = Event()

    def enter(self, client: "EchoClient", op: list[Any] | None) -> None:
        if self.draining:
            raise Drained()
        self.busy[id(client)] = op

    def leave(self, client: "EchoClient") -> None:
        self.busy.pop(id(client), None)
        if self.draining and not self.busy:
            self._idle.set()

    def drain(self, timeout: float) -> list[list[Any]]:
        """Stop new calls, wait for the ones on the wire; return the ops of
        those still there (a server that stopped answering)."""
        self.draining = True
        if self.busy:
            self._idle.wait(timeout)
        return [op for op in self.busy.values() if op is not None]


class EchoClient:
    """The verbs over one `Wire`, measured, with the books kept."""

    def __init__(self, environment: Any, wire: Wire, books: Books, gate: Gate) -> None:
        self._measure = environment.events.request.measure
        self._fire = environment.events.request.fire
        self.wire = wire
        self.books = books
        self.gate = gate

    # -- the verbs ---------------------------------------------------------

    def enqueue(self, q: QueueWire, ids: list[str], payload: bytes) -> int:
        """One pipelined round trip of len(ids) enqueues; the number enqueued."""
        ledger = self.books.ledger
        done = 0

        def judge(replies: list[Any], meta: dict[str, Any]) -> None:
            nonlocal done
            for job_id, reply in zip(ids, replies):
                if reply == b"enqueued":
                    ledger.record_enqueue(job_id, "enqueued")
                    done += 1
                elif meta["exception"] is None:
                    meta["exception"] = (reply if isinstance(reply, Exception)
                                         else AssertionError(f"enqueue of fresh id {job_id} answered {reply!r}"))

        self._send("enqueue", [q.enqueue(i, payload) for i in ids], ["enqueue", q.name, ids], judge, pipeline=True)
        return done

    def claim(self, q: QueueWire) -> Claimed | None:
        reply = self._send("claim", q.claim_cmd, None, _name_empty)
        if not reply:
            return None
        job_id, payload, token = reply
        return Claimed(job_id.decode(), payload or b"", int(token), time.time() + q.lease_s)

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

        self._send("complete", q.complete(job_id, token), ["complete", q.name, job_id, token, zombie], judge,
                   on_stale=refused)
        if outcome is not None:
            self.books.ledger.record_complete(job_id, token, outcome, zombie=zombie)
            if outcome:
                self.books.completed[q.name] += 1
        return bool(outcome)

    def retry(self, q: QueueWire, job_id: str, token: int, error: str, delay_ms: int) -> str | None:
        """'scheduled' or 'dead' (each counted under its own name), None on failure."""
        reply = self._send("retry", q.retry(job_id, token, error, delay_ms), None, _name_outcome)
        if reply is None:
            return None
        outcome = reply.decode()
        self.books.counters[f"retry_{outcome}"] += 1
        return outcome

    def promote(self, q: QueueWire) -> int:
        moved = self._send("promote", q.promote_cmd) or 0
        self.books.counters["promoted"] += moved
        return moved

    def reap(self, q: QueueWire) -> int:
        reaped = self._send("reap", q.reap_cmd) or 0
        self.books.counters["reaped"] += reaped
        return reaped

    def pending_size(self, q: QueueWire) -> int:
        return self._send("pending_size", q.size_cmd) or 0

    # -- crash bookkeeping (not verbs: not measured) -------------------------

    def note_crash(self, q: QueueWire, job: Claimed, crashed_at: float) -> None:
        """Leave a record where whichever process re-claims the job finds it."""
        if self.gate.draining:
            return  # the books are closed: a crash now would never be recovered
        record = f"{job.token} {crashed_at!r} {job.deadline!r}"
        self.wire.command("SET", q.crash_key(job.id), record, "PX", CRASH_RECORD_TTL_MS)
        self.books.counters["crashes"] += 1

    def note_reclaim(self, q: QueueWire, job: Claimed) -> None:
        """A claim with token > 1: if a crash left it, record the recovery."""
        key = q.crash_key(job.id)
        record, _ = self.wire.pipeline([("GET", key), ("DEL", key)])  # GETDEL, on any version
        if not isinstance(record, bytes):
            return
        token, crashed_at, deadline = record.split()
        if int(token) != job.token - 1:
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

    def _send(self, name: str, cmd: Any, op: list[Any] | None = None, judge: Any = None,
              pipeline: bool = False, on_stale: Any = None) -> Any:
        """One measured call. `judge(reply, meta)` may rename the outcome or
        mark it failed; `on_stale(exc, meta)` handles an EMQSTALE refusal.
        A call whose reply never came (killed, connection lost) leaves its
        `op` unresolved, for the audit to settle against the server."""
        gate = self.gate
        gate.enter(self, op)
        reply = None
        with self._measure(REQUEST_TYPE, name) as meta:
            try:
                reply = self.wire.pipeline(cmd) if pipeline else self.wire.call(cmd)
            except StaleTokenError as exc:
                if on_stale is None:
                    raise
                on_stale(exc, meta)
                return None
            except GreenletExit:
                meta["name"] = f"{name} (interrupted)"
                self._unresolved(op)
                raise
            except ServerUnavailableError:
                self._unresolved(op)
                raise
            finally:
                gate.leave(self)
            if judge is not None:
                judge(reply, meta)
        return reply

    def _unresolved(self, op: list[Any] | None) -> None:
        if op is not None:
            self.books.unresolved.append(op)


def _name_empty(reply: Any, meta: dict[str, Any]) -> None:
    if not reply:
        meta["name"] = "claim (empty)"


def _name_outcome(reply: Any, meta: dict[str, Any]) -> None:
    meta["name"] = f"{meta['name']} ({reply.decode()})"


def sleep_ms(ms: float) -> None:
    if ms > 0:
        gevent.sleep(ms / 1000.0)
