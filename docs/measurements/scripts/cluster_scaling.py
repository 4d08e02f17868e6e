"""One node against three: a pipelined job cycle per queue on a 1-master and
a 3-master cluster of the same build.

    python docs/measurements/scripts/cluster_scaling.py [--server redis|valkey]... [--queues 3]
        [--seconds 4] [--trials 3] [--batch 100] [--out DIR]

Both clusters run side by side (cluster mode on both, so the only
difference is the node count). The same Q queues' worth of load runs on
each: Q worker processes, one per queue, each talking straight to the
master that owns its queue, in rounds of one pipeline of `batch` enqueues +
`batch` claims and one pipeline of `batch` completes. A cycle is one job
enqueued, claimed and completed. Queue names come from
`echomq_bench.servers.spread_queues`, so on three masters each master gets Q/3.

"others" is the machine's busy CPU minus what our nodes and workers used:
other tenants of a shared machine. Trials interleave 1-node and 3-node runs (ABBA...) so the drift of a shared
machine hits both alike. Per node it reports cycles/s and the main thread's
utilisation (INFO cpu, the server's own accounting); per run the workers'
CPU and the machine's, so the table says which side was the limit. On a
two-core machine every node and every worker share the same two cores: the
3-node figure is a floor for three machines, not a forecast.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from typing import Any

import redis

from echomq import Queue, mint
from echomq._instrument import QueueKeys, verbs
from echomq_bench.records import meta
from echomq_bench.servers import (EmbeddedCluster, format_placements, master_clients, parse_server_spec,
                                   spread_queues, start)
from echomq_bench.load.bulk import drop_queue
from echomq_bench.records.files import new_run_dir
from echomq_bench.records.record import Record
from echomq_bench.records.files import write_record
from echomq_bench.measurement.serverstats import sample, usage

WARMUP_S = 0.5
CLEAN_OTHERS = 0.15  # cores used by other tenants below which a run counts as clean
LEASE_MS = 60_000


def worker(host: str, port: int, name: str, shas: dict[str, str], batch: int, seconds: float,
           go: Any, out: Any) -> None:
    r = redis.Redis(host=host, port=port)
    k = QueueKeys(name)
    go.wait()
    warm_until = time.perf_counter() + WARMUP_S
    t0 = c0 = 0.0
    measuring = False
    cycles = 0
    while True:
        now = time.perf_counter()
        if not measuring and now >= warm_until:
            measuring, t0, c0, cycles = True, now, time.process_time(), 0
        if measuring and now >= t0 + seconds:
            break
        pipe = r.pipeline(transaction=False)
        for job_id in [mint() for _ in range(batch)]:
            pipe.execute_command(*verbs.enqueue(k, job_id, b"x").evalsha(shas["enqueue"]))
        for _ in range(batch):
            pipe.execute_command(*verbs.claim(k, LEASE_MS).evalsha(shas["claim"]))
        claimed = pipe.execute()[batch:]
        for job_id, _payload, token in claimed:
            pipe.execute_command(*verbs.complete(k, job_id.decode(), token).evalsha(shas["complete"]))
        cycles += sum(1 for reply in pipe.execute() if reply == b"ok")
    out.put((name, cycles, time.perf_counter() - t0, time.process_time() - c0))


def machine_cpu_s() -> float:
    """Busy CPU seconds of the whole machine (all cores), from /proc/stat."""
    fields = open("/proc/stat").readline().split()[1:]
    values = [int(v) for v in fields]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(limit_s: float, busy_cores: float = 0.3) -> float:
    """Wait (up to limit_s) for a second in which the machine is nearly idle:
    other tenants' work would land in the figures. Returns the last reading."""
    deadline = time.monotonic() + limit_s
    while True:
        cpu0, t0 = machine_cpu_s(), time.perf_counter()
        time.sleep(1.0)
        busy = (machine_cpu_s() - cpu0) / (time.perf_counter() - t0)
        if busy < busy_cores or time.monotonic() > deadline:
            return busy


def measure(cluster: EmbeddedCluster, names: list[str], batch: int, seconds: float) -> dict[str, Any]:
    client = cluster.client()
    shas = {verb: Queue(client, names[0]).scripts.sha(verb) for verb in ("enqueue", "claim", "complete")}
    owners = {name: client.get_node_from_key(QueueKeys(name).pending) for name in names}
    masters = master_clients(cluster)
    ctx = mp.get_context("fork")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(owners[n].host, owners[n].port, n, shas, batch, seconds, go, out))
             for n in names]
    for p in procs:
        p.start()
    go.set()
    time.sleep(WARMUP_S)
    before = {addr: sample(c) for addr, c in masters.items()}
    cpu0, wall0 = machine_cpu_s(), time.perf_counter()
    time.sleep(seconds)
    after = {addr: sample(c) for addr, c in masters.items()}
    machine = (machine_cpu_s() - cpu0) / (time.perf_counter() - wall0)
    results = [out.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join()
    per_node: dict[str, dict[str, float]] = {}
    for addr in masters:
        u = usage(before[addr], after[addr])
        per_node[addr] = {"cycles_per_s": 0.0, "server_util": u.utilization,
                          "server_cpu": u.cpu_s / u.wall_s if u.wall_s else 0.0, "queues": 0}
    client_util = []
    for name, cycles, wall, cpu in results:
        node = per_node[owners[name].name]
        node["cycles_per_s"] += cycles / wall
        node["queues"] += 1
        client_util.append(cpu / wall)
    for name in names:  # leave the queues empty for the next trial
        drop_queue(client, name, sweep=True)
    ours = sum(n["server_cpu"] for n in per_node.values()) + sum(client_util)
    return {"per_node": per_node, "total": sum(n["cycles_per_s"] for n in per_node.values()),
            "client_util": client_util, "machine_util": machine, "others_util": max(0.0, machine - ours)}


def bound_of(run: dict[str, Any]) -> str:
    """Which side held the run back."""
    cores = os.cpu_count() or 1
    busiest = max(n["server_util"] for n in run["per_node"].values())
    if run["machine_util"] >= 0.9 * cores:
        return f"machine ({cores} cores busy)"
    if busiest >= 0.85:
        return "server main thread"
    if max(run["client_util"]) >= 0.85:
        return "client"
    return "round trips (nothing saturated)"


def _parse(argv: list[str] | None) -> argparse.Namespace | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", choices=["redis", "valkey"],
                        help="build (repeatable; default both)")
    parser.add_argument("--queues", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--quiet-wait", type=float, default=30.0,
                        help="seconds to wait for an idle machine before each run (default 30)")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if not (1 <= args.queues <= 64 and 0.5 <= args.seconds <= 120 and 1 <= args.trials <= 50
            and 1 <= args.batch <= 10_000):
        print("error: --queues 1..64, --seconds 0.5..120, --trials 1..50, --batch 1..10000", file=sys.stderr)
        return None
    return args


def _run_rows(build: str, version: str, nodes: int, args: argparse.Namespace, trial: int,
              idle_before: float, run: dict[str, Any]) -> list[dict[str, Any]]:
    """One run's tidy rows: the totals, then a pair per node."""
    common = {"build": build, "version": version, "nodes": nodes, "queues": args.queues, "batch": args.batch,
              "trial": trial + 1}
    rows = [{**common, "node": "all", "metric": m, "value": v, "unit": u} for m, v, u in (
        ("cycles_per_s", run["total"], "1/s"),
        ("machine_cpu_before", idle_before, "cores"),
        ("machine_cpu", run["machine_util"], "cores"),
        ("other_processes_cpu", run["others_util"], "cores"),
        ("client_util_mean", statistics.mean(run["client_util"]), "cores"))]
    for addr, v in run["per_node"].items():
        rows.append({**common, "node": addr, "metric": "cycles_per_s", "value": v["cycles_per_s"], "unit": "1/s"})
        rows.append({**common, "node": addr, "metric": "server_main_util", "value": v["server_util"], "unit": "cores"})
    return rows


def _print_run(build: str, nodes: int, trial: int, run: dict[str, Any]) -> None:
    per = ", ".join(f"{v['cycles_per_s']:.0f} @ {v['server_util']:.2f}" for v in run["per_node"].values())
    print(f"{build:<14} {nodes:>5} {trial + 1:>5} {run['total']:>9.0f}  {per:<44}"
          f"  {statistics.mean(run['client_util']):>11.2f}  {run['machine_util']:>7.2f}"
          f"  {run['others_util']:>6.2f}  {bound_of(run)}", flush=True)


def _queue_names(clusters: dict[int, Any], queues: int) -> dict[int, list[str]]:
    names = {}
    for nodes, cluster in clusters.items():
        assert isinstance(cluster, EmbeddedCluster)
        placed = spread_queues(cluster, queues, prefix="scale")
        names[nodes] = [p.queue for p in placed]
        print(f"# {cluster.name}: {cluster.version()}\n" +
              "\n".join("# " + line for line in format_placements(placed).splitlines()), file=sys.stderr)
    return names


def _summarise(build: str, totals: dict[int, list[float]], others: dict[int, list[float]]) -> dict[str, Any]:
    clean = {n: [t for t, o in zip(totals[n], others[n]) if o < CLEAN_OTHERS] for n in (1, 3)}
    ratios = [b / a for a, b in zip(totals[1], totals[3])]
    print(f"{build}: 3 nodes / 1 node = {statistics.median(ratios):.2f}x "
          f"(per trial {min(ratios):.2f}..{max(ratios):.2f}); the nodes share {os.cpu_count()} cores")
    if clean[1] and clean[3]:
        print(f"{build}: runs with others < {CLEAN_OTHERS} cores: 1 node {statistics.median(clean[1]):.0f} "
              f"({len(clean[1])} runs), 3 nodes {statistics.median(clean[3]):.0f} ({len(clean[3])} runs), "
              f"ratio of medians {statistics.median(clean[3]) / statistics.median(clean[1]):.2f}x")
    return {"one_node_median": statistics.median(totals[1]),
            "three_node_median": statistics.median(totals[3]),
            "ratio_median": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
            "clean_runs": {str(n): clean[n] for n in (1, 3)},
            "clean_ratio_of_medians": (statistics.median(clean[3]) / statistics.median(clean[1])
                                       if clean[1] and clean[3] else None)}


def _one_build(build: str, args: argparse.Namespace, rows: list[dict[str, Any]],
               started: list[dict[str, Any]]) -> dict[str, Any]:
    """Both cluster sizes of one build, trials alternating which goes first."""
    clusters = {nodes: start(parse_server_spec(f"{build}-{nodes}node={build}-cluster --masters {nodes}"))
                for nodes in (1, 3)}
    started.extend(meta.describe_server(c) for c in clusters.values())
    try:
        names = _queue_names(clusters, args.queues)
        totals: dict[int, list[float]] = {1: [], 3: []}
        others: dict[int, list[float]] = {1: [], 3: []}
        for trial in range(args.trials):
            for nodes in ((1, 3) if trial % 2 == 0 else (3, 1)):
                idle_before = wait_for_quiet(args.quiet_wait)
                run = measure(clusters[nodes], names[nodes], args.batch, args.seconds)  # type: ignore[arg-type]
                totals[nodes].append(run["total"])
                others[nodes].append(run["others_util"])
                _print_run(build, nodes, trial, run)
                rows.extend(_run_rows(build, clusters[nodes].version(), nodes, args, trial, idle_before, run))
        return _summarise(build, totals, others)
    finally:
        for cluster in clusters.values():
            cluster.stop()


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args is None:
        return 2
    rows: list[dict[str, Any]] = []
    started: list[dict[str, Any]] = []
    print(f"{'build':<14} {'nodes':>5} {'trial':>5} {'cycles/s':>9}  per node cycles/s @ server main-thread util"
          f"  {'client util':>11}  {'machine':>7}  {'others':>6}  bound")
    summary = {build: _one_build(build, args, rows, started) for build in (args.server or ["redis", "valkey"])}
    out = new_run_dir("cluster-scaling", args.out)
    context = meta.collect([], queues=args.queues, seconds=args.seconds, trials=args.trials, batch=args.batch)
    context["servers"] = started  # described while they ran
    write_record(out, Record(kind="cluster-scaling", summary=summary, meta=context,
                             tables={"cluster_scaling": rows}))
    print(f"results: {out}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
