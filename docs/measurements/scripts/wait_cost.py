"""What `WAIT 1 <ms>` after an enqueue costs: the price of narrowing the
window in which a failover loses an acknowledged job (docs/scaling.md §5).

    python docs/measurements/scripts/wait_cost.py [--server redis|valkey]... [--rounds 40]
        [--calls 200] [--batch 100] [--timeout-ms 1000] [--out DIR]

Each build runs as a local cluster of one master and one replica (cluster
mode, as in production; one master so that the queue's node is known). One
client on the master's own connection enqueues in four ways, interleaved in
rounds so that the machine's drift hits them alike:

    plain         one enqueue per round trip
    wait          enqueue, then WAIT 1 <ms> as its own call (2 round trips)
    wait-piped    enqueue and WAIT in one pipeline (1 round trip)
    batch         `batch` enqueues in one pipeline, per job
    batch+wait    `batch` enqueues and one WAIT in one pipeline, per job

It prints per-job latency (p50, p99 in µs) and the ratio of each way's
median to its base's (plain, or batch for batch+wait), measured in this one run, with the replica acks WAIT
reported (a 0 means it timed out, and the job was not known to be on the
replica). One sequential client is latency-bound by design: the table gives
the master's main-thread and the client's CPU so the bound is stated.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from echomq_bench.records import meta
from echomq import Queue, mint
from echomq._instrument import QueueKeys, verbs
from echomq_bench.servers import EmbeddedCluster, ServerSpec, parse_server_spec
from echomq_bench.records.files import new_run_dir
from echomq_bench.records.record import Record
from echomq_bench.records.files import write_record
from echomq_bench.measurement.serverstats import sample, usage

MODES = ("plain", "wait", "wait-piped", "batch", "batch+wait")
# What each way is measured against: one job per round trip, or a batch.
BASE = {"plain": "plain", "wait": "plain", "wait-piped": "plain", "batch": "batch", "batch+wait": "batch"}


def cluster_spec(name: str) -> ServerSpec:
    base = parse_server_spec(f"{name}-cluster" if name in ("redis", "valkey") else name)
    if base.kind != "cluster" or base.url is not None:
        raise SystemExit(f"wait_cost: {name!r} is not redis, valkey or a local cluster spec")
    return ServerSpec(name=base.name, kind="cluster", binary=base.binary,
                      args=tuple(base.args) + ("--masters", "1", "--replicas", "1"))


def one_way(mode: str, client, queue: Queue, calls: int, batch: int, timeout_ms: int) -> tuple[list[float], list[int]]:
    """Per-job latency in µs and WAIT's replies, for `calls` jobs."""
    k: QueueKeys = queue.keys
    sha = queue.scripts.sha("enqueue")
    lat, acks = [], []
    if mode.startswith("batch"):
        for _ in range(max(1, calls // batch)):
            pipe = client.pipeline(transaction=False)
            for _ in range(batch):
                job = mint()
                pipe.execute_command(*verbs.enqueue(k, job, b"x" * 64).evalsha(sha))
            if mode == "batch+wait":
                pipe.execute_command("WAIT", 1, timeout_ms)
            t0 = time.perf_counter()
            out = pipe.execute()
            lat.append((time.perf_counter() - t0) * 1e6 / batch)
            if mode == "batch+wait":
                acks.append(int(out[-1]))
        return lat, acks
    for _ in range(calls):
        job = mint()
        t0 = time.perf_counter()
        if mode == "plain":
            client.execute_command(*verbs.enqueue(k, job, b"x" * 64).evalsha(sha))
        elif mode == "wait":
            client.execute_command(*verbs.enqueue(k, job, b"x" * 64).evalsha(sha))
            acks.append(int(client.execute_command("WAIT", 1, timeout_ms)))
        else:
            pipe = client.pipeline(transaction=False)
            pipe.execute_command(*verbs.enqueue(k, job, b"x" * 64).evalsha(sha))
            pipe.execute_command("WAIT", 1, timeout_ms)
            acks.append(int(pipe.execute()[-1]))
        lat.append((time.perf_counter() - t0) * 1e6)
    return lat, acks


def run_build(name: str, args: argparse.Namespace, rows: list[dict], say) -> dict:
    rng = np.random.default_rng(args.seed)
    with EmbeddedCluster(cluster_spec(name)) as cluster:
        master = cluster.masters()[0]
        client = master.client()
        queue = Queue(client, "waitq")
        version = cluster.version()
        lat: dict[str, list[float]] = {m: [] for m in MODES}
        acks: dict[str, list[int]] = {m: [] for m in MODES}
        round_medians: dict[str, list[float]] = {m: [] for m in MODES}
        one_way("plain", client, queue, 50, args.batch, args.timeout_ms)  # warm-up
        before, cpu0 = sample(client), time.process_time()
        for r in range(args.rounds):
            for mode in rng.permutation(MODES):
                got, replies = one_way(str(mode), client, queue, args.calls, args.batch, args.timeout_ms)
                lat[str(mode)] += got
                acks[str(mode)] += replies
                round_medians[str(mode)].append(statistics.median(got))
            say(f"\r{name}: round {r + 1}/{args.rounds}")
        used = usage(before, sample(client))
        client_util = (time.process_time() - cpu0) / used.wall_s
        say("\n")
    out = {"build": name, "version": version, "server_utilization": used.utilization,
           "client_utilization": client_util, "modes": {}}
    for mode in MODES:
        a = np.array(lat[mode])
        ratio = statistics.median(m / p for m, p in zip(round_medians[mode], round_medians[BASE[mode]]))
        timed_out = sum(1 for x in acks[mode] if x < 1)
        out["modes"][mode] = {"p50_us": float(np.percentile(a, 50)), "p99_us": float(np.percentile(a, 99)),
                              "base": BASE[mode], "ratio_to_base": ratio,
                              "jobs": len(a) * (args.batch if mode.startswith("batch") else 1),
                              "wait_calls": len(acks[mode]), "wait_timeouts": timed_out}
        for metric, value, unit in (("p50", out["modes"][mode]["p50_us"], "us"),
                                    ("p99", out["modes"][mode]["p99_us"], "us"),
                                    ("ratio_to_base", ratio, "ratio"), ("wait_timeouts", timed_out, "count")):
            rows.append({"build": name, "version": version, "mode": mode, "metric": metric, "value": value,
                         "unit": unit})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", action="append", help="redis, valkey (default both) or a local cluster spec")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--calls", type=int, default=200, help="jobs per way per round")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--timeout-ms", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    for name, value, lo in (("--rounds", args.rounds, 1), ("--calls", args.calls, 1), ("--batch", args.batch, 1),
                            ("--timeout-ms", args.timeout_ms, 1)):
        if value < lo:
            p.error(f"{name} must be at least {lo}, got {value}")
    if args.calls < args.batch:
        p.error(f"--calls ({args.calls}) must be at least --batch ({args.batch})")
    say = lambda text: (sys.stderr.write(text), sys.stderr.flush())  # noqa: E731
    rows: list[dict] = []
    builds = [run_build(name, args, rows, say) for name in (args.server or ["redis", "valkey"])]
    out = new_run_dir("wait-cost", args.out)
    write_record(out, Record(kind="wait-cost", summary={"builds": builds}, tables={"wait_cost": rows},
                             meta=meta.collect(argv=sys.argv, **vars(args) | {"out": str(out)})))
    print(f"WAIT 1 {args.timeout_ms} after enqueue: one client, 1 master + 1 replica in cluster mode, "
          f"{args.rounds} interleaved rounds x {args.calls} jobs per way; latency per job")
    print(f"{'build':<14} {'way':<11} {'p50 µs':>8} {'p99 µs':>8} {'x base':>13} {'WAIT timeouts':>14}")
    for b in builds:
        for mode, m in b["modes"].items():
            waits = f"{m['wait_timeouts']}/{m['wait_calls']}" if m["wait_calls"] else "-"
            print(f"{b['version']:<14} {mode:<11} {m['p50_us']:>8.0f} {m['p99_us']:>8.0f} "
                  f"{m['ratio_to_base']:>6.2f} {m['base']:<6} {waits:>14}")
        print(f"{'':<14} bound: neither saturated (one sequential client): master main thread "
              f"{b['server_utilization']:.0%} busy, client {b['client_utilization']:.0%} of a core")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
