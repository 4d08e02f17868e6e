"""How many claim/complete cycles/s does one Locust process drive? Beside
plain gevent + redis-py doing the same work, on the same server, in one run.

    python docs/measurements/scripts/locust_rate.py [--server SPEC] [--users 50] [--seconds 10] [--rounds 2]

Every client runs in its own process against one server: 50 consumer
greenlets claim and complete back to back (no work time), 2 producer
greenlets keep 2,000 jobs pending with pipelined enqueues of 50. The clients:

    redis-py Redis.evalsha    one Redis(single_connection_client=True) per greenlet
    redis-py Connection       one held Connection per greenlet, send_command/read_response
                              (the path the Locust user takes)
    Locust --worker           scenarios/claim_complete.py, one worker process under a master
    Locust local              scenarios/claim_complete.py, one local-runner process

Cycles are counted by the server: DEL calls (only complete deletes a row;
commandstats counts the calls scripts make), over a window that starts
after a warm-up. Server main-thread CPU (INFO cpu) and the client process's
CPU (/proc) are taken over the same window, so the table says which side
was the limit; "others CPU" is what the rest of the machine took meanwhile (on
a shared machine a client below one core was waiting for a core). Rounds
interleave the clients in rotating order; the figure is the median round,
the range min..max. Target: Locust >= 4,000 cycles/s.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--child":
    from gevent import monkey

    monkey.patch_all()

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]  # the checkout: docs/measurements/scripts/ is three below
sys.path.insert(0, str(ROOT))

from echomq_bench.locust.report import limit, machine_busy_s  # noqa: E402  (no locust import: no monkey-patching here)
from echomq_bench.servers import DEFAULT_SPECS, free_port, parse_server_spec, start  # noqa: E402
from echomq_bench.measurement.serverstats import process_cpu_s, sample, usage  # noqa: E402

LOCUST = Path(sys.executable).with_name("locust")
PRODUCERS, BATCH, BACKLOG, LEASE_MS = 2, 50, 2000, 30_000
TARGET = 4000.0
STARTUP_S = 20.0
CLIENTS = ("redis-py Redis.evalsha", "redis-py Connection", "Locust --worker", "Locust local")


# -- the reference clients (run as a child process) ---------------------------


def child(mode: str, url: str, consumers: int) -> None:
    import gevent
    import redis

    from echomq import mint
    from echomq._instrument import QueueKeys, Scripts, verbs

    scripts = Scripts(redis.Redis.from_url(url))
    k = QueueKeys(f"ref-{os.getpid()}")
    claim = verbs.claim(k, LEASE_MS).evalsha(scripts.sha("claim"))

    def producer() -> None:
        r = redis.Redis.from_url(url, single_connection_client=True)
        payload = os.urandom(64)
        while True:
            deficit = BACKLOG - r.zcard(k.pending)
            if deficit <= 0:
                gevent.sleep(0.005)
                continue
            pipe = r.pipeline(transaction=False)
            for _ in range(min(BATCH, deficit)):
                job = mint()
                pipe.execute_command(*verbs.enqueue(k, job, payload).evalsha(scripts.sha("enqueue")))
            pipe.execute()

    def consumer_client() -> None:
        r = redis.Redis.from_url(url, single_connection_client=True)
        while True:
            reply = r.execute_command(*claim)
            if not reply:
                gevent.sleep(0.005)
                continue
            job, _payload, token = reply
            r.execute_command(*verbs.complete(k, job.decode(), token).evalsha(scripts.sha("complete")))

    def consumer_connection() -> None:
        pool = redis.ConnectionPool.from_url(url)
        conn = pool.connection_class(**pool.connection_kwargs)
        while True:
            conn.send_command(*claim)
            reply = conn.read_response()
            if not reply:
                gevent.sleep(0.005)
                continue
            job, _payload, token = reply
            conn.send_command(*verbs.complete(k, job.decode(), token).evalsha(scripts.sha("complete")))
            conn.read_response()

    consume = consumer_client if mode == "client" else consumer_connection
    greenlets = [gevent.spawn(producer) for _ in range(PRODUCERS)]
    greenlets += [gevent.spawn(consume) for _ in range(consumers)]
    gevent.joinall(greenlets, raise_error=True)


# -- the parent ------------------------------------------------------------


class Launch:
    """The processes of one client; `pid` is the one whose CPU counts."""

    def __init__(self, name: str, url: str, users: int, seconds: float, out: Path) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.out = out
        self.reference = name.startswith("redis-py")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        common = ["-f", str(ROOT / "scenarios" / "claim_complete.py"), "--server", url, "--lease", f"{LEASE_MS}ms",
                  "--producers", str(PRODUCERS), "--batch", str(BATCH), "--backlog", str(BACKLOG),
                  "--only-summary", "--loglevel", "WARNING"]
        log = open(out / "client.log", "wb")
        if self.reference:
            mode = "client" if name.endswith("evalsha") else "connection"
            self._spawn([sys.executable, __file__, "--child", mode, url, str(users)], env, log)
        elif name == "Locust local":
            self._spawn([str(LOCUST), *common, "--headless", "-u", str(users), "-r", str(users),
                         "-t", f"{seconds:.0f}s", "--out", str(out / "record")], env, log)
        else:
            port = free_port()
            master = [str(LOCUST), *common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                      str(port), "--expect-workers", "1", "--headless", "-u", str(users), "-r", str(users),
                      "-t", f"{seconds:.0f}s", "--out", str(out / "record")]
            self._spawn(master, env, log)
            self._spawn([str(LOCUST), "-f", str(ROOT / "scenarios" / "claim_complete.py"), "--worker",
                         "--master-host", "127.0.0.1", "--master-port", str(port), "--loglevel", "WARNING"], env, log)
        self.pid = self.procs[-1].pid  # the worker, the local runner, or the reference child

    def _spawn(self, argv: list[str], env: dict[str, str], log: Any) -> None:
        self.procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.out))

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def finish(self, timeout: float) -> list[int | None]:
        """SIGTERM to the first process: a reference child dies, Locust (local or
        master) shuts down as on Ctrl-C, audit included; a worker follows its master."""
        deadline = time.monotonic() + timeout
        codes: list[int | None] = []
        if self.procs[0].poll() is None:
            self.procs[0].send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            codes.append(p.returncode)
        return codes


def audit_passed(out: Path) -> bool | None:
    import json

    path = out / "record" / "summary.json"  # the run's record (kind locust)
    return json.loads(path.read_text())["passed"] if path.exists() else None


def measure(name: str, server: Any, users: int, warm: float, window: float) -> dict[str, Any]:
    admin = server.client()
    admin.flushall()
    admin.config_resetstat()  # "the first complete" below is the first DEL since here
    with tempfile.TemporaryDirectory(prefix="locust-rate-") as tmp:
        out = Path(os.environ.get("LOCUST_RATE_KEEP") or tmp)
        out.mkdir(parents=True, exist_ok=True)
        run_s = STARTUP_S + warm + window + 30.0  # -t is a safety net: the window ends with SIGTERM
        launch = Launch(name, server.url, users, run_s, out)
        try:
            # The warm-up starts with the first completed job, not at launch:
            # Locust's start (and a worker's connect) takes a varying while.
            started = time.monotonic()
            while sample(admin).commands.get("del", (0, 0))[0] == 0:
                if not launch.alive() or time.monotonic() - started > STARTUP_S:
                    raise RuntimeError(f"{name} did not start:\n{(out / 'client.log').read_text()[-3000:]}")
                time.sleep(0.1)
            time.sleep(warm)
            all_pids = [p.pid for p in launch.procs] + [server.pid]
            s0, c0, m0, a0 = sample(admin), process_cpu_s([launch.pid]), machine_busy_s(), process_cpu_s(all_pids)
            time.sleep(window)
            s1, c1, m1, a1 = sample(admin), process_cpu_s([launch.pid]), machine_busy_s(), process_cpu_s(all_pids)
        finally:
            codes = launch.finish(timeout=120)
        u = usage(s0, s1)
        passed = None if launch.reference else audit_passed(out)
        if not launch.reference and (passed is not True or codes[0] != 0):
            raise RuntimeError(f"{name}: exit codes {codes}, audit passed {passed}:\n"
                               f"{(out / 'client.log').read_text()[-3000:]}")
    return {"client": name, "cycles": u.calls("del") / u.wall_s, "server": u.utilization,
            "client_cpu": (c1 - c0) / u.wall_s,
            "machine": (m1 - m0) / u.wall_s,
            # what the rest of the machine (other users of these cores) took meanwhile
            "others": max(0.0, ((m1 - m0) - (a1 - a0)) / u.wall_s)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="redis", help=f"one SPEC (default redis; also {', '.join(DEFAULT_SPECS)})")
    parser.add_argument("--users", type=int, default=50, help="consumer greenlets / Locust users (default 50)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window per client and round")
    parser.add_argument("--warm", type=float, default=3.0,
                        help="seconds from the first completed job to the window (default 3)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset of: " + ", ".join(CLIENTS))
    args = parser.parse_args()
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    bad = [c for c in clients if c not in CLIENTS]
    if bad or args.users < 1 or args.rounds < 1 or args.seconds <= 0:
        parser.error(f"unknown client(s) {bad}" if bad else "--users, --rounds and --seconds must be positive")
    try:
        spec = parse_server_spec(args.server)
    except ValueError as exc:
        parser.error(str(exc))
    server = start(spec)
    try:
        version = server.version()
        results: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        for r in range(args.rounds):
            order = clients[r % len(clients):] + clients[: r % len(clients)]
            for name in order:
                print(f"round {r + 1}/{args.rounds}: {name} ...", file=sys.stderr, flush=True)
                results[name].append(measure(name, server, args.users, args.warm, args.seconds))
    finally:
        server.stop()
    print(f"{version}; {args.users} consumers, {PRODUCERS} producers (batch {BATCH}, backlog {BACKLOG}), "
          f"no work time; {args.rounds} round(s) of {args.seconds:g} s, {args.warm:g} s after the first complete; "
          f"{os.cpu_count()} cores shared by server and client")
    print(f"{'client':<24} {'cycles/s':>9} {'range':>13} {'server CPU':>10} {'client CPU':>10} "
          f"{'others CPU':>10}  bound")
    median: dict[str, float] = {}
    for name in clients:
        rows = results[name]
        cyc = [x["cycles"] for x in rows]
        median[name] = statistics.median(cyc)
        srv = statistics.median(x["server"] for x in rows)
        cli = statistics.median(x["client_cpu"] for x in rows)
        oth = statistics.median(x["others"] for x in rows)
        mach = statistics.median(x["machine"] for x in rows)
        print(f"{name:<24} {median[name]:>9.0f} {min(cyc):>6.0f}..{max(cyc):<6.0f} {srv:>10.2f} {cli:>10.2f} "
              f"{oth:>10.2f}  {limit(srv, cli, mach)}")
    ref = median.get("redis-py Redis.evalsha")
    for name in clients:
        if name.startswith("Locust"):
            ratio = f", {median[name] / ref:.2f}x the Redis.evalsha reference" if ref else ""
            verdict = "ok" if median[name] >= TARGET else "MISS"
            print(f"{name}: {median[name]:.0f} cycles/s{ratio}; target >= {TARGET:.0f}: {verdict}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(main())
