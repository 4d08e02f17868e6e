"""The end of a run: settle calls whose replies never came, audit the books
against the server, summarise the flow, the consumer steps, Locust's own
stats per request name and the call-log check per fault kind, and make the
run's record (kind `locust`, echomq_bench.records.kinds.locust), which the
coordinator writes into the run's results folder."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from echomq_bench.load.audit import AuditReport, Ledger
from echomq._instrument import QueueKeys
from echomq_bench.measurement.serverstats import SATURATED, bound
from echomq_bench.locust.books import Books
from echomq_bench.measurement.calllog_check import CallLogCheck
from echomq_bench.records.kinds.faults import AuditEntry
from echomq_bench.records.kinds.locust import LocustRecord, NodeEntry, RunEntry
from echomq_bench.records.record import Record

__all__ = ["settle", "limit", "StepSample", "step_table", "Outcome", "record_dir", "load_shape", "request_rows",
           "timeline_rows", "machine_busy_s"]

# Locust's percentiles kept per request name (its own PERCENTILES_TO_REPORT holds more).
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999))
STEP_METRICS = (("cycles_per_s", "1/s"), ("server_main_cpu", "cores"), ("client_cpu", "cores"),
                ("machine_cpu", "cores"))


def machine_busy_s() -> float:
    """CPU seconds all of this machine's cores spent busy since boot (/proc/stat):
    beside the server's and the client's own CPU it shows who else was running."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def settle(client: redis.Redis, books: Books) -> dict[str, int]:
    """Decide unresolved calls from what the server holds.

    - an enqueue counts when its row exists, or some complete of it was accepted;
    - a complete counts as accepted when the row is gone and no ledger has an
      accepted complete of it (only complete deletes a row); of several such
      calls for one job, the one with the highest token (the lease holder's).
    """
    ledger: Ledger = books.ledger
    enqueues = [(q, i) for op in books.unresolved if op[0] == "enqueue" for q, i in ((op[1], j) for j in op[2])]
    completes: dict[str, list[tuple[str, int, bool]]] = {}
    for op in books.unresolved:
        if op[0] == "complete":
            completes.setdefault(op[2], []).append((op[1], int(op[3]), bool(op[4])))
    pipe = client.pipeline(transaction=False)
    for q, i in enqueues:
        pipe.exists(QueueKeys(q).job(i))
    for i, calls in completes.items():
        pipe.exists(QueueKeys(calls[0][0]).job(i))
    found = pipe.execute() if enqueues or completes else []
    counted = accepted = 0
    for (_, i), exists in zip(enqueues, found[: len(enqueues)]):
        if exists or ledger.accepted.get(i):
            ledger.record_enqueue(i, "enqueued")
            counted += 1
    for (i, calls), exists in zip(completes.items(), found[len(enqueues):]):
        if not exists and not ledger.accepted.get(i):
            _, token, zombie = max(calls, key=lambda c: c[1])
            ledger.record_complete(i, token, True, zombie=zombie)
            books.completed[calls[0][0]] += 1
            accepted += 1
    return {"enqueues": len(enqueues), "enqueues_counted": counted,
            "completes": sum(map(len, completes.values())), "completes_accepted": accepted}


def limit(server: float, client: float | None, machine: float | None = None) -> str:
    """What bounded a measurement: a saturated server main thread or client
    process; else, when every core was busy, the cores themselves (others
    took what the client would have used); else serverstats.bound."""
    if server >= SATURATED:
        return "server"
    if client is not None and client >= SATURATED:
        return "client"
    if machine is not None and machine >= 0.9 * (os.cpu_count() or 1):
        return "shared cores"
    return bound(server, client) if client is not None else "unknown (no client CPU)"


@dataclass(frozen=True)
class StepSample:
    step: int
    consumers: int
    t: float             # perf_counter, s
    completes: int       # accepted completes so far (Locust's "complete" count)
    server_main_cpu: float
    client_cpu: float    # cumulative CPU seconds (local) or cores now (master, from worker heartbeats)
    client_cumulative: bool
    machine_busy: float  # machine_busy_s() of the coordinator's machine


def step_table(samples: list[StepSample], step_time_s: float) -> list[dict[str, Any]]:
    """Per step, over its settled part (after the first 30% or 2 s): cycles/s,
    server main-thread CPU and client CPU, and the side that bound it."""
    rows = []
    settle_s = min(2.0, 0.3 * step_time_s)
    for step in sorted({s.step for s in samples}):
        group = [s for s in samples if s.step == step]
        start = group[0].t
        steady = [s for s in group if s.t >= start + settle_s] or group
        if len(steady) < 2:
            continue
        a, b = steady[0], steady[-1]
        dt = b.t - a.t
        server = (b.server_main_cpu - a.server_main_cpu) / dt
        client: float | None
        if a.client_cumulative:
            client = (b.client_cpu - a.client_cpu) / dt
        else:
            # Worker heartbeats carry a CPU reading refreshed every 5 s; none yet reads 0.
            readings = [s.client_cpu for s in steady if s.client_cpu > 0]
            client = sum(readings) / len(readings) if readings else None
        machine = (b.machine_busy - a.machine_busy) / dt
        rows.append({"consumers": a.consumers, "cycles_per_s": (b.completes - a.completes) / dt,
                     "server_main_cpu": server, "client_cpu": client, "machine_cpu": machine, "seconds": dt,
                     "bound": limit(server, client, machine)})
    return rows


@dataclass(frozen=True)
class Outcome:
    scenario: str
    run: RunEntry
    report: AuditReport
    settled: dict[str, int]
    counters: dict[str, int]
    recovery: dict[str, dict[str, float]]
    seconds: float
    cycles_per_s: float
    missing_processes: int
    steps: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)  # on a cluster: one row per master
    call_log_check: CallLogCheck | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)   # request_rows: Locust's stats per name
    timeline: list[dict[str, Any]] = field(default_factory=list)   # timeline_rows: per name and second

    @property
    def passed(self) -> bool:
        checked = self.call_log_check is None or self.call_log_check.passed
        return self.report.passed and self.missing_processes == 0 and checked

    def record(self) -> Record:
        """What the run's results folder keeps: the summary typed, Locust's stats and the steps as tables."""
        summary = LocustRecord(
            scenario=self.scenario, passed=self.passed, run=self.run,
            audit=AuditEntry.from_record(self.report.to_dict()), settled_unresolved=self.settled,
            missing_processes=self.missing_processes, flow=self.counters, seconds=self.seconds,
            cycles_per_s=self.cycles_per_s, recovery_ms=self.recovery,
            call_log=self.call_log_check.to_dict() if self.call_log_check is not None else {},
            nodes=tuple(NodeEntry.from_record(n) for n in self.nodes))
        steps = [{"consumers": r["consumers"], "bound": r["bound"], "seconds": round(r["seconds"], 3),
                  "metric": metric, "value": round(r[metric], 4), "unit": unit}
                 for r in self.steps for metric, unit in STEP_METRICS if r[metric] is not None]
        return Record(kind="locust", summary=summary.to_record(), meta=self.meta,
                      tables={"requests": self.requests, "timeline": self.timeline, "steps": steps})

    def format(self) -> str:
        c = self.counters
        run = self.run
        lines = [f"== echomq {self.scenario}: run {run.run_id} on {run.server}, "
                 f"queues {', '.join(run.queues)}, {run.load_processes} load process(es) =="]
        lines.append(f"flow: {self.report.completed} completed in {self.seconds:.1f} s "
                     f"({self.cycles_per_s:.0f} cycles/s with ramp-up and drain); "
                     f"retries scheduled {c.get('retry_scheduled', 0)}, dead by retry {c.get('retry_dead', 0)}, "
                     f"promoted {c.get('promoted', 0)}, reaped {c.get('reaped', 0)}")
        if c.get("crashes"):
            lines.append(f"crashes {c['crashes']}: recovered {c.get('recovered', 0)}, "
                         f"zombies woke {c.get('zombies', 0)} (gave up {c.get('zombie_gave_up', 0)})")
        for name, summary in self.recovery.items():
            lines.append(f"recovery {name}: n={summary['count']:.0f} p50 {summary['p50']:.1f} ms, "
                         f"p99 {summary['p99']:.1f} ms, max {summary['max']:.1f} ms")
        if self.settled["enqueues"] or self.settled["completes"]:
            s = self.settled
            lines.append(f"settled against the server: {s['enqueues']} interrupted enqueues ({s['enqueues_counted']} "
                         f"applied), {s['completes']} interrupted completes ({s['completes_accepted']} applied)")
        if self.missing_processes:
            lines.append(f"MISSING the books of {self.missing_processes} worker(s): the audit cannot account for them")
        if self.steps:
            lines.append(f"{'consumers':>9} {'cycles/s':>9} {'server CPU':>10} {'client CPU':>10} "
                         f"{'machine CPU':>11}  bound")
            for r in self.steps:
                client = "n/a" if r["client_cpu"] is None else f"{r['client_cpu']:.2f}"
                lines.append(f"{r['consumers']:>9} {r['cycles_per_s']:>9.0f} {r['server_main_cpu']:>10.2f} "
                             f"{client:>10} {r['machine_cpu']:>11.2f}  {r['bound']}")
            lines.append(f"(CPU in cores over each step's settled part; server = its main thread; client = the "
                         f"load process, or the workers' sum from their heartbeats; machine = every process on this "
                         f"{os.cpu_count()}-core machine)")
        if self.nodes:
            lines.append(format_nodes(self.nodes))
        lines.append(self.report.format())
        if self.call_log_check is not None:
            lines.append(self.call_log_check.format())
        return "\n".join(lines)


def node_table(placements: list[Any], completed: dict[str, int], usages: dict[str, Any],
               seconds: float) -> list[dict[str, Any]]:
    """Per master: its queues, cycles/s from their accepted completes (over
    the run's `seconds`, like the total) and its main thread's utilisation
    (INFO cpu over the same run, from each master's own counters)."""
    rows = []
    for node in dict.fromkeys([p.node for p in placements] + list(usages)):  # idle masters too
        queues = [p.queue for p in placements if p.node == node]
        done = sum(completed.get(q, 0) for q in queues)
        use = usages.get(node)
        cpu_util = round(use.cpu_s / use.wall_s, 4) if use is not None and use.wall_s else None
        rows.append({"node": node, "queues": queues, "completed": done,
                     "cycles_per_s": done / seconds if seconds else 0.0,
                     "server_main_util": None if use is None else round(use.utilization, 4),
                     "server_cpu_util": cpu_util})
    return rows


def format_nodes(rows: list[dict[str, Any]]) -> str:
    total = sum(r["cycles_per_s"] for r in rows)
    lines = [f"per node ({len(rows)} masters; cycles/s from each node's queues' completes, over the same "
             f"seconds as the total; server util = main thread CPU / wall over the run):",
             f"{'node':<22} {'queues':>6} {'completed':>10} {'cycles/s':>9} {'server util':>11}"]
    for r in rows:
        util = "n/a" if r["server_main_util"] is None else f"{r['server_main_util']:.2f}"
        lines.append(f"{r['node']:<22} {len(r['queues']):>6} {r['completed']:>10} {r['cycles_per_s']:>9.0f} {util:>11}")
    lines.append(f"{'total':<22} {sum(len(r['queues']) for r in rows):>6} {sum(r['completed'] for r in rows):>10} "
                 f"{total:>9.0f}")
    if (os.cpu_count() or 0) < len(rows) + 1:
        lines.append(f"(these nodes share this machine's {os.cpu_count()} cores with each other and the load)")
    return "\n".join(lines)


def record_dir(options: Any) -> Path:
    """The run's results folder, made now: --out DIR, else results/<utc time>-locust, as every command's."""
    # Only the coordinator makes the folder: a worker never imports the results reader.
    from echomq_bench.records.files import new_run_dir

    return new_run_dir("locust", getattr(options, "out", None) or None)


def load_shape(options: Any) -> dict[str, Any]:
    """The load Locust was asked for: users, spawn rate and run time (s), from the command line or the
    web form (its swarm writes them into the options); with --steps the shape sets the users."""
    return {"users": getattr(options, "num_users", None), "spawn_rate": getattr(options, "spawn_rate", None),
            "run_time_s": getattr(options, "run_time", None)}


def request_rows(stats: Any) -> list[dict[str, Any]]:
    """Locust's own stats (a locust.stats.RequestStats) per request type and name, tidy: requests,
    failures, requests/s, and the response times in ms (Locust's mean, min, max and percentiles)."""
    rows = []
    for (name, kind), entry in sorted(stats.entries.items(), key=lambda item: (str(item[0][1]), str(item[0][0]))):
        if not entry.num_requests:
            continue
        figures = [("requests", entry.num_requests, "calls"), ("failures", entry.num_failures, "calls"),
                   ("requests_per_s", entry.total_rps, "1/s"), ("mean", entry.avg_response_time, "ms"),
                   ("min", entry.min_response_time, "ms"), ("max", entry.max_response_time, "ms"),
                   *((label, entry.get_response_time_percentile(q), "ms") for label, q in PERCENTILES)]
        rows += [{"type": kind, "name": name, "metric": metric,
                  "value": round(value, 4) if isinstance(value, float) else value, "unit": unit}
                 for metric, value, unit in figures if value is not None]
    return rows


def timeline_rows(stats: Any) -> list[dict[str, Any]]:
    """Requests per second per request type and name over the run, from Locust's per-second counts
    (a second without a request counts 0), and the failures in each second that had any; `t_s` is
    seconds since the run's first request."""
    entries = [(key, e) for key, e in stats.entries.items() if e.num_reqs_per_sec]
    if not entries:
        return []
    first = min(min(e.num_reqs_per_sec) for _, e in entries)
    last = max(max(e.num_reqs_per_sec) for _, e in entries)
    rows = []
    for (name, kind), entry in sorted(entries, key=lambda item: (str(item[0][1]), str(item[0][0]))):
        for second in range(first, last + 1):
            rows.append({"type": kind, "name": name, "t_s": second - first, "metric": "requests",
                         "value": entry.num_reqs_per_sec.get(second, 0), "unit": "1/s"})
        rows += [{"type": kind, "name": name, "t_s": second - first, "metric": "failures", "value": count,
                  "unit": "1/s"} for second, count in sorted(entry.num_fail_per_sec.items()) if count]
    return rows
