"""Capacity over a cluster: the driver's workers per master, a row per node.

`run_cluster_capacity(cluster, settings)` names Q queues with
`echomq_bench.servers.cluster.spread_queues` (default: one per master), so that they land
on different masters, and makes each master that got a queue a `Session`
of its own (`echomq_bench.capacity.session`): the scripts loaded on it, its queues'
backlog filled. Each master's `settings.processes` workers connect straight
to that master and send the same raw pipelined EVALSHA as on one server
(`echomq_bench.load.driver`); no command ever meets a MOVED, since every key of a
queue is in its `{q}` slot. One window for all masters; around it the
parent samples each master's INFO cpu and commandstats, as it does for one
server.

Each master's figures are a `CapacityResult` (cycles/s, main-thread
utilisation, µs per cycle); `ClusterCapacityResult` adds them up: total
cycles/s, the driver's utilisation over all its processes, the busiest
node, and `bound` (server when the busiest node's main thread was the
limit, and `bound_node` names it; client otherwise).

What differs from one server:

- no pinning: the nodes of a local cluster and the driver share this
  machine's cores (`cores_note` says how many), so per-node figures are a
  floor for as many machines, not a forecast;
- no ceiling: redis-benchmark sends to one address, and one node's ceiling
  taken while the others sit idle says nothing of them sharing the cores
  (`ceiling_claims_per_s` is None and `ceiling_note` says why);
- `--processes` is per master; an open loop's `--rate` and a given
  `--backlog` are totals, split over the queues (a master gets its queues'
  share);
- accounting, per queue: the completes the driver counted must equal what
  the server completed (jobs filled + enqueues accepted - jobs left in the
  queue's four sets); `accounting_passed` says whether every queue did.
"""

from __future__ import annotations

import os
import secrets
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from echomq_bench.measurement import serverstats
from echomq_bench.capacity.result import CapacityResult, _num, median_rate, write_hgrms
from echomq_bench.capacity.settings import CapacityError, CapacitySettings
from echomq_bench.servers.cluster import Placement, format_placements, spread_queues
from echomq_bench.load.driver import VERBS
from echomq.keys import QueueKeys
from echomq_bench.measurement.latency import Latency
from echomq_bench.servers.embedded import server_version
from echomq_bench.capacity.session import (Session, backlog_size, close_session, collect, drive, fill_sessions, open_session,
                      plans)
from echomq_bench.load.wire import Target

__all__ = ["ClusterCapacityResult", "NodeResult", "run_cluster_capacity", "format_cluster"]

Say = Callable[[str], None]
# Default backlog per master: this share of what one server's default is
# sized for (session.BACKLOG_RATE). Masters sharing two cores each run at
# well under one server's rate; one that runs dry says so.
NODE_SHARE = 0.6
FULL_MACHINE = 0.9   # machine_busy from which the table says the cores, not a node, set the total
CEILING_NOTE = ("not taken on a cluster: redis-benchmark sends every request to one address, and one node's "
                "ceiling taken while the other nodes sit idle says nothing of the nodes sharing the cores")


class _Master:
    """One master, as the session machinery sees a server: name, pid, client(), version()."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.name: str = node.name
        self.pid: int | None = node.pid
        if node.server is not None:
            self.spec = node.server.spec

    def client(self, **kwargs: Any) -> Any:
        return self.node.client(**kwargs)

    def version(self) -> str:
        with self.node.client() as c:
            return server_version(c)

    def target(self) -> Target:
        options = dict(self.node._options)
        if self.node.server is not None:
            options["password"] = self.node.server._password
        if options.get("ssl"):
            raise CapacityError("the capacity driver speaks plain TCP only; rediss+cluster:// is not supported")
        return Target(self.node.host, self.node.port, options.get("username"), options.get("password"))


@dataclass(frozen=True)
class NodeResult:
    node: str                    # host:port of the master
    queues: tuple[str, ...]
    result: CapacityResult       # this master's figures, its own workers' counts


@dataclass(frozen=True)
class ClusterCapacityResult:
    build: str
    version: str
    settings: CapacitySettings
    nodes: list[NodeResult]
    placements: list[Placement]
    accounting: list[dict[str, Any]]
    pinning: str
    cores_note: str
    machine_busy: float | None        # cores busy with our nodes and driver / cores (local clusters)
    unloaded: list[str] = field(default_factory=list)   # masters that got no queue
    warnings: list[str] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    ceiling_note: str = CEILING_NOTE
    ceiling = None
    ceiling_claims_per_s = None
    of_ceiling = None

    # -- totals ----------------------------------------------------------------

    @property
    def window_s(self) -> float:
        return self.settings.duration_s

    @property
    def cycles(self) -> int:
        return sum(n.result.cycles for n in self.nodes)

    @property
    def cycles_per_s(self) -> float:
        return sum(n.result.cycles_per_s for n in self.nodes)

    @property
    def busiest(self) -> NodeResult:
        return max(self.nodes, key=lambda n: n.result.server_utilization)

    @property
    def server_utilization(self) -> float:
        return self.busiest.result.server_utilization

    @property
    def server_wait(self) -> float | None:
        return self.busiest.result.server_wait

    def _per_cycle(self, name: str) -> float:
        """A per-cycle cost over all nodes: each node's weighted by the cycles it finished."""
        done = [(getattr(n.result, name), n.result.counts.get("a_completed", 0)) for n in self.nodes]
        total = sum(d for _, d in done)
        return sum(v * d for v, d in done if d) / total if total else float("nan")

    @property
    def server_us_per_cycle(self) -> float:
        return self._per_cycle("server_us_per_cycle")

    @property
    def script_us_per_cycle(self) -> float:
        return self._per_cycle("script_us_per_cycle")

    @property
    def client_cpu_s(self) -> float:
        return sum(n.result.client_cpu_s for n in self.nodes)

    @property
    def client_cores(self) -> int:
        return min(self.settings.processes * len(self.nodes), os.cpu_count() or 1)

    @property
    def client_utilization(self) -> float:
        return self.client_cpu_s / self.window_s / self.client_cores

    @property
    def client_wait(self) -> float:
        return sum(n.result.client_wait * n.result.client_cores for n in self.nodes) / self.client_cores

    @property
    def steal(self) -> float:
        return self.nodes[0].result.steal

    @property
    def bound(self) -> str:
        return serverstats.bound(self.server_utilization + (self.server_wait or 0.0),
                                 self.client_utilization + self.client_wait)

    @property
    def bound_node(self) -> str | None:
        return self.busiest.node if self.bound == "server" else None

    @property
    def counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for n in self.nodes:
            total.update(n.result.counts)
        return dict(total)

    @property
    def backlog(self) -> int:
        return sum(n.result.backlog for n in self.nodes)

    @property
    def scripts(self) -> str:
        return self.nodes[0].result.scripts

    @cached_property
    def latency(self) -> dict[str, Latency]:
        merged = {verb: Latency() for verb in VERBS}
        for n in self.nodes:
            for verb, hist in n.result.latency.items():
                merged[verb].merge(hist)
        return merged

    @cached_property
    def _summaries(self) -> dict[str, dict[str, float]]:
        return {verb: hist.summary_ms() if hist.count else {} for verb, hist in self.latency.items()}

    def latency_ms(self, verb: str) -> dict[str, float]:
        return self._summaries.get(verb, {})

    @property
    def timeline(self) -> list[tuple[float, float]]:
        per_t: dict[float, float] = {}
        for n in self.nodes:
            for t, rate in n.result.timeline:
                per_t[t] = per_t.get(t, 0.0) + rate
        return sorted(per_t.items())

    @property
    def median_bin_rate(self) -> float:
        return median_rate(self.timeline, self.cycles_per_s)

    @property
    def audit(self) -> dict[str, Any] | None:
        audits = {n.node: n.result.audit for n in self.nodes if n.result.audit is not None}
        if not audits:
            return None
        return {"passed": all(a["passed"] for a in audits.values()), "nodes": audits}

    @property
    def accounting_passed(self) -> bool:
        return all(row["ok"] for row in self.accounting)

    # -- records -------------------------------------------------------------

    def node_entry(self, n: NodeResult) -> dict[str, Any]:
        r = n.result
        return {"node": n.node, "queues": list(n.queues), "version": r.version, "cycles_per_s": r.cycles_per_s,
                "cycles": r.cycles, "server_utilization": r.server_utilization,
                "server_cpu_utilization": r.server_cpu_utilization, "server_wait": r.server_wait,
                "server_us_per_cycle": r.server_us_per_cycle, "script_us_per_cycle": r.script_us_per_cycle,
                "scripts_per_cycle": r.scripts_per_cycle, "client_utilization": r.client_utilization,
                "client_wait": r.client_wait, "backlog": r.backlog, "counts": r.counts,
                "latency_ms": {v: r.latency_ms(v) for v in VERBS if r.latency_ms(v)}}

    def headline(self) -> dict[str, Any]:
        """The summary.json entry: one server's headline keys over the whole cluster, then the nodes."""
        return {
            "cycles_per_s": self.cycles_per_s,
            "server_us_per_cycle": self.server_us_per_cycle,
            "server_utilization": self.server_utilization,
            "client_utilization": self.client_utilization,
            "bound": self.bound,
            "bound_node": self.bound_node,
            "busiest_node": self.busiest.node,
            "ceiling_claims_per_s": None,
            "ceiling_note": self.ceiling_note,
            "of_ceiling": None,
            "script_us_per_cycle": self.script_us_per_cycle,
            "median_bin_cycles_per_s": self.median_bin_rate,
            "mode": "open loop" if self.settings.rate else "closed loop",
            "target_cycles_per_s": self.settings.rate,
            "feed": self.settings.feed,
            "server_wait": self.server_wait,
            "client_wait": self.client_wait,
            "steal": self.steal,
            "version": self.version,
            "pinning": self.pinning,
            "cores_note": self.cores_note,
            "machine_busy": self.machine_busy,
            "cluster": True,
            "queues": len(self.placements),
            "placements": [asdict(p) for p in self.placements],
            "nodes": [self.node_entry(n) for n in self.nodes],
            "unloaded_masters": self.unloaded,
            "accounting_passed": self.accounting_passed,
            "accounting": self.accounting,
            "latency_ms": {v: self.latency_ms(v) for v in VERBS if self.latency_ms(v)},
            "counts": self.counts,
            "backlog": self.backlog,
            "scripts": self.scripts,
            "warnings": self.warnings,
            **({"audit": self.audit} if self.audit is not None else {}),
        }

    def rows(self, **condition: Any) -> list[dict[str, Any]]:
        """Tidy rows with a `node` column: every metric of every master, then the totals as node `all`."""
        out = []
        for n in self.nodes:
            for row in n.result.rows(**condition):
                rest = {k: v for k, v in row.items() if k not in ("build", "version", "bound")}
                out.append({"build": self.build, "version": self.version, "node": n.node, **rest,
                            "bound": self.bound})
        base = {"build": self.build, "version": self.version, "node": "all", **condition, "bound": self.bound}
        totals: list[tuple[str, Any, str]] = [
            ("cycles_per_s", self.cycles_per_s, "1/s"),
            ("cycles", self.cycles, "1"),
            ("server_us_per_cycle", self.server_us_per_cycle, "us"),
            ("script_us_per_cycle", self.script_us_per_cycle, "us"),
            ("server_utilization", self.server_utilization, "fraction"),   # the busiest node's
            ("client_utilization", self.client_utilization, "fraction"),
            ("client_wait", self.client_wait, "fraction"),
            ("median_bin_cycles_per_s", self.median_bin_rate, "1/s"),
            ("accounting_passed", int(self.accounting_passed), "1"),
            *([("machine_busy", self.machine_busy, "fraction")] if self.machine_busy is not None else []),
        ]
        for verb in VERBS:
            for name, value in self.latency_ms(verb).items():
                totals.append((f"{verb}_{name}_ms", value, "ms"))
        out += [{**base, "metric": m, "value": v, "unit": u} for m, v, u in totals]
        return out

    def timeline_rows(self, **condition: Any) -> list[dict[str, Any]]:
        out = []
        for n in self.nodes:
            out += [{**row, "build": self.build, "node": n.node} for row in n.result.timeline_rows(**condition)]
        base = {"build": self.build, "version": self.version, "node": "all", **condition}
        out += [{**base, "t_s": t, "metric": "cycles_per_s", "value": rate, "unit": "1/s"} for t, rate in self.timeline]
        return out

    def write_hgrm(self, folder: Path, prefix: str = "") -> list[Path]:
        return write_hgrms(folder, f"{prefix}{self.build}", self.latency)


# --------------------------------------------------------------------------
# The run


def run_cluster_capacity(cluster: Any, settings: CapacitySettings = CapacitySettings(), *,
                         lua_dir: Path | str | None = None, progress: Say | None = None,
                         cleanup: bool = True, show: Say | None = None) -> ClusterCapacityResult:
    """Measure a running cluster (echomq_bench.servers.cluster), master by master, through one window.
    It is left running; the run's keys are removed unless settings.keep_keys (or cleanup=False).
    `show` gets the queues' placement before anything is filled."""
    settings.check()
    say: Say = (lambda text: progress(f"{cluster.name}: {text}")) if progress else (lambda _: None)
    masters = {m.name: m for m in cluster.masters()}
    router = cluster.client()
    try:
        placements = spread_queues(router, settings.queues or len(masters), prefix=f"cap-{secrets.token_hex(3)}-")
    finally:
        router.close()
    stray = sorted({p.node for p in placements} - set(masters))
    if stray:
        raise CapacityError(f"cluster {cluster.name!r}: queues placed on {', '.join(stray)}, which CLUSTER NODES "
                            "does not list as a master; is the cluster changing?")
    settings = replace(settings, queues=len(placements))
    if show is not None:
        show(f"{cluster.name}: {len(placements)} queues over {len(masters)} masters\n{format_placements(placements)}")
    loaded = [name for name in masters if any(p.node == name for p in placements)]
    local = all(masters[name].pid is not None for name in loaded)
    cores = os.cpu_count() or 1
    workers = settings.processes * len(loaded)
    if local:
        pinning = f"off: {len(loaded)} nodes and the driver's {workers} processes share this machine's {cores} cores"
        cores_note = (f"all {len(loaded)} nodes and the driver ({workers} processes) shared this machine's {cores} "
                      f"cores, unpinned: per-node figures are a floor for {len(loaded)} machines, not a forecast")
    else:
        pinning = "off (cluster given by URL: its pids are not ours)"
        cores_note = (f"the nodes ran where the cluster runs; the driver ({workers} processes) on this machine's "
                      f"{cores} cores")
    sessions: list[Session] = []
    node_settings: list[CapacitySettings] = []
    try:
        for name in loaded:
            names = tuple(p.queue for p in placements if p.node == name)
            share = len(names) / len(placements)
            ns = replace(settings, queues=len(names), pin=False, ceiling=False,
                         rate=settings.rate * share if settings.rate else None,
                         backlog=_split(settings.backlog, placements, names))
            master = _Master(masters[name])
            sessions.append(open_session(master, ns, lua_dir, say, names=names, target=master.target(),
                                         pinning=pinning))
            node_settings.append(ns)
        filled = _fill(sessions, node_settings, settings, say)
        groups = [(plans(ns, s), s) for ns, s in zip(node_settings, sessions)]
        driven = drive(groups, settings, say)
        results = [collect(s, ns, res, measured) for ns, s, (res, measured) in zip(node_settings, sessions, driven)]
        accounting = _account(sessions, [res for res, _ in driven], filled, placements)
        busy = None
        if local:
            # Cores busy with our nodes (all their threads) and our driver, over the machine's cores.
            driver = sum(r.client_cpu_s for r in results) / settings.duration_s
            busy = (sum(r.server_cpu_utilization for r in results) + driver) / cores
        out = ClusterCapacityResult(
            build=cluster.name, version=results[0].version, settings=settings,
            nodes=[NodeResult(s.server.name, s.names, r) for s, r in zip(sessions, results)],
            placements=placements, accounting=accounting, pinning=pinning, cores_note=cores_note,
            machine_busy=busy, unloaded=[m for m in masters if m not in loaded],
            server={"name": cluster.name, "spec": cluster.describe(), "nodes": [s.described for s in sessions]})
        return replace(out, warnings=_warnings(out, local))
    finally:
        for s in sessions:
            close_session(s, settings, cleanup)


def _split(total: int | None, placements: list[Placement], names: tuple[str, ...]) -> int | None:
    """This master's part of a total over all queues (queue i gets total // Q, the first total % Q one more)."""
    if total is None:
        return None
    q = len(placements)
    return sum(total // q + (i < total % q) for i, p in enumerate(placements) if p.queue in names)


def _fill(sessions: list[Session], node_settings: list[CapacitySettings], settings: CapacitySettings,
          say: Say) -> dict[str, int]:
    """Every master's backlog, a chunk per queue in turn; returns the jobs put on each queue."""
    for s, ns in zip(sessions, node_settings):
        share = 1.0 if ns.rate or ns.backlog is not None or ns.feed == "produce" else NODE_SHARE
        s.backlog = backlog_size(ns, share)
    say(f"filling {sum(s.backlog for s in sessions):,} jobs on {len(sessions)} masters")
    return fill_sessions(sessions, b"x" * settings.payload_bytes, keep_ids=settings.ledger)


def _account(sessions: list[Session], results: list[list[dict[str, Any]]], filled: dict[str, int],
             placements: list[Placement]) -> list[dict[str, Any]]:
    """Per queue: completes the driver counted against what the server completed
    (filled + enqueues accepted - what is left in the queue's four sets)."""
    slots = {p.queue: p.slot for p in placements}
    rows = []
    for s, mine in zip(sessions, results):
        counted: dict[str, Counter[str]] = {name: Counter() for name in s.names}
        for r in mine:
            for name, c in r.get("queues", {}).items():
                counted[name].update(c)
        pipe = s.client.pipeline(transaction=False)
        for name in s.names:
            k = QueueKeys(name)
            for key in (k.pending, k.active, k.schedule, k.dead):
                pipe.zcard(key)
        sizes = pipe.execute()
        for i, name in enumerate(s.names):
            pending, active, scheduled, dead = sizes[4 * i:4 * i + 4]
            enqueued = counted[name]["enqueued"]
            server_done = filled[name] + enqueued - pending - active - scheduled - dead
            driver_done = counted[name]["completed"]
            rows.append({"queue": name, "node": s.server.name, "slot": slots[name], "filled": filled[name],
                         "enqueued": enqueued, "left": pending + active + scheduled + dead,
                         "driver_completed": driver_done, "server_completed": server_done,
                         "ok": driver_done == server_done and active == 0})
    return rows


def _warnings(r: ClusterCapacityResult, local: bool) -> list[str]:
    out = []
    for n in r.nodes:
        for text in n.result.warnings:
            # On a local cluster every node waits for a core by design; the srv wait column shows how long.
            if local and "waited for a CPU" in text:
                continue
            out.append(f"{n.node}: {text}")
    if r.unloaded:
        out.append(f"masters without a queue, so without load: {', '.join(r.unloaded)} "
                   f"(give --queues {len(r.nodes) + len(r.unloaded)} or more)")
    if not r.accounting_passed:
        bad = [row["queue"] for row in r.accounting if not row["ok"]]
        out.append(f"accounting FAILED on {', '.join(bad)}: the driver's completes differ from the server's")
    return out


# --------------------------------------------------------------------------
# For people


def format_cluster(r: ClusterCapacityResult) -> str:
    """The placement, then a row per master and a total row, then what limited the run."""
    lines = [f"{r.build} ({r.version}): {len(r.placements)} queues over {len(r.nodes)} masters",
             format_placements(r.placements), ""]
    head = (f"{'node':<21} {'queues':>6} {'cycles/s':>9} {'srv µs/cyc':>10} {'srv busy':>8} {'srv wait':>8} "
            f"{'client busy':>11}  claim ms p50 / p99 / max")
    lines.append(head)

    def pct(value: float | None) -> str:
        return _num(value * 100, ".1f") + "%" if value is not None else "-"

    def lat(d: dict[str, float]) -> str:
        return " / ".join(_num(d.get(k), ".2f") for k in ("p50", "p99", "max")) if d else "-"

    for n in r.nodes:
        x = n.result
        lines.append(f"{n.node:<21} {len(n.queues):>6} {_num(x.cycles_per_s, ',.0f'):>9} "
                     f"{_num(x.server_us_per_cycle, '.2f'):>10} {pct(x.server_utilization):>8} "
                     f"{pct(x.server_wait):>8} {pct(x.client_utilization):>11}  {lat(x.latency_ms('claim'))}")
    lines.append(f"{'total':<21} {len(r.placements):>6} {_num(r.cycles_per_s, ',.0f'):>9} "
                 f"{_num(r.server_us_per_cycle, '.2f'):>10} {pct(r.server_utilization):>8} "
                 f"{pct(r.server_wait):>8} {pct(r.client_utilization):>11}  {lat(r.latency_ms('claim'))}")
    lines.append("(total row: srv busy and srv wait are the busiest node's; srv µs/cyc is over all nodes)")
    if r.bound == "server":
        lines.append(f"bound: server, the main thread of {r.bound_node} "
                     f"({r.server_utilization:.0%} busy + {(r.server_wait or 0):.0%} waiting for a core)")
    else:
        lines.append(f"bound: client (driver {r.client_utilization:.0%} busy over {r.client_cores} cores; "
                     f"busiest node {r.busiest.node} at {r.server_utilization:.0%})")
    lines.append(f"cores: {r.cores_note}"
                 + (f"; machine {r.machine_busy:.0%} busy with them" if r.machine_busy is not None else ""))
    if r.machine_busy is not None and r.machine_busy >= FULL_MACHINE:
        lines.append(f"       the {os.cpu_count()} cores were full: the nodes' main threads were runnable but shared "
                     "them (srv busy + srv wait), so the machine, not any one node, set the total")
    lines.append(f"ceiling: {r.ceiling_note}")
    done = sum(row["driver_completed"] for row in r.accounting)
    lines.append(f"accounting: {'PASS' if r.accounting_passed else 'FAIL'} (per queue, driver completes == server "
                 f"completes; {done:,} in all)")
    return "\n".join(lines)
