"""The capacity driver's worker: one process, many pipelined connections.

The worker runs the load engine's pipelined transport
(`echomq_bench.load.pipelined`): a consumer role per connection, each with up
to `pipeline` jobs in flight, and with --feed produce one enqueue backfill
producer role. Their policies are the engine's, built from the `WorkerPlan`
(`WorkerPlan.consumer_policy`, `producer_policy`). The moment a chunk of
replies arrives on a connection the worker parses them (hiredis) and writes
that connection's next send. With a few connections per process the server
always finds another connection's commands waiting while this process
parses, so the server, not Python, is what runs out of time.

Closed loop (rate None): every slot claims again as soon as its job is
completed. Open loop (rate R): claims are due on a fixed schedule, R per
second over all connections, and each claim's latency is taken from its
intended start, not from when it was sent, so a stalled server cannot hide
its tail by delaying the sends (coordinated omission). A complete's latency
runs from when it became due (claim reply + work time); a cycle's from the
claim's intended start to the complete's reply.

Cycles are counted when their complete's reply arrives inside the window
[t_start, t_end). Closed loop, latencies are timed for the replies that
arrive inside it too; after t_end no new claims go out, and the jobs already
claimed are completed, so a run leaves nothing active behind.

Open loop, the claims timed are those due inside the window, whenever their
replies come. At t_end every one of them not yet sent goes out at once
(late, timed from its intended start all the same), and the worker waits up
to `reply_timeout_s` after t_end for the replies and completes still owed;
what has not come back by then is counted as a timeout (`due_timeouts`,
`due_cycle_timeouts`), never dropped unseen.

The process around a worker (pinning, the pipe to the parent) is
`echomq_bench.load.driver_process`.
"""

from __future__ import annotations

import heapq
import math
import os
import random
import selectors
import time
from typing import Any

from echomq._instrument import QueueKeys
from echomq_bench.load.bulk import IdBlock
from echomq_bench.load.pipelined import PipelinedConsumer, PipelinedProducer, Tally, Working
from echomq_bench.load.wire import connect
from echomq_bench.load.worker_plan import BIN_S, VERBS, WorkerPlan, Window, slot_owner

__all__ = ["Worker", "WorkerPlan", "Window", "slot_owner", "VERBS", "BIN_S"]


class Worker:
    def __init__(self, plan: WorkerPlan, window: Window) -> None:
        self.plan = plan
        self.win = window
        self.bin_s = plan.slot_s or BIN_S  # cycles are counted per time bin (a slot when alternating)
        self.tally = Tally(self.bin_s, plan.ledger)
        self.owners: dict[int, bool] = {}
        self.working: Working = []
        self.sel = selectors.DefaultSelector()
        rng = random.Random(plan.seed)
        policy = plan.consumer_policy()
        self.depth, self.open_loop = policy.claim_batch, policy.rate is not None
        self.consumers = [
            PipelinedConsumer(connect(plan.target), i, self.tally, QueueKeys(plan.queues[i % len(plan.queues)]),
                              plan.shas, policy, self.working, rng)
            for i in range(plan.connections)]
        self.producer = PipelinedProducer(
            connect(plan.target), plan.connections, self.tally, plan.queues, plan.shas, plan.producer_policy(),
            IdBlock(plan.node)) if plan.produce else None
        self.roles: list[PipelinedConsumer | PipelinedProducer] = [*self.consumers]
        if self.producer is not None:
            self.roles.append(self.producer)
        for role in self.roles:
            self.sel.register(role.sock, selectors.EVENT_READ, role)

    # -- time slots ----------------------------------------------------------

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

    # -- the loop ------------------------------------------------------------

    def run(self) -> None:
        win, tally = self.win, self.tally
        tally.t_begin = win.t_begin
        for c in self.consumers:
            c.schedule(win)
        # Open loop, the replies owed after the window are awaited this long; closed loop, until they come.
        give_up = win.t_end + self.plan.reply_timeout_s if self.open_loop else math.inf
        now = time.perf_counter()
        if now < win.t_begin:
            time.sleep(win.t_begin - now)
        while True:
            now = time.perf_counter()
            stopping = now >= win.t_end
            if now >= give_up:
                for c in self.consumers:
                    c.abandon(self.working)
                return
            hold = stopping or not self._own(now)
            self._send(now, hold)
            if stopping and self._idle():
                return
            timeout = self._timeout(now, stopping, hold, give_up)
            events = self.sel.select(timeout)
            now = time.perf_counter()
            tally.in_window = win.t_start <= now < win.t_end
            counted = tally.in_window and self._own(now)
            for key, _ in events:
                key.data.receive(now, counted)

    def _send(self, now: float, hold: bool) -> None:
        """Hand the jobs whose work is done to their connections, then write what is due."""
        working, consumers = self.working, self.consumers
        while working and working[0][0] <= now:
            due, _, index, job_id, token, start = heapq.heappop(working)
            consumers[index].ready.append((job_id, token, due, start))
        # Once per loop and connection: the test is spelled out here rather
        # than asked of each role, which costs a call per connection.
        t_begin, depth = self.win.t_begin, self.depth
        # Open loop, the window closed: the claims due inside it that are still unsent go out now.
        flush = self.open_loop and now >= self.win.t_end
        for c in consumers:
            if c.ready or (not hold and c.busy < depth) or (flush and c.next_claim < c.end_due):
                c.send(now, t_begin, hold)
        if self.producer is not None and not hold:
            self.producer.send(now, t_begin, hold)

    def _timeout(self, now: float, stopping: bool, hold: bool, give_up: float) -> float | None:
        """Sleep until a reply, the next scheduled claim of a connection with
        a free slot, the next job's work is done, this worker's next time
        slot, the window ends, or the wait for late replies does."""
        win = self.win
        wake: list[float] = [give_up] if stopping and give_up < math.inf else []
        if not stopping:
            wake.append(win.t_end)
            if hold:
                wake.append(self._next_own(now))
            elif self.open_loop:
                wake.extend(t for c in self.consumers if (t := c.next_due(win.t_begin)) is not None)
        if self.working:
            wake.append(self.working[0][0])
        return max(0.0, min(wake) - time.perf_counter()) if wake else None

    def _idle(self) -> bool:
        return not self.working and all(not r.batches for r in self.roles) and all(
            not c.ready for c in self.consumers)

    # -- what it reports -----------------------------------------------------

    def result(self) -> dict[str, Any]:
        from echomq_bench.measurement.latency import Latency

        tally = self.tally
        blobs = {}
        for verb, counts in tally.lat.items():
            if counts:
                hist = Latency()
                for us, n in counts.items():
                    hist.record_us(us, n)
                blobs[verb] = hist.encode()
        out: dict[str, Any] = {"index": self.plan.index, "pid": os.getpid(), "counts": dict(tally.c),
                               "latency": blobs, "bins": tally.bins, "bin_s": self.bin_s,
                               "error": tally.last_error, "queues": self.per_queue()}
        if self.plan.ledger:
            out["ledger"] = {"enqueued": sorted(tally.enq_ids), "accepted": tally.accepted,
                             "refused": tally.refused}
        return out

    def per_queue(self) -> dict[str, dict[str, int]]:
        """Completes and enqueues the server accepted, per queue, over the whole run."""
        fed = self.producer.fed if self.producer is not None else [0] * len(self.plan.queues)
        out = {q: {"completed": 0, "enqueued": n} for q, n in zip(self.plan.queues, fed)}
        for conn in self.consumers:
            out[conn.queue.name]["completed"] += conn.done
        return out

    def close(self) -> None:
        for role in self.roles:
            self.sel.unregister(role.sock)
            role.sock.close()
        self.sel.close()
