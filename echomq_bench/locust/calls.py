"""The load engine's calls protocol over a Locust wire, measured.

`LocustCalls` is what the engine's roles (`echomq_bench.load.engine`) talk to
inside a Locust process: each call, or pipeline of calls, is one Locust
request of type "echomq", named by its verb. An outcome that is expected is
counted under its own name, never as a failure: "claim (empty)",
"retry (scheduled)", "retry (dead)". A failure is what should not happen: a
refused complete from a lease holder, an enqueue of a fresh id that was not
enqueued, a wire error; its exception goes to Locust and then on to the role,
which reports it as the call's outcome.

Every call passes the run's `Gate`: once the run drains, a greenlet about to
call ends instead (`Drained`). A call whose reply never came (the connection
lost, the greenlet killed) leaves its enqueues and completes in the books as
unresolved, for the audit to settle against the server.

`BooksRecorder` hears the roles' events and keeps the books: the ledger of
enqueues and completes, the flow counters, completes per queue.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence, TypeVar

from gevent import GreenletExit

from echomq.errors import ServerUnavailableError
from echomq.verbs import ScriptCall
from echomq_bench.load.calls import is_error
from echomq_bench.load.policy import Event
from echomq_bench.locust.client import REQUEST_TYPE, Books, Gate
from echomq_bench.locust.wire import AnyWire

__all__ = ["LocustCalls", "BooksRecorder", "unresolved_ops"]

Judge = Callable[[str, Any], tuple[str, "BaseException | None"]]  # (name, reply) -> name, failure
Reply = TypeVar("Reply")


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
    """`call`, `pipeline` and `command` over one wire, each a Locust request.

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
        cmd = call.evalsha(self._sha(call.verb))
        return self._measured(call.verb, [call], lambda: self.wire.call(cmd), _judge_one)

    def pipeline(self, calls: Sequence[ScriptCall]) -> list[Any]:
        cmds = [c.evalsha(self._sha(c.verb)) for c in calls]
        verbs = {c.verb for c in calls}
        name = verbs.pop() if len(verbs) == 1 else "pipeline"
        return self._measured(name, calls, lambda: self.wire.pipeline(cmds), _judge_many)

    def command(self, *args: Any) -> Any:
        """Plain commands: the producer's backlog check (ZCARD) is "pending_size"."""
        name = "pending_size" if str(args[0]).upper() == "ZCARD" else str(args[0]).lower()
        return self._measured(name, [], lambda: self.wire.command(*args), None)

    def _sha(self, verb: str) -> str:
        sha = self._shas.get(verb)
        if sha is None:
            sha = self._shas[verb] = self.wire.scripts.sha(verb)
        return sha

    def _measured(self, name: str, calls: Sequence[ScriptCall], send: Callable[[], Reply],
                  judge: Judge | None) -> Reply:
        ops = unresolved_ops(calls, self.names)
        self.gate.enter(self, ops)
        start, t0 = time.time(), time.perf_counter()
        error: BaseException | None = None
        try:
            reply = send()
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


class BooksRecorder:
    """The engine's events into the process's books."""

    FLOW = {("retry", "scheduled"): "retry_scheduled", ("retry", "dead"): "retry_dead"}
    MOVED = {"reap": "reaped", "promote": "promoted"}

    def __init__(self, books: Books) -> None:
        self.books = books

    def __call__(self, event: Event) -> None:
        books, verb, outcome = self.books, event.verb, event.outcome
        if verb == "enqueue" and outcome == "enqueued":
            books.ledger.record_enqueue(event.job_id, "enqueued")
        elif verb == "complete" and outcome in ("accepted", "refused"):
            books.ledger.record_complete(event.job_id, event.token, outcome == "accepted")
            if outcome == "accepted":
                books.completed[event.queue] += 1
        elif (verb, outcome) in self.FLOW:
            books.counters[self.FLOW[verb, outcome]] += 1
        elif verb in self.MOVED and outcome == "ok":
            books.counters[self.MOVED[verb]] += event.count
