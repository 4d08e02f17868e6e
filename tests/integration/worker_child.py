"""A Worker in a process of its own, for the tests that kill or signal it.

    python -m tests.integration.worker_child '{"url": ..., "queue": ..., "log": ..., ...}'

It appends one line per event to the log file, each with one write on an
O_APPEND descriptor, so a SIGKILL never leaves half a line:
`ran ID TOKEN` when the handler starts on a job, `stall ID` when the
handler starts the job it will never finish (the `stall_after`-th), and
`OUTCOME ID TOKEN` when the job's round is settled.
"""

from __future__ import annotations

import json
import os
import sys
import time

import redis

from echomq import Job, Queue, Worker, WorkerSettings


def main() -> int:
    config = json.loads(sys.argv[1])
    fd = os.open(config["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    calls = 0

    def write(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    def handle(job: Job) -> None:
        nonlocal calls
        calls += 1
        write(f"ran {job.id} {job.token}")
        if calls == config.get("stall_after"):
            write(f"stall {job.id}")
            time.sleep(3600)
        time.sleep(config.get("slow_ms", 0) / 1000.0)

    queue = Queue(redis.Redis.from_url(config["url"]), config["queue"])
    settings = WorkerSettings(batch=config["batch"], lease_ms=config["lease_ms"], pumps=False)
    worker = Worker(queue, handle, settings, on_settled=lambda job, outcome: write(f"{outcome} {job.id} {job.token}"))
    write("ready")
    worker.run()
    write("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
