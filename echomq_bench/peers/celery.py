"""Celery with its Redis broker (kombu's Redis transport), no result backend.

Enqueue: `apply_async` once per job; Celery has no bulk send, and each
publish is one LPUSH of a JSON envelope (headers, body, delivery info).
Drain: one worker per consumer process with the `solo` pool, so the
consumer processes stay as many as every other queue's (the default
`prefork` pool would fork one child per core under each). Every task has
ignore_result, so nothing is written once it ran; acks are early (Celery's
default): a message is acked when it is taken, before the task runs.

`default` keeps Celery's worker defaults: prefetch multiplier 4, gossip,
mingle and heartbeat on. `throughput` follows Celery's optimizing guide for
many short tasks: a large prefetch multiplier (100, so 100 messages reserved
per consumer), and gossip, mingle and heartbeat off, the broker traffic the
guide and the worker's options name as avoidable.

Celery's worker has no burst mode: it stops when the runner says every job
has run (`state.should_stop`, the flag its own SIGTERM handler sets).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

from echomq_bench.peers import jobs
from echomq_bench.peers.base import MODES, PAYLOAD, PYTHON_CHILD, Gate, Leftovers, count_keys, require

__all__ = ["Celery"]

TASK = "noop"
PROGRESS_EVERY = 1000
# (prefetch multiplier, broker chatter on) per mode.
WORKER = {"default": (4, True), "throughput": (100, False)}


def _app(url: str, queue: str, prefetch: int) -> Any:
    celery = require("celery", "celery")
    app = celery.Celery("peers", broker=url, set_as_current=False)
    app.conf.update(task_default_queue=queue, task_ignore_result=True, result_backend=None,
                    worker_prefetch_multiplier=prefetch, broker_connection_retry_on_startup=True,
                    worker_hijack_root_logger=False, worker_redirect_stdouts=False)
    app.task(name=TASK, ignore_result=True)(jobs.run_job)
    return app


class Celery:
    name = "celery"
    distribution = "celery"
    modes = MODES
    child = PYTHON_CHILD
    enqueue_mode = "Task.apply_async once per job (Celery has no bulk send)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.prefetch, self.chatter = WORKER[mode]
        extra = "" if self.chatter else ", without gossip, mingle and heartbeat"
        self.drain_mode = f"worker, solo pool, prefetch multiplier {self.prefetch}{extra}, early ack"

    def check(self) -> None:
        require("celery", "celery")

    def settings(self, consumers: int) -> dict[str, Any]:
        return {"pool": "solo", "concurrency": 1, "worker_prefetch_multiplier": self.prefetch,
                "gossip_mingle_heartbeat": self.chatter, "task_ignore_result": True, "result_backend": None,
                "acks_late": False, "serializer": "json (default)", "consumers": consumers,
                "in_flight_per_consumer": self.prefetch}

    def produce(self, url: str, queue: str, n: int, gate: Gate, progress: Callable[[int], None]) -> int:
        app = _app(url, queue, self.prefetch)
        task = app.tasks[TASK]
        with app.connection_for_write() as conn:
            conn.ensure_connection()
        gate.ready()
        for sent in range(1, n + 1):
            task.apply_async((PAYLOAD,))
            if sent % PROGRESS_EVERY == 0:
                progress(sent)
        progress(n)
        gate.done()
        app.close()
        return n

    def consume(self, url: str, queue: str, gate: Gate) -> None:
        signals = require("celery.signals", "celery")
        state = require("celery.worker.state", "celery")
        app = _app(url, queue, self.prefetch)
        # The worker is ready once its consumer is set up: hold it there until the clock starts.
        signals.worker_ready.connect(lambda **_: gate.ready(), weak=False)

        def stop_on_signal() -> None:
            gate.stop.wait()
            state.should_stop = 0  # EX_OK: a warm shutdown, as on SIGTERM

        threading.Thread(target=stop_on_signal, daemon=True).start()
        off = not self.chatter
        worker = app.Worker(pool="solo", concurrency=1, queues=[queue], loglevel="WARNING", quiet=True,
                            hostname=f"peers-{os.getpid()}@localhost", without_gossip=off,
                            without_mingle=off, without_heartbeat=off, redirect_stdouts=False)
        worker.start()
        gate.done(at=jobs.finished_at())

    def leftovers(self, client: Any, queue: str) -> Leftovers:
        # kombu keeps a message in the queue's list (one list per priority step) until it is
        # taken, then in the `unacked` hash until it is acked.
        waiting = sum(int(client.llen(k)) for k in client.scan_iter(match=queue + "*", count=1000)
                      if client.type(k) == b"list")
        unacked = int(client.hlen("unacked"))
        results = count_keys(client, "celery-task-meta-*")
        detail = {"queued": waiting, "unacked": unacked, "results": results,
                  "unacked_index": int(client.zcard("unacked_index"))}
        # The message is the job's record: there is no row apart from it.
        return Leftovers(pending=waiting + unacked, kept=results, rows=waiting + unacked, detail=detail)
