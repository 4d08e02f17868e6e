"""The load engine's pipelined transport: the consumer and producer roles on
raw pipelined sockets, for the capacity driver.

The engine's `Consumer` and `Producer` wait for each round trip; here one
connection keeps up to `ConsumerPolicy.claim_batch` jobs in flight and its
replies are parsed (hiredis) as they arrive, so one process can keep a
server busy. A consumer is the client's consume step (`echomq.ConsumeStep`)
with several calls in flight: the step's claim and complete are encoded
once per queue as raw EVALSHA (`load.wire.CommandTemplate`: claim's bytes
never change, complete's differ by id and token only; the producer's
enqueue differs by id only), and each reply is read as it is parsed. The policy is the engine's:
`lease_ms`, the work-time distribution (`ConsumerPolicy.fate`), the
open-loop claim `rate`, the pipeline depth (`claim_batch`), the backfill's
`backlog` and in-flight bound (`ProducerPolicy.batch`).

Each role is one connection. `send(now, hold)` writes what is due (a
consumer: the completes that are ready, then claims unless held; a producer:
enqueues unless held); `receive(now, counted)` parses what came back and
hands each reply to the handler of its kind. What they count goes into the
worker's `Tally`.

Open loop, a consumer is told the window (`schedule`): the claims due
inside it are the ones timed, whenever their replies come, and once the
window has closed every one of them not yet sent goes out at once, late,
beyond the pipeline's bound (`due_*` counters; `abandon` counts what is
still unanswered when the worker stops waiting).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import socket
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, cast

import hiredis

from echomq._instrument import ConsumeStep, QueueKeys, verbs
from echomq_bench.load.bulk import IdBlock
from echomq_bench.load.policy import ConsumerPolicy, ProducerPolicy
from echomq_bench.load.wire import CommandTemplate, encode_call, hole
from echomq_bench.load.worker_plan import VERBS, Window

__all__ = ["Tally", "PipelinedConsumer", "PipelinedProducer", "Working", "CLAIM", "COMPLETE", "ENQUEUE"]

RECV_BYTES = 1 << 18
ID_WIDTH = 14  # a branded id: 3 letters of kind, 11 base62 digits
CLAIM, COMPLETE, ENQUEUE = 0, 1, 2
# Every id the scripts accept, and so every id claim hands out, is ID_WIDTH
# bytes wide: the templates below keep the id's place at that width.
ID_HOLE = hole("id", ID_WIDTH)
TOKEN_HOLE = hole("token", 8)
# buried: damaged jobs buried by claims that handed none out (a count for a reply, not {}).
COUNTERS = ("claims", "claimed", "empty", "buried", "completed", "stale", "errors", "enqueued", "duplicate",
            "w_claimed", "w_completed", "w_enqueued", "w_empty", "w_buried", "w_stale", "a_completed",
            # Open loop: claims sent inside the window, whenever due; then the claims due inside it: how
            # many, sent (after it closed, of them), answered, unanswered when the worker stopped waiting,
            # and the cycles they began that were left unfinished then.
            "w_sent", "due", "due_sent", "due_sent_after", "due_answered", "due_timeouts", "due_cycle_timeouts")

# Jobs at work, over all of a worker's connections: (due, seq, connection index, id, token, cycle start).
Working = list[tuple[float, int, int, bytes, int, float]]
_SEQ = itertools.count()  # ties in the working heap break by arrival, never by comparing ids


class Tally:
    """What one worker counts: counters (w_ inside the window, a_ from its
    start on), latency in µs per verb, cycles per time bin, and the ledger."""

    def __init__(self, bin_s: float, ledger: bool) -> None:
        self.c: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.lat: dict[str, dict[int, int]] = {v: {} for v in VERBS}
        self.t_begin = 0.0       # the window's start of sending: time bins count from here
        self.in_window = False   # the replies being handled arrived inside [t_start, t_end)
        self.bin_s = bin_s
        self.bins: dict[int, int] = {}
        self.ledger = ledger
        self.enq_ids: set[str] = set()
        self.accepted: dict[str, int] = {}
        self.refused: list[tuple[str, int]] = []
        self.last_error: str | None = None

    def error(self, reply: Any) -> None:
        self.c["errors"] += 1
        self.last_error = str(reply)


@dataclass
class _Batch:
    """One send on one connection, in the order its replies come back."""

    kinds: list[int]
    t_due: list[float]                      # when each command was due (latency origin)
    jobs: list[tuple[bytes, int, float]]    # per complete or enqueue: id, token, cycle start
    feed: int = -1                          # a producer's send: index of the queue it feeds


class _Pipelined:
    """One connection with its batches in flight and the reply handler per kind."""

    def __init__(self, sock: socket.socket, index: int, tally: Tally) -> None:
        self.sock = sock
        self.index = index
        self.tally = tally
        # The handlers run once per reply: they reach the counters and the
        # latency tables (µs -> count) without a lookup through the tally.
        self.c = tally.c
        self.lat_claim, self.lat_complete = tally.lat["claim"], tally.lat["complete"]
        self.lat_cycle, self.lat_enqueue = tally.lat["cycle"], tally.lat["enqueue"]
        self.reader = hiredis.Reader()
        self.batches: deque[_Batch] = deque()
        self.pos = 0
        self.handlers: tuple[Callable[[Any, _Batch, int, float, bool], None], ...] = ()

    def write(self, batch: _Batch, parts: list[bytes]) -> None:
        self.batches.append(batch)
        self.sock.sendall(b"".join(parts))

    def receive(self, now: float, counted: bool) -> None:
        data = self.sock.recv(RECV_BYTES)
        if not data:
            raise ConnectionError("the server closed the driver's connection")
        reader, handlers = self.reader, self.handlers
        reader.feed(data)
        batch = self.batches[0] if self.batches else None
        while (reply := reader.gets()) is not False:
            assert batch is not None, "a reply nobody asked for"
            pos = self.pos
            handlers[batch.kinds[pos]](reply, batch, pos, now, counted)
            self.pos = pos + 1
            if self.pos == len(batch.kinds):
                self.batches.popleft()
                self.pos = 0
                batch = self.batches[0] if self.batches else None


class PipelinedConsumer(_Pipelined):
    """The engine's consumer role on one connection: claims `claim_batch`
    jobs ahead, works each for its Fate's time, completes it. Open loop
    (`rate`): claim k is due at t_begin + k / rate and timed from then."""

    def __init__(self, sock: socket.socket, index: int, tally: Tally, queue: QueueKeys, shas: dict[str, str],
                 policy: ConsumerPolicy, working: Working, rng: random.Random) -> None:
        super().__init__(sock, index, tally)
        if policy.crash_rate or policy.fail_rate or policy.handle is not None:
            raise ValueError("the pipelined consumer completes every job: no crash, failure or handle")
        self.queue, self.policy, self.working, self.rng = queue, policy, working, rng
        step = ConsumeStep(queue, policy.lease_ms, policy.claim_batch, policy.max_attempts)
        self.claim_cmd = encode_call(step.claim, shas["claim"])
        # The hole stands where the verb takes an int token; each fill writes the real one.
        token = cast(int, TOKEN_HOLE)
        template = CommandTemplate(step.settle(ID_HOLE, token).evalsha(shas["complete"]),
                                   fixed={"id": ID_HOLE}, variable={"token": TOKEN_HOLE})
        self.complete = template.filler("id", "token", "len(token)")
        # No work time (capacity): a job completes in the same send as the next claims, no timer.
        self.zero_work = policy.work is None or getattr(policy.work, "value_ms", None) == 0
        self.handlers = (self.on_claim, self.on_complete)
        self.busy = 0           # jobs in flight: claims sent + claimed not yet completed
        self.ready: list[tuple[bytes, int, float, float]] = []  # due completes: id, token, due, cycle start
        self.next_claim = 0     # open loop: index of the next scheduled claim
        self.done = 0           # completes accepted, the whole run: per-queue accounting
        # Open loop: the window, and claims [first_due, end_due), those due inside it, at [due_from, due_until).
        self.open_loop = policy.rate is not None
        self.t_start = self.t_end = 0.0
        self.first_due = self.end_due = 0
        self.due_from = self.due_until = 0.0

    def schedule(self, window: Window) -> None:
        """Open loop: which claims are due inside the window, counted as `due`."""
        rate = self.policy.rate
        if rate is None:
            return
        self.first_due = _first_due_at(window.t_start - window.t_begin, rate)
        self.end_due = _first_due_at(window.t_end - window.t_begin, rate)
        # The due times of claims first_due and end_due, computed as `send` computes every due time.
        dt = 1.0 / rate
        self.due_from, self.due_until = window.t_begin + self.first_due * dt, window.t_begin + self.end_due * dt
        self.t_start, self.t_end = window.t_start, window.t_end
        self.c["due"] += self.end_due - self.first_due

    def next_due(self, t_begin: float) -> float | None:
        """Open loop with a free slot: when its next claim is due (None once
        the window's last is sent: no claim is due after the window)."""
        rate = self.policy.rate
        if rate is None or self.busy >= self.policy.claim_batch or self.next_claim >= self.end_due:
            return None
        return t_begin + self.next_claim / rate

    def send(self, now: float, t_begin: float, hold: bool) -> None:
        """Completes always, claims unless held."""
        kinds: list[int] = []
        dues: list[float] = []
        jobs: list[tuple[bytes, int, float]] = []
        parts: list[bytes] = []
        complete = self.complete
        for job_id, token, due, start in self.ready:
            tok = b"%d" % token
            parts.append(complete((job_id, tok, len(tok))))
            kinds.append(COMPLETE)
            dues.append(due)
            jobs.append((job_id, token, start))
        self.ready.clear()
        rate = self.policy.rate
        n = 0 if hold else self.policy.claim_batch - self.busy
        if rate is not None:
            n = self._claims_due(now, t_begin, rate, n)
        if n > 0:
            parts.append(self.claim_cmd * n)
            kinds.extend([CLAIM] * n)
            if rate is not None:
                dt = 1.0 / rate
                dues.extend(t_begin + (self.next_claim + k) * dt for k in range(n))
                self._count_due_sent(now, n)
                self.next_claim += n
            else:
                dues.extend([now] * n)
            self.busy += n
            self.c["claims"] += n
        if kinds:
            self.write(_Batch(kinds, dues, jobs), parts)

    def _claims_due(self, now: float, t_begin: float, rate: float, free: int) -> int:
        """Open loop: how many claims to send now. Inside the window those
        due by now, as far as `free` slots allow; once it has closed, every
        claim due inside it that is still unsent, whatever is in flight."""
        if now >= self.t_end:
            return self.end_due - self.next_claim
        due_by_now = min(int((now - t_begin) * rate) + 1, self.end_due)
        return min(free, due_by_now - self.next_claim)

    def _count_due_sent(self, now: float, n: int) -> None:
        """Claims [next_claim, next_claim + n) are sent now: count those sent inside the window, and
        those due inside it."""
        if self.t_start <= now < self.t_end:
            self.c["w_sent"] += n
        inside = min(self.next_claim + n, self.end_due) - max(self.next_claim, self.first_due)
        if inside > 0:
            self.c["due_sent"] += inside
            if now >= self.t_end:
                self.c["due_sent_after"] += inside

    def _timed(self, start: float, counted: bool) -> bool:
        """Is this reply's latency recorded? Open loop: when its cycle's claim
        was due inside the window, whenever the reply came; closed loop: when
        the reply came inside the window (`counted`)."""
        return self.due_from <= start < self.due_until if self.open_loop else counted

    def abandon(self, working: Working) -> None:
        """The worker stops waiting: count the claims due inside the window
        that were never answered, and the cycles they started that were left
        unfinished (complete unanswered, unsent, or the job still at work)."""
        c = self.c
        for i, batch in enumerate(self.batches):
            for pos in range(self.pos if i == 0 else 0, len(batch.kinds)):
                if batch.kinds[pos] == CLAIM:
                    c["due_timeouts"] += self._timed(batch.t_due[pos], False)
                else:
                    c["due_cycle_timeouts"] += self._timed(batch.jobs[pos][2], False)
        starts = [start for *_, start in self.ready] + [w[5] for w in working if w[2] == self.index]
        c["due_cycle_timeouts"] += sum(self._timed(start, False) for start in starts)

    def on_claim(self, reply: Any, batch: _Batch, pos: int, now: float, counted: bool) -> None:
        self.busy -= 1
        c = self.c
        start = batch.t_due[pos]
        if isinstance(reply, list) and reply:
            c["claimed"] += 1
            job_id, token = reply[0], int(reply[2])
            self.busy += 1
            if self.zero_work:
                self.ready.append((job_id, token, now, start))
            else:
                due = now + self.policy.fate(self.rng).work_ms / 1000.0
                heapq.heappush(self.working, (due, next(_SEQ), self.index, job_id, token, start))
            if counted:
                c["w_claimed"] += 1
        elif isinstance(reply, list):
            c["empty"] += 1
            if counted:
                c["w_empty"] += 1
        elif isinstance(reply, int):
            # Not empty and not an error: the claim stopped at its scan limit of damaged jobs, and
            # the slot it frees claims again.
            c["buried"] += reply
            if counted:
                c["w_buried"] += reply
        else:
            self.tally.error(reply)
        timed = self._timed(start, counted)
        if self.open_loop:
            c["due_answered"] += timed
        if timed:
            d, us = self.lat_claim, int((now - start) * 1e6)
            d[us] = d.get(us, 0) + 1

    def on_complete(self, reply: Any, batch: _Batch, pos: int, now: float, counted: bool) -> None:
        self.busy -= 1
        tally, c = self.tally, self.c
        # Completes lead each consumer batch, so a complete's index is its position.
        job_id, token, start = batch.jobs[pos]
        timed = self._timed(start, counted)
        if reply == b"ok":
            c["completed"] += 1
            self.done += 1
            if tally.in_window:
                c["a_completed"] += 1
            if tally.ledger:
                key = job_id.decode()
                tally.accepted[key] = tally.accepted.get(key, 0) + 1
            if counted:
                c["w_completed"] += 1
                bins, k = tally.bins, int((now - tally.t_begin) / tally.bin_s)
                bins[k] = bins.get(k, 0) + 1
            if timed:
                d, us = self.lat_cycle, int((now - start) * 1e6)
                d[us] = d.get(us, 0) + 1
        elif isinstance(reply, hiredis.ReplyError) and str(reply).startswith("EMQSTALE"):
            c["stale"] += 1
            if counted:
                c["w_stale"] += 1
            if tally.ledger:
                tally.refused.append((job_id.decode(), token))
        else:
            tally.error(reply)
        if timed:
            d, us = self.lat_complete, int((now - batch.t_due[pos]) * 1e6)
            d[us] = d.get(us, 0) + 1


def _first_due_at(offset_s: float, rate: float) -> int:
    """The index of the first claim due `offset_s` or more after the start of
    sending. Rounded first: the offset is a difference of two clock readings,
    off by picoseconds, and 0.2 s at 500/s is claim 100, not 101."""
    return max(0, math.ceil(round(offset_s * rate, 6)))


class PipelinedProducer(_Pipelined):
    """The engine's producer role as backfill: keeps `backlog` jobs pending by
    its own count (enqueued + in flight - claimed by this worker), with at most
    `batch` enqueues in flight; each send feeds the next queue in turn."""

    def __init__(self, sock: socket.socket, index: int, tally: Tally, queues: tuple[str, ...],
                 shas: dict[str, str], policy: ProducerPolicy, ids: IdBlock) -> None:
        super().__init__(sock, index, tally)
        self.policy, self.ids = policy, ids
        self.pieces = [CommandTemplate(verbs.enqueue(QueueKeys(q), ID_HOLE, policy.payload)
                                       .evalsha(shas.get("enqueue", "")), fixed={"id": ID_HOLE}).pieces()
                       for q in queues]
        self.fed = [0] * len(queues)   # enqueues accepted per queue
        self.turn = 0
        self.inflight = 0
        self.handlers = (self.on_enqueue, self.on_enqueue, self.on_enqueue)

    def send(self, now: float, t_begin: float, hold: bool) -> None:
        if hold:
            return
        c = self.c
        gap = (self.policy.backlog or 0) - (c["enqueued"] + self.inflight - c["claimed"])
        n = min(gap, self.policy.batch - self.inflight)
        if n <= 0:
            return
        feed = self.turn % len(self.pieces)
        pieces = self.pieces[feed]
        self.turn += 1
        ids = self.ids.take(n)
        self.inflight += n
        self.write(_Batch([ENQUEUE] * n, [now] * n, [(job_id, 0, now) for job_id in ids], feed),
                   [b"".join([job_id.join(pieces) for job_id in ids])])

    def on_enqueue(self, reply: Any, batch: _Batch, pos: int, now: float, counted: bool) -> None:
        self.inflight -= 1
        tally, c = self.tally, self.c
        if reply == b"enqueued":
            c["enqueued"] += 1
            self.fed[batch.feed] += 1
            if tally.ledger:
                tally.enq_ids.add(batch.jobs[pos][0].decode())
            if counted:
                c["w_enqueued"] += 1
        elif reply == b"duplicate":
            c["duplicate"] += 1
        else:
            tally.error(reply)
        if counted:
            d, us = self.lat_enqueue, int((now - batch.t_due[pos]) * 1e6)
            d[us] = d.get(us, 0) + 1
