"""The no-op job every peer runs, and the per-process tally that proves it ran.

The tally lives in the consumer process (RQ's SimpleWorker, arq's and
BullMQ's workers all run the job in the process that took it), so it costs
the server nothing and the runner reads it from each consumer's report.
"""

from __future__ import annotations

import time
from typing import Any

from echomq_bench.peers.base import PAYLOAD

__all__ = ["ran", "intact", "last_at", "run_job", "rq_job", "arq_job", "bullmq_job", "saq_job", "reset", "finished_at"]

ran = 0       # how many times the job function ran in this process
intact = 0    # of those, how many saw the exact payload that was enqueued
last_at = 0.0  # perf_counter when the last one ran: the end of a drain that the runner stops


def run_job(payload: Any) -> None:
    global ran, intact, last_at
    ran += 1
    last_at = time.perf_counter()
    if isinstance(payload, bytes):
        payload = payload.decode("ascii", "replace")
    if payload == PAYLOAD:
        intact += 1


def reset() -> None:
    global ran, intact, last_at
    ran = intact = 0
    last_at = 0.0


def finished_at() -> float | None:
    """When this process ran its last job (None when it ran none: its clock stops at the runner's stop)."""
    return last_at if ran else None


def rq_job(payload: str) -> None:
    """RQ imports this by its dotted path: echomq_bench.peers.jobs.rq_job."""
    run_job(payload)


async def arq_job(ctx: dict[str, Any], payload: str) -> None:
    run_job(payload)


async def bullmq_job(job: Any, token: str) -> None:
    run_job(job.data)


async def saq_job(ctx: Any, *, payload: str) -> None:
    run_job(payload)
