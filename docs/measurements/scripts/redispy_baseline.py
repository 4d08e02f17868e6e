"""Why the capacity driver writes its own RESP: how busy one plain redis-py
pipeline keeps the server on the same claim/complete cycle.

    python docs/measurements/scripts/redispy_baseline.py [--server redis|valkey]... [--seconds 5] [--batch 64]

One process, server main thread pinned to the first core and this client
to the second (as the capacity driver pins). Each round pipelines `batch`
claims, then the completes of what they got. It prints cycles/s, the
server main thread's busy share (INFO cpu) and this client's CPU: the
client is the bottleneck when the server is well under 85% busy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from echomq import Queue, mint
from echomq._instrument import verbs
from echomq_bench.servers import start
from echomq_bench.measurement.serverstats import process_cpu_s, sample, usage

BACKLOG = 300_000


def measure(spec: str, seconds: float, batch: int) -> str:
    server = start(spec)
    try:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2:
            os.sched_setaffinity(server.pid, {cpus[0]})
            os.sched_setaffinity(0, {cpus[1]})
        client = server.client()
        q = Queue(client, "baseline")
        k = q.keys
        enqueue, claim, complete = (q.scripts.sha(v) for v in ("enqueue", "claim", "complete"))
        pipe = client.pipeline(transaction=False)
        for i in range(BACKLOG):
            job = mint()
            pipe.execute_command(*verbs.enqueue(k, job, b"x" * 64).evalsha(enqueue))
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()

        def round_() -> int:
            for _ in range(batch):
                pipe.execute_command(*verbs.claim(k, 60_000).evalsha(claim))
            got = [r for r in pipe.execute() if r]
            for job, _payload, token in got:
                pipe.execute_command(*verbs.complete(k, job.decode(), token).evalsha(complete))
            pipe.execute()
            return len(got)

        warm = time.perf_counter() + 1.0
        while time.perf_counter() < warm:
            round_()
        before, cpu0, cycles = sample(client), process_cpu_s(), 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            cycles += round_()
        use, cpu = usage(before, sample(client)), process_cpu_s() - cpu0
        if cycles == 0:
            raise SystemExit(f"{spec}: the backlog of {BACKLOG:,} ran dry; shorten --seconds")
        return (f"{server.version()}: redis-py pipeline ({batch} claims, then their completes), one process: "
                f"{cycles / use.wall_s:,.0f} cycles/s, server main thread {use.utilization:.0%} busy, "
                f"client {cpu / use.wall_s:.0%} of a core")
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", action="append", help="redis, valkey (default both) or any SPEC")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args(argv)
    if not args.seconds > 0 or args.batch < 1:
        p.error("--seconds must be > 0 and --batch >= 1")
    for spec in args.server or ["redis", "valkey"]:
        print(measure(spec, args.seconds, args.batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
