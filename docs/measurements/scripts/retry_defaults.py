"""What redis-py's default retry does to a queue worker, against a client
that never resends (`Retry(NoBackoff(), 0)`).

    python docs/measurements/scripts/retry_defaults.py [--server redis|valkey]... [--tries 3]

1. The server is paused (SIGSTOP) for 1 s while a `complete` is in flight
   under a 0.3 s socket timeout. The default client resends after the
   timeout; the first send had landed, so the resend is refused as stale.
   Printed: what `complete` returned, after how long, and whether the
   complete had landed on the server.
2. A wrong password: how long each client takes to fail.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq import Queue, mint
from echomq_bench.servers import start

PAUSE_S = 1.0
TIMEOUT_S = 0.3


def _no_resend() -> dict[str, Any]:
    return {"retry": Retry(NoBackoff(), 0)}


def paused_complete(server: Any, resend: bool) -> str:
    admin = server.client()
    client = redis.Redis(host=server.host, port=server.port, socket_timeout=TIMEOUT_S,
                         **({} if resend else _no_resend()))
    q = Queue(client, "pause" + mint()[-6:])
    job_id = mint()
    q.enqueue(job_id, b"x")
    job = q.claim(60_000)
    assert job is not None
    os.kill(server.pid, signal.SIGSTOP)
    threading.Timer(PAUSE_S, os.kill, (server.pid, signal.SIGCONT)).start()
    t0 = time.perf_counter()
    try:
        got = repr(q.complete(job.id, job.token))
    except Exception as exc:  # the point is to show which error each client raises
        got = type(exc).__name__
    took = time.perf_counter() - t0
    time.sleep(PAUSE_S + 0.2)
    landed = not admin.exists(q.keys.job(job_id)) and admin.zscore(q.keys.active, job_id) is None
    who = "default retry " if resend else "no resend     "
    return f"{who} complete -> {got} after {took:.2f} s; the complete landed: {landed}"


def wrong_password(spec: str, tries: int) -> list[str]:
    server = start(f"{spec}={spec}-server --requirepass right-one")
    lines = []
    try:
        for resend in (True, False):
            for _ in range(tries):
                client = redis.Redis(host=server.host, port=server.port, password="wrong-one",
                                     **({} if resend else _no_resend()))
                t0 = time.perf_counter()
                try:
                    client.ping()
                    got = "no error"
                except Exception as exc:
                    got = type(exc).__name__
                took = time.perf_counter() - t0
                lines.append(f"{'default retry ' if resend else 'no resend     '} wrong password -> {got} "
                             f"after {took * 1000:,.1f} ms")
    finally:
        server.stop()
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", action="append", choices=("redis", "valkey"), help="default both")
    p.add_argument("--tries", type=int, default=3)
    args = p.parse_args(argv)
    if args.tries < 1:
        p.error("--tries must be >= 1")
    for spec in args.server or ["redis", "valkey"]:
        server = start(spec)
        try:
            print(f"== {server.version()}")
            for resend in (True, False):
                print(paused_complete(server, resend))
        finally:
            server.stop()
        for line in wrong_password(spec, args.tries):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
