"""A Locust process's one client over echomq: every call on one wire, measured.

`LocustCalls` is what the engine's roles (`echomq_bench.load.engine`) talk to
inside a Locust process: each call, or pipeline of calls, is one Locust
request of type "echomq", named by its verb. An outcome that is expected is
counted under its own name, never as a failure: "claim (empty)",
"claim (buried)" (no job: the call buried its scan limit of damaged ones),
"retry (scheduled)", "retry (dead)". A failure is what should not happen: a
refused complete from a lease holder, an enqueue of a fresh id that was not
enqueued, a wire error; its exception goes to Locust and then on to the role,
which reports it as the call's outcome.

The same client, on the same wire and through the same measured request,
sends a zombie's complete (a crashed consumer come back: its refusal is
expected, "complete (zombie refused)", its acceptance a failure) and keeps
the crash notes (not verbs, not measured), from which a re-claim's recovery
time is fired as a request of type "recovery".

Every call passes the run's `Gate`: once the run drains, a greenlet about to
call ends instead (`Drained`). A call whose reply never came (the connection
lost, the greenlet killed) leaves its enqueues and completes in the books as
unresolved, for the audit to settle against the server.

The roles' events go into the process's books through the load's one
ledger recorder (`echomq_bench.load.recorders.LedgerRecorder`, made by the
session over the books' ledger and counters).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence, TypeVar

from gevent import GreenletExit

from echomq import ServerUnavailableError, StaleTokenError
from echomq._instrument import ScriptCall
from echomq_bench.load.calls import is_error
from echomq_bench.locust.books import (CRASH_RECORD_TTL_MS, CRASH_TO_CLAIM, DEADLINE_TO_CLAIM, RECOVERY_TYPE,
                                        REQUEST_TYPE, Books, Claimed, Gate)
from echomq_bench.locust.wire import AnyWire, Command, QueueWire

__all__ = ["LocustCalls", "ZombieAccepted", "unresolved_ops"]

Judge = Callable[[str, Any], tuple[str, "BaseException | None"]]  # (name, reply) -> name, failure
Reply = TypeVar("Reply")
Arg = TypeVar("Arg")
_SETTLED = frozenset(("enqueue", "complete"))
_NO_OPS: tuple[list[Any], ...] = ()
_REFUSED = object()  # a zombie's complete answered EMQSTALE, as the fence should


class ZombieAccepted(AssertionError):
    """The fence failed: a complete with a superseded token was accepted."""


def unresolved_ops(calls: Sequence[ScriptCall], names: Mapping[str, str]) -> list[list[Any]]:
    """What the audit must settle if these calls go unanswered: their
    enqueues (one op per queue) and completes, in the books' op form."""
    enqueues: dict[str, list[str]] = {}
    ops: list[list[Any]] = []
    for c in calls:
        if c.verb == "enqueue":
            enqueues.setdefault(names[c.keys[0]], []).append(str(c.args[0]))
        elif c.verb == "complete":
            ops.append(["complete", names[c.keys[0]], str(c.args[0]), int(c.args[1]), False])
    return [["enqueue", q, ids] for q, ids in enqueues.items()] + ops


class LocustCalls:
    """`call`, `pipeline` and `command` over one wire, each a Locust request,
    and a zombie's complete and the crash notes on the same wire.

    `names` maps each queue's pending and active keys to its name (enqueue
    and complete lead with them), for the unresolved ops."""

    def __init__(self, environment: Any, wire: AnyWire, books: Books, gate: Gate, names: Mapping[str, str]) -> None:
        self._fire = environment.events.request.fire
        self.wire = wire
        self.books = books
        self.gate = gate
        self.names = names
        self._shas: dict[str, str] = {}

    def call(self, call: ScriptCall) -> Any:
        verb = call.verb
        # Only enqueues and completes leave something for the audit to settle: a claim builds no ops.
        ops = unresolved_ops((call,), self.names) if verb in _SETTLED else _NO_OPS
        return self._measured(verb, ops, self.wire.call, call.evalsha(self._sha(verb)), _judge_one)

    def pipeline(self, calls: Sequence[ScriptCall]) -> list[Any]:
        cmds = [c.evalsha(self._sha(c.verb)) for c in calls]
        verbs = {c.verb for c in calls}
        name = verbs.pop() if len(verbs) == 1 else "pipeline"
        return self._measured(name, unresolved_ops(calls, self.names), self.wire.pipeline, cmds, _judge_many)

    def command(self, *args: Any) -> Any:
        """Plain commands: the producer's backlog check (ZCARD) is "pending_size"."""
        name = "pending_size" if str(args[0]).upper() == "ZCARD" else str(args[0]).lower()
        return self._measured(name, _NO_OPS, self.wire.call, args, None)

    def _sha(self, verb: str) -> str:
        sha = self._shas.get(verb)
        if sha is None:
            sha = self._shas[verb] = self.wire.scripts.sha(verb)
        return sha

    def zombie_complete(self, q: QueueWire, job_id: str, token: int) -> bool:
        """A crashed consumer's complete, sent after its lease is gone: True
        when the server accepted it, which fails the request ("complete
        (zombie)"); its refusal is the expected "complete (zombie refused)"."""
        def send(cmd: Command) -> Any:
            try:
                return self.wire.call(cmd)
            except StaleTokenError:
                return _REFUSED

        def judge(name: str, reply: Any) -> tuple[str, BaseException | None]:
            if reply is _REFUSED:
                return f"{name} (zombie refused)", None
            return f"{name} (zombie)", ZombieAccepted(f"zombie complete of {job_id} token {token} was accepted")

        ops = [["complete", q.name, job_id, token, True]]
        accepted = self._measured("complete", ops, send, q.complete(job_id, token), judge) is not _REFUSED
        self.books.ledger.record_complete(job_id, token, accepted, zombie=True)
        if accepted:
            self.books.completed[q.name] += 1
        return accepted

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

    def _measured(self, name: str, ops: Sequence[list[Any]], send: Callable[[Arg], Reply], arg: Arg,
                  judge: Judge | None) -> Reply:
        """The one measured request: `send(arg)` between the gate's enter and leave,
        fired as a Locust request named by `judge`. A call whose reply never
        came (killed, connection lost) leaves its `ops` unresolved, for the
        audit to settle against the server."""
        self.gate.enter(self, ops)
        start, t0 = time.time(), time.perf_counter()
        error: BaseException | None = None
        try:
            reply = send(arg)
        except GreenletExit:
            name = f"{name} (interrupted)"
            self.books.unresolved.extend(ops)
            raise
        except ServerUnavailableError as exc:
            error = exc
            self.books.unresolved.extend(ops)
            raise
        except Exception as exc:  # an error reply: the call's outcome, for Locust and then for the role
            error = exc
            raise
        else:
            if judge is not None:
                name, error = judge(name, reply)
            return reply
        finally:
            self.gate.leave(self)
            self._fire(request_type=REQUEST_TYPE, name=name, response_time=(time.perf_counter() - t0) * 1000.0,
                       response_length=0, exception=error, context={}, start_time=start)


def _judge_one(verb: str, reply: Any) -> tuple[str, BaseException | None]:
    if verb == "claim" and isinstance(reply, int):
        return "claim (buried)", None
    if verb == "claim" and not reply:
        return "claim (empty)", None
    if verb == "retry":
        return f"retry ({reply.decode() if isinstance(reply, bytes) else reply})", None
    if verb == "enqueue" and reply != b"enqueued":
        return verb, AssertionError(f"enqueue of a fresh id answered {reply!r}")
    return verb, None


def _judge_many(name: str, replies: list[Any]) -> tuple[str, BaseException | None]:
    """A pipeline fails with its first error reply; an enqueue of a fresh id that was not enqueued is one."""
    for reply in replies:
        if is_error(reply):
            return name, reply
        if reply == b"duplicate":
            return name, AssertionError(f"enqueue of a fresh id answered {reply!r}")
    return name, None
