"""The load engine: producer, consumer and pump roles, and nothing else.

Every command that loads a queue (faults, failover, the lease sweep, the
peers' echomq adapters, the Locust users, the capacity driver) runs these
roles; each keeps only its policy and what it records.

    Producer(calls, queues, ProducerPolicy, on_event)
        mints ids, enqueues at `rate` (None: as fast as the server answers)
        in batches of `batch`; or keeps `backlog` jobs pending (topping up
        to 1.5x, at most `refill_max` per round trip); or stops after `total`.
    Consumer(calls, queues, ConsumerPolicy, on_event, rng)
        claims (`claim_batch` per round trip; open loop at `rate` claims/s
        when given, else as soon as the last round is settled), draws each
        job's Fate from the policy (work time, then complete, retry or
        crash), works (the `handle` hook on the payload, then a sleep of
        work_ms / time_scale), then completes or retries (after the
        policy's `retry_delay`); a crash abandons the job after crash_ms.
        Its claims and settles are the client's `echomq.ConsumeStep`, which
        `echomq.Worker` runs too: this role adds the Fate, the Events and
        the schedule (docs/design/consumer-loop.md).
    Pump(calls, queues, PumpPolicy, on_event, rng)
        reaps and/or promotes every queue on a fixed cadence, each call
        repeated while it moves its whole limit (up to `drain_rounds`).

Each role's `run(stop)` loops until the `Stop` says so (an event, a
deadline, a liveness check) or its own policy ends it; `step()` is one
round. Callers put roles in threads (`start_thread`) or in processes of their
own. The policies, Fate, Event and Stop live in `echomq_bench.load.policy`
and are re-exported here.

The roles talk to the server only through the calls protocol
(`echomq_bench.load.calls`) and build every call with `echomq.verbs`:

    call(ScriptCall) -> reply                 raises the echomq.errors tree
    pipeline([ScriptCall, ...]) -> [reply | exception, ...]
    command(*args) -> reply                   plain commands (ZCARD)

`RedisCalls` implements it over a redis-py client or cluster client;
`echomq_bench.locust.calls.LocustCalls` over Locust's measured wire, where a
user's task runs these roles one `step()` at a time.

The pipelined transport (`echomq_bench.load.pipelined`) is the same consumer
and producer roles for the capacity driver, where one round trip per step
would leave the server idle: a `PipelinedConsumer` per raw socket sends the
consume step's claim and complete, encoded once, and keeps
`ConsumerPolicy.claim_batch` jobs in flight and handles each reply as it is
parsed (hiredis), and a `PipelinedProducer` backfills pending to
`ProducerPolicy.backlog` with at most `batch` enqueues in flight. They take
the same policies (lease_ms, the work-time distribution through `fate`, the
open-loop `rate`), complete every job (no crash or failure rules) and count
into the driver's tally instead of sending Events.

What happened is told twice: `role.tally` counts (verb, outcome) pairs, and
`on_event`, when given, receives one `Event` per job and call. Outcomes:

    enqueue   enqueued duplicate oom unanswered error
    claim     claimed empty buried unanswered error   (claimed carries the Fate;
              buried: no job, the call buried `count` damaged ones and more may wait)
    work      done      (work finished; the settle call is sent next)
    crash     abandoned (the job is left to its lease)
    complete  accepted refused unanswered error
    retry     scheduled dead refused unanswered error
    reap, promote  ok (count) unanswered error

`unanswered` is ServerUnavailableError: the call may have run. Nothing is
ever resent. A role made `strict` raises the error of the first call that
failed or went unanswered out of `run()` (a refused complete is an answer);
so does any exception raised by `on_event`.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any, Callable, Sequence

from echomq import OutOfMemoryError, ServerUnavailableError, StaleTokenError, mint
from echomq._instrument import ConsumeStep, QueueKeys, ScriptCall, verbs
from echomq_bench.load.calls import Calls, is_error
from echomq_bench.load.policy import (
    ConsumerPolicy, Event, Fate, OnEvent, ProducerPolicy, PumpPolicy, Stop, now,
)

__all__ = ["Event", "Fate", "Stop", "ProducerPolicy", "ConsumerPolicy", "PumpPolicy", "Producer", "Consumer",
           "Pump", "start_thread", "now"]


def _outcome(exc: BaseException) -> str:
    if isinstance(exc, ServerUnavailableError):
        return "unanswered"
    if isinstance(exc, StaleTokenError):
        return "refused"
    if isinstance(exc, OutOfMemoryError):
        return "oom"
    return "error"


# The consume step's outcome of an answered settle, as this engine's Events name it.
_ANSWERED = {"completed": "accepted", "retried": "scheduled", "dead": "dead"}


def _text(value: Any) -> str:
    return value.decode("ascii") if isinstance(value, bytes) else str(value)


class _Role:
    def __init__(self, calls: Calls, queues: Sequence[QueueKeys], on_event: OnEvent | None, strict: bool) -> None:
        if not queues:
            raise ValueError("a role needs at least one queue")
        self.calls = calls
        self.queues = list(queues)
        self.on_event = on_event
        self.strict = strict    # a call that failed or went unanswered ends the loop, raising its error
        self.tally: Counter[tuple[str, str]] = Counter()
        self.finished = False   # the policy ended the loop (total sent, queues empty)
        self._turn = 0

    def _next_queue(self) -> QueueKeys:
        q = self.queues[self._turn % len(self.queues)]
        self._turn += 1
        return q

    def _emit(self, verb: str, outcome: str, queue: QueueKeys, *fields: Any, **named: Any) -> None:
        self.tally[verb, outcome] += 1
        if self.on_event is not None:
            self.on_event(Event(verb, outcome, queue.name, *fields, **named))

    def _fail(self, verb: str, outcome: str, queue: QueueKeys, *fields: Any, error: BaseException,
              **named: Any) -> None:
        self._emit(verb, outcome, queue, *fields, error=error, **named)
        if self.strict and outcome != "refused":  # a refusal is an answer, not a failure
            raise error

    def _send(self, calls: Sequence[ScriptCall]) -> tuple[list[Any], float, float]:
        """One call, or a pipeline of several; a failure of the whole round trip is each call's."""
        t0 = now()
        try:
            replies = [self.calls.call(calls[0])] if len(calls) == 1 else self.calls.pipeline(calls)
        except Exception as exc:  # noqa: BLE001 - each call's outcome is reported, none is lost
            replies = [exc] * len(calls)
        return replies, t0, now()

    def step(self) -> int:
        raise NotImplementedError

    def pause(self) -> None:
        """Wait before the next step, as the role's schedule says."""

    def run(self, stop: Stop | None = None, on_step: Callable[[_Role], None] | None = None) -> None:
        stop = stop or Stop()
        while not self.finished and not stop.is_set():
            self.pause()
            if stop.is_set():
                break
            self.step()
            if on_step is not None:
                on_step(self)


class Producer(_Role):
    def __init__(self, calls: Calls, queues: Sequence[QueueKeys], policy: ProducerPolicy,
                 on_event: OnEvent | None = None, strict: bool = False) -> None:
        super().__init__(calls, queues, on_event, strict)
        self.policy = policy
        self.sent = 0
        self._due = now()

    def pause(self) -> None:
        p = self.policy
        if p.backlog is not None or p.rate is None:
            return
        self._due += p.batch / p.rate
        ahead = self._due - now()
        if ahead > 0:
            time.sleep(ahead)
        elif ahead < -p.catch_up_s:
            self._due = now()  # after a stall, carry on at the rate rather than burst

    def _size(self) -> tuple[int, bool]:
        """How many to send now, and whether a backlog top-up was cut short by refill_max."""
        p = self.policy
        capped = False
        if p.backlog is None:
            size = p.batch
        else:
            short = p.backlog - int(self.calls.command("ZCARD", self.queues[self._turn % len(self.queues)].pending))
            size = short + p.backlog // 2 if short > 0 else 0
            if p.refill_max is not None and size > p.refill_max:
                size, capped = p.refill_max, True
        if p.total is not None:
            size = min(size, p.total - self.sent)
        return size, capped

    def step(self) -> int:
        p = self.policy
        try:
            size, capped = self._size()
        except ServerUnavailableError as exc:
            self._fail("enqueue", "unanswered", self.queues[0], error=exc)
            time.sleep(p.backoff_s)
            return 0
        if size <= 0:
            self.finished = p.total is not None and self.sent >= p.total
            if p.backlog is not None and not self.finished:
                time.sleep(p.refill_s)
            return 0
        jobs = [(self._next_queue(), mint()) for _ in range(size)]
        replies, t0, t1 = self._send([verbs.enqueue(q, jid, p.payload) for q, jid in jobs])
        self.sent += size
        trouble = False
        for (q, jid), reply in zip(jobs, replies):
            if is_error(reply):
                trouble = True
                self._fail("enqueue", _outcome(reply), q, jid, 0, t0, t1, error=reply)
            else:
                self._emit("enqueue", _text(reply), q, jid, 0, t0, t1)
        self.finished = p.total is not None and self.sent >= p.total
        if trouble and not all(isinstance(r, OutOfMemoryError) for r in replies if is_error(r)):
            time.sleep(p.backoff_s)
        if p.backlog is not None and not capped:  # a top-up cut short goes on at once
            time.sleep(p.refill_s)
        return size


class Consumer(_Role):
    def __init__(self, calls: Calls, queues: Sequence[QueueKeys], policy: ConsumerPolicy,
                 on_event: OnEvent | None = None, rng: random.Random | None = None, strict: bool = False) -> None:
        super().__init__(calls, queues, on_event, strict)
        self.policy = policy
        self.rng = rng or random.Random()
        # One step per queue, in the queues' order: its claims are built here, once.
        self.steps = [ConsumeStep(q, policy.lease_ms, policy.claim_batch, policy.max_attempts) for q in self.queues]
        self._empty_in_a_row = 0
        self._due = now()

    def pause(self) -> None:
        """Open loop: each round of `claim_batch` claims is due at its place
        on the rate's schedule, whatever the rounds before it took."""
        p = self.policy
        if p.rate is None:
            return
        self._due += p.claim_batch / p.rate
        ahead = self._due - now()
        if ahead > 0:
            time.sleep(ahead)

    def step(self) -> int:
        p = self.policy
        step = self.steps[self._turn % len(self.steps)]
        self._turn += 1
        q = step.keys
        replies, t0, t1 = self._send(step.claims)
        jobs: list[tuple[str, int, Fate]] = []
        trouble = False
        for reply in replies:
            if is_error(reply):
                trouble = True
                self._fail("claim", _outcome(reply), q, "", 0, t0, t1, error=reply)
            elif isinstance(reply, int):
                # Not an empty queue: the claim stopped at its scan limit of damaged jobs. The
                # round counts as work found, so the next comes at once and claims past them.
                self._emit("claim", "buried", q, "", 0, t0, t1, count=reply)
            elif not reply:
                self._emit("claim", "empty", q, "", 0, t0, t1)
            else:
                jid, payload, token = _text(reply[0]), reply[1] or b"", int(reply[2])
                fate = self.policy.fate(self.rng)
                self._emit("claim", "claimed", q, jid, token, t0, t1, fate=fate)
                if self._work(q, jid, token, payload, fate):
                    jobs.append((jid, token, fate))
        if trouble:
            time.sleep(p.backoff_s)
        self._idle(bool(jobs) or trouble or any(r for r in replies))
        if jobs:
            self._settle(step, jobs)
        return len(jobs)

    def _idle(self, found: bool) -> None:
        if found:
            self._empty_in_a_row = 0
            return
        self._empty_in_a_row += 1
        if self._empty_in_a_row >= len(self.queues):
            self._empty_in_a_row = 0
            if self.policy.until_empty:
                self.finished = True
            else:
                time.sleep(self.policy.idle_s)

    def _work(self, q: QueueKeys, jid: str, token: int, payload: bytes, fate: Fate) -> bool:
        """Do the job's work; False when the attempt crashed and the job is abandoned."""
        p = self.policy
        if p.handle is not None:
            p.handle(payload)
        if fate.action == "crash":
            t0 = now()
            if fate.crash_ms:
                time.sleep(fate.crash_ms / p.time_scale / 1000.0)
            self._emit("crash", "abandoned", q, jid, token, t0, now(), fate=fate)
            return False
        if fate.work_ms:
            time.sleep(fate.work_ms / p.time_scale / 1000.0)
        self._emit("work", "done", q, jid, token, now(), fate=fate)
        return True

    def _settle(self, step: ConsumeStep, jobs: list[tuple[str, int, Fate]]) -> None:
        p, q = self.policy, step.keys
        calls = [step.settle(jid, token, p.retry_error, p.retry_delay(token, self.rng))
                 if fate.action == "retry" else step.settle(jid, token) for jid, token, fate in jobs]
        replies, t0, t1 = self._send(calls)
        trouble = False
        for (jid, token, fate), call, reply in zip(jobs, calls, replies):
            if is_error(reply):
                outcome = _outcome(reply)
                trouble = trouble or outcome != "refused"
                self._fail(call.verb, outcome, q, jid, token, t0, t1, fate=fate, error=reply)
            else:
                outcome = _ANSWERED[step.outcome(call.verb, reply)]
                self._emit(call.verb, outcome, q, jid, token, t0, t1, fate=fate)
        if trouble:
            time.sleep(p.backoff_s)


class Pump(_Role):
    def __init__(self, calls: Calls, queues: Sequence[QueueKeys], policy: PumpPolicy,
                 on_event: OnEvent | None = None, rng: random.Random | None = None, strict: bool = False) -> None:
        super().__init__(calls, queues, on_event, strict)
        self.policy = policy
        phase = (rng or random.Random()).random() if policy.random_phase else 1.0
        self._due = now() + phase * policy.interval_s

    def pause(self) -> None:
        wait = self._due - now()
        if wait > 0:
            time.sleep(wait)
        self._due += self.policy.interval_s
        if self._due < now():
            self._due = now() + self.policy.interval_s  # fell behind: keep the cadence, skip the missed ticks

    def step(self) -> int:
        p = self.policy
        moved = 0
        for q in self.queues:
            calls = [(verbs.reap(q, p.reap_limit, p.max_attempts), p.reap_limit)] if p.reap else []
            if p.promote:
                calls.append((verbs.promote(q, p.promote_limit), p.promote_limit))
            for call, limit in calls:
                count = self._drain(q, call, limit)
                if count is None:
                    break  # the server is not answering this queue: the next tick tries again
                moved += count
        return moved

    def _drain(self, q: QueueKeys, call: ScriptCall, limit: int) -> int | None:
        """One call, again while it moved its whole limit (up to drain_rounds); None if it failed."""
        moved = 0
        for _ in range(self.policy.drain_rounds):
            (reply,), t0, t1 = self._send([call])
            if is_error(reply):
                self._fail(call.verb, _outcome(reply), q, "", 0, t0, t1, error=reply)
                return None
            moved += int(reply)
            self._emit(call.verb, "ok", q, "", 0, t0, t1, int(reply))
            if int(reply) < limit:
                break
        return moved


def start_thread(role: _Role, stop: Stop, name: str = "", guard: Callable[[BaseException], None] | None = None
                 ) -> threading.Thread:
    """Run a role in a daemon thread. `guard` hears the exception that ended
    it (one raised by on_event, or a bug), instead of a lost traceback."""

    def body() -> None:
        try:
            role.run(stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            if guard is None:
                raise
            guard(exc)

    thread = threading.Thread(target=body, name=name or type(role).__name__.lower(), daemon=True)
    thread.start()
    return thread
