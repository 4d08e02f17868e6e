"""The capacity driver's worker: one process, many pipelined connections.

Each connection keeps up to `pipeline` jobs in flight: it writes the claims
and the completes that are due in one send, and the moment a chunk of
replies arrives it parses them (hiredis) and writes the next send. With a
few connections per process the server always finds another connection's
commands waiting while this process parses, so the server, not Python, is
what runs out of time. Commands are raw EVALSHA of the project's scripts,
laid out by `echomq.verbs` and encoded once per queue by `load.wire`:
claim's bytes never change, complete's differ by id and token only,
enqueue's by id only.

Closed loop (rate None): every slot claims again as soon as its job is
completed. Open loop (rate R): claims are due on a fixed schedule, R per
second over all connections, and each claim's latency is taken from its
intended start, not from when it was sent, so a stalled server cannot hide
its tail by delaying the sends (coordinated omission). A complete's latency
runs from when it became due (claim reply + work time); a cycle's from the
claim's intended start to the complete's reply.

Only replies that arrive inside the window [t_start, t_end) are counted and
timed. After t_end no new claims go out; the jobs already claimed are
completed, so a run leaves nothing active behind.
"""

from __future__ import annotations

import heapq
import os
import random
import selectors
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import hiredis

from echomq import verbs
from echomq_bench.load.backlog import IdBlock
from echomq_bench.load.wire import CommandTemplate, Target, connect, encode_call, hole
from echomq.keys import QueueKeys

__all__ = ["WorkerPlan", "Window", "slot_owner", "worker_main", "run_worker", "VERBS", "BIN_S"]

VERBS = ("claim", "complete", "enqueue", "cycle")
RECV_BYTES = 1 << 18
BIN_S = 0.25   # timeline resolution when not alternating
ID_WIDTH = 14  # a branded id: 3 letters of kind, 11 base62 digits
CLAIM, COMPLETE, ENQUEUE = 0, 1, 2
# Every id the scripts accept, and so every id claim hands out, is ID_WIDTH
# bytes wide: the templates below keep the id's place at that width.
ID_HOLE = hole("id", ID_WIDTH)
TOKEN_HOLE = hole("token", 8)


@dataclass(frozen=True)
class WorkerPlan:
    index: int
    node: int
    target: Target
    queues: tuple[str, ...]
    shas: dict[str, str]
    connections: int = 4
    pipeline: int = 64
    lease_ms: int = 60_000
    payload_bytes: int = 64
    work: str = "const:0"
    rate: float | None = None            # claims/s for this worker; None = closed loop
    produce: bool = False                # producers keep pending fed
    produce_ahead: int = 0               # this worker's share of the pending backlog
    ledger: bool = False
    cpus: tuple[int, ...] | None = None  # pin this process here
    seed: int = 0
    # Time slots shared by several workers: this one loads its server only in
    # the slots `slot_owner` gives to slot_index (slot_s None: always).
    slot_s: float | None = None
    slot_index: int = 0
    slot_count: int = 1
    slot_seed: int = 0


def slot_owner(k: int, count: int, seed: int) -> int:
    """Which of `count` servers owns time slot k.

    Slots go in rounds of `count`, each server once per round, in an order
    drawn afresh for every round from `seed`: randomised multiple interleaved
    trials, so no periodic disturbance lines up with one server's turns.
    """
    if count <= 1:
        return 0
    order = list(range(count))
    random.Random(seed * 1_000_003 + k // count).shuffle(order)
    return order[k % count]


@dataclass(frozen=True)
class Window:
    t_begin: float   # perf_counter: start sending (warm-up starts)
    t_start: float   # counting starts
    t_end: float     # counting stops; no new claims after this


@dataclass
class _Batch:
    """One send on one connection, in the order its replies come back."""

    kinds: list[int]
    t_due: list[float]                      # when each command was due (latency origin)
    jobs: list[tuple[bytes, int, float]]    # per complete: id, token, cycle start
    feed: int = -1                          # a producer's send: index of the queue it feeds


@dataclass
class _Conn:
    sock: socket.socket
    queue: QueueKeys
    claim_cmd: bytes
    complete: Callable[[tuple[bytes, bytes, int]], bytes]   # (id, token, len(token)) -> bytes
    producer: bool
    index: int
    reader: Any = field(default_factory=hiredis.Reader)
    batches: deque[_Batch] = field(default_factory=deque)
    pos: int = 0
    busy: int = 0           # jobs in flight: claims sent + claimed not yet completed
    ready: list[tuple[bytes, int, float, float]] = field(default_factory=list)  # due completes
    next_claim: int = 0     # open loop: index of the next scheduled claim
    inflight_enq: int = 0
    done: int = 0           # completes accepted, the whole run: per-queue accounting


def _claim_bytes(sha: str, keys: QueueKeys, lease_ms: int) -> bytes:
    return encode_call(verbs.claim(keys, lease_ms), sha)


def _complete_filler(sha: str, keys: QueueKeys) -> Callable[[tuple[bytes, bytes, int]], bytes]:
    template = CommandTemplate(verbs.complete(keys, ID_HOLE, TOKEN_HOLE).evalsha(sha),
                               fixed={"id": ID_HOLE}, variable={"token": TOKEN_HOLE})
    return template.filler("id", "token", "len(token)")


def _enqueue_pieces(sha: str, keys: QueueKeys, payload: bytes) -> list[bytes]:
    """EVALSHA enqueue as the bytes around its ids: `job_id.join(pieces)` is the command."""
    return CommandTemplate(verbs.enqueue(keys, ID_HOLE, payload).evalsha(sha), fixed={"id": ID_HOLE}).pieces()


class _Worker:
    def __init__(self, plan: WorkerPlan, window: Window) -> None:
        from echomq_bench.measurement.workdist import parse_dist

        self.plan = plan
        self.win = window
        self.work = parse_dist(plan.work)
        # const:0 (capacity) completes in the same send as the next claims, no timer.
        self.zero_work = getattr(self.work, "value_ms", None) == 0
        self.rng = random.Random(plan.seed)
        self.payload = b"x" * plan.payload_bytes
        self.ids = IdBlock(plan.node)
        self.lat: dict[str, dict[int, int]] = {v: {} for v in VERBS}
        self.c: dict[str, int] = dict.fromkeys(
            ("claims", "claimed", "empty", "completed", "stale", "errors", "enqueued", "duplicate",
             "w_claimed", "w_completed", "w_enqueued", "w_empty", "w_stale", "a_completed"), 0)
        self.enq_ids: set[str] = set()
        self.feed_turn = 0
        self.fed = [0] * len(plan.queues)   # enqueues accepted per queue of plan.queues
        # Cycles counted per time bin (a slot when alternating): the run's timeline.
        self.bin_s = plan.slot_s or BIN_S
        self.bins: dict[int, int] = {}
        self.owners: dict[int, bool] = {}
        self.accepted: dict[str, int] = {}
        self.refused: list[tuple[str, int]] = []
        self.working: list[tuple[float, int, int, bytes, int, float]] = []  # heap: due, n, conn, id, token, start
        self.seq = 0
        self.sel = selectors.DefaultSelector()
        self.conns: list[_Conn] = []
        shas = plan.shas
        n_consumers = plan.connections
        for i in range(n_consumers + (1 if plan.produce else 0)):
            keys = QueueKeys(plan.queues[i % len(plan.queues)])
            conn = _Conn(
                sock=connect(plan.target), queue=keys,
                claim_cmd=_claim_bytes(shas["claim"], keys, plan.lease_ms),
                complete=_complete_filler(shas["complete"], keys), producer=i >= n_consumers, index=i)
            self.conns.append(conn)
            self.sel.register(conn.sock, selectors.EVENT_READ, conn)
        self.enqueue_pieces = [_enqueue_pieces(shas.get("enqueue", ""), QueueKeys(q), self.payload)
                               for q in plan.queues]
        self.consumers = [c for c in self.conns if not c.producer]
        self.per_conn_rate = plan.rate / n_consumers if plan.rate else None

    # -- sending -------------------------------------------------------------

    def _owns(self, k: int) -> bool:
        got = self.owners.get(k)
        if got is None:
            p = self.plan
            got = self.owners[k] = slot_owner(k, p.slot_count, p.slot_seed) == p.slot_index
        return got

    def _own(self, now: float) -> bool:
        """Is this worker's server the one to load now?"""
        p = self.plan
        return p.slot_s is None or self._owns(int((now - self.win.t_begin) / p.slot_s))

    def _next_own(self, now: float) -> float:
        p = self.plan
        assert p.slot_s is not None
        k = int((now - self.win.t_begin) / p.slot_s) + 1
        while not self._owns(k):
            k += 1
        return self.win.t_begin + k * p.slot_s

    def _send(self, conn: _Conn, now: float, hold: bool) -> None:
        """Write what is due on this connection: completes always, claims and enqueues unless held."""
        kinds: list[int] = []
        dues: list[float] = []
        jobs: list[tuple[bytes, int, float]] = []
        parts: list[bytes] = []
        feed = -1
        if conn.producer:
            feed = self._produce(conn, now, hold, kinds, dues, jobs, parts)
        else:
            complete = conn.complete
            for job_id, token, due, start in conn.ready:
                tok = b"%d" % token
                parts.append(complete((job_id, tok, len(tok))))
                kinds.append(COMPLETE)
                dues.append(due)
                jobs.append((job_id, token, start))
            conn.ready.clear()
            if not hold:
                n = self.plan.pipeline - conn.busy
                if self.per_conn_rate is not None:
                    due_n = int((now - self.win.t_begin) * self.per_conn_rate) + 1 - conn.next_claim
                    n = min(n, due_n)
                if n > 0:
                    parts.append(conn.claim_cmd * n)
                    kinds.extend([CLAIM] * n)
                    if self.per_conn_rate is not None:
                        t0, dt = self.win.t_begin, 1.0 / self.per_conn_rate
                        dues.extend(t0 + (conn.next_claim + k) * dt for k in range(n))
                        conn.next_claim += n
                    else:
                        dues.extend([now] * n)
                    conn.busy += n
                    self.c["claims"] += n
        if kinds:
            conn.batches.append(_Batch(kinds, dues, jobs, feed))
            conn.sock.sendall(b"".join(parts))

    def _produce(self, conn: _Conn, now: float, hold: bool, kinds: list[int], dues: list[float],
                 jobs: list[tuple[bytes, int, float]], parts: list[bytes]) -> int:
        """Add enqueues to this send; returns the index of the queue they feed (-1: none)."""
        if hold:
            return -1
        # Keep this worker's share of pending topped up: what it enqueued
        # and has in flight, less what its consumers claimed. It may have as
        # many enqueues in flight as all its consumers have jobs, or it
        # would fall behind them.
        gap = self.plan.produce_ahead - (self.c["enqueued"] + conn.inflight_enq - self.c["claimed"])
        n = min(gap, self.plan.pipeline * self.plan.connections - conn.inflight_enq)
        if n <= 0:
            return -1
        # Each send feeds the next queue in turn.
        feed = self.feed_turn % len(self.enqueue_pieces)
        pieces = self.enqueue_pieces[feed]
        self.feed_turn += 1
        ids = self.ids.take(n)
        parts.append(b"".join([job_id.join(pieces) for job_id in ids]))
        jobs.extend((job_id, 0, now) for job_id in ids)
        kinds.extend([ENQUEUE] * n)
        dues.extend([now] * n)
        conn.inflight_enq += n
        return feed

    # -- receiving -----------------------------------------------------------

    def _receive(self, conn: _Conn, now: float) -> None:
        data = conn.sock.recv(RECV_BYTES)
        if not data:
            raise ConnectionError("the server closed the driver's connection")
        conn.reader.feed(data)
        in_window = self.win.t_start <= now < self.win.t_end
        counted = in_window and self._own(now)
        c, lat = self.c, self.lat
        batch = conn.batches[0] if conn.batches else None
        while (reply := conn.reader.gets()) is not False:
            assert batch is not None, "a reply nobody asked for"
            pos = conn.pos
            kind = batch.kinds[pos]
            us = int((now - batch.t_due[pos]) * 1e6)
            if kind == CLAIM:
                conn.busy -= 1
                if isinstance(reply, list) and reply:
                    c["claimed"] += 1
                    job_id, token = reply[0], int(reply[2])
                    conn.busy += 1
                    start = batch.t_due[pos]
                    if self.zero_work:
                        conn.ready.append((job_id, token, now, start))
                    else:
                        self.seq += 1
                        due = now + self.work.sample_ms(self.rng) / 1000.0
                        heapq.heappush(self.working, (due, self.seq, conn.index, job_id, token, start))
                    if counted:
                        c["w_claimed"] += 1
                elif isinstance(reply, list):
                    c["empty"] += 1
                    if counted:
                        c["w_empty"] += 1
                else:
                    c["errors"] += 1
                    self.last_error = str(reply)
                if counted:
                    d = lat["claim"]
                    d[us] = d.get(us, 0) + 1
            elif kind == COMPLETE:
                conn.busy -= 1
                # Completes lead each consumer batch, so a complete's index is its position.
                job_id, token, start = batch.jobs[pos]
                if reply == b"ok":
                    c["completed"] += 1
                    conn.done += 1
                    if in_window:
                        c["a_completed"] += 1
                    if self.plan.ledger:
                        self.accepted[job_id.decode()] = self.accepted.get(job_id.decode(), 0) + 1
                    if counted:
                        c["w_completed"] += 1
                        k = int((now - self.win.t_begin) / self.bin_s)
                        self.bins[k] = self.bins.get(k, 0) + 1
                        d = lat["cycle"]
                        cu = int((now - start) * 1e6)
                        d[cu] = d.get(cu, 0) + 1
                elif isinstance(reply, hiredis.ReplyError) and str(reply).startswith("EMQSTALE"):
                    c["stale"] += 1
                    if counted:
                        c["w_stale"] += 1
                    if self.plan.ledger:
                        self.refused.append((job_id.decode(), token))
                else:
                    c["errors"] += 1
                    self.last_error = str(reply)
                if counted:
                    d = lat["complete"]
                    d[us] = d.get(us, 0) + 1
            else:
                conn.inflight_enq -= 1
                if reply == b"enqueued":
                    c["enqueued"] += 1
                    self.fed[batch.feed] += 1
                    if self.plan.ledger:
                        self.enq_ids.add(batch.jobs[pos][0].decode())
                    if counted:
                        c["w_enqueued"] += 1
                elif reply == b"duplicate":
                    c["duplicate"] += 1
                else:
                    c["errors"] += 1
                    self.last_error = str(reply)
                if counted:
                    d = lat["enqueue"]
                    d[us] = d.get(us, 0) + 1
            conn.pos += 1
            if conn.pos == len(batch.kinds):
                conn.batches.popleft()
                conn.pos = 0
                batch = conn.batches[0] if conn.batches else None

    # -- the loop ------------------------------------------------------------

    def run(self) -> None:
        win = self.win
        now = time.perf_counter()
        if now < win.t_begin:
            time.sleep(win.t_begin - now)
        rate = self.per_conn_rate
        pipeline = self.plan.pipeline
        while True:
            now = time.perf_counter()
            stopping = now >= win.t_end
            hold = stopping or not self._own(now)
            while self.working and self.working[0][0] <= now:
                due, _, index, job_id, token, start = heapq.heappop(self.working)
                self.conns[index].ready.append((job_id, token, due, start))
            for conn in self.conns:
                if conn.ready or (not hold and (conn.producer or conn.busy < pipeline)):
                    self._send(conn, now, hold)
            if stopping and self._idle():
                return
            # Sleep until a reply, the next scheduled claim of a connection
            # with a free slot, the next job's work is done, this worker's
            # next time slot, or the window ends.
            wake: list[float] = []
            if not stopping:
                wake.append(win.t_end)
                if hold:
                    wake.append(self._next_own(now))
                elif rate is not None:
                    wake.extend(win.t_begin + c.next_claim / rate for c in self.consumers if c.busy < pipeline)
            if self.working:
                wake.append(self.working[0][0])
            timeout = max(0.0, min(wake) - time.perf_counter()) if wake else None
            events = self.sel.select(timeout)
            now = time.perf_counter()
            for key, _ in events:
                self._receive(key.data, now)

    def _idle(self) -> bool:
        return not self.working and all(not c.batches and not c.ready for c in self.conns)

    def result(self) -> dict[str, Any]:
        from echomq_bench.measurement.latency import Latency

        blobs = {}
        for verb, counts in self.lat.items():
            if counts:
                hist = Latency()
                for us, n in counts.items():
                    hist.record_us(us, n)
                blobs[verb] = hist.encode()
        out: dict[str, Any] = {"index": self.plan.index, "pid": os.getpid(), "counts": dict(self.c),
                               "latency": blobs, "bins": self.bins, "bin_s": self.bin_s,
                               "error": getattr(self, "last_error", None), "queues": self.per_queue()}
        if self.plan.ledger:
            out["ledger"] = {"enqueued": sorted(self.enq_ids), "accepted": self.accepted, "refused": self.refused}
        return out

    def per_queue(self) -> dict[str, dict[str, int]]:
        """Completes and enqueues the server accepted, per queue, over the whole run."""
        out = {q: {"completed": 0, "enqueued": n} for q, n in zip(self.plan.queues, self.fed)}
        for conn in self.consumers:
            out[conn.queue.name]["completed"] += conn.done
        return out

    def close(self) -> None:
        for conn in self.conns:
            self.sel.unregister(conn.sock)
            conn.sock.close()
        self.sel.close()


def run_worker(plan: WorkerPlan, window: Window) -> dict[str, Any]:
    """Run one worker in this process (no fork): what tests and small runs use."""
    worker = _Worker(plan, window)
    try:
        worker.run()
        return worker.result()
    finally:
        worker.close()


def worker_main(plan: WorkerPlan, pipe: Any) -> None:
    """Process entry: connect, say ready, wait for the window, run, report."""
    if plan.cpus:
        try:
            os.sched_setaffinity(0, plan.cpus)
        except OSError:
            pass
    try:
        worker = _Worker(plan, Window(0, 0, 0))
    except Exception as exc:  # reported to the parent, which names the worker
        pipe.send({"error": f"{type(exc).__name__}: {exc}"})
        return
    pipe.send({"ready": os.getpid()})
    window: Window = pipe.recv()
    worker.win = window
    try:
        worker.run()
        pipe.send(worker.result())
    except Exception as exc:
        pipe.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        worker.close()
