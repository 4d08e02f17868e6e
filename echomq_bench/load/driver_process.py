"""A capacity driver worker as a process of its own.

`worker_main` is the entry of a worker forked by the harness
(`echomq_bench.load.harness`): pin, connect, say ready, wait for the
window, run, send the result. What stops it reaches the parent, which
names the worker.
"""

from __future__ import annotations

import os

from echomq_bench.load.driver import Worker
from echomq_bench.load.harness import Line
from echomq_bench.load.worker_plan import WorkerPlan, Window

__all__ = ["worker_main"]


def worker_main(line: Line, plan: WorkerPlan) -> None:
    """Process entry: connect, say ready, wait for the window, run, report."""
    if plan.cpus:
        try:
            os.sched_setaffinity(0, plan.cpus)
        except OSError:
            pass  # pinning is a request: a narrower cpuset still runs
    worker = Worker(plan, Window(0, 0, 0))
    try:
        worker.win = line.ready()
        worker.run()
        line.result(worker.result())
    finally:
        worker.close()
