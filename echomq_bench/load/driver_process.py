"""A capacity driver worker as a process of its own, or in this one.

`worker_main` is the entry of a forked worker: pin, connect, say ready over
the pipe, wait for the window, run, send the result (or the error that
stopped it, for the parent to name the worker). `run_worker` runs one in
this process, for tests and small runs.
"""

from __future__ import annotations

import os
from typing import Any

from echomq_bench.load.driver import Worker
from echomq_bench.load.worker_plan import WorkerPlan, Window

__all__ = ["run_worker", "worker_main"]


def run_worker(plan: WorkerPlan, window: Window) -> dict[str, Any]:
    """Run one worker in this process (no fork)."""
    worker = Worker(plan, window)
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
            pass  # pinning is a request: a narrower cpuset still runs
    try:
        worker = Worker(plan, Window(0, 0, 0))
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
