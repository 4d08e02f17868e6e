"""A cluster capacity run's result: each master's `CapacityResult` and the totals over
them, as a typed summary entry (`records.kinds.capacity.ClusterEntry`) and tidy rows. It
answers `capacity.result.CapacityFigures` as one server's result does, so a capacity run
returns either (`echomq_bench.capacity.cluster` produces it; the report's `kinds.capacity`
renders the record)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from echomq_bench.capacity.result import CapacityResult, median_rate, write_hgrms
from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.load.driver import VERBS
from echomq_bench.measurement import serverstats
from echomq_bench.measurement.latency import Latency
from echomq_bench.records.kinds.capacity import ClusterEntry, NodeEntry
from echomq_bench.servers import Placement

__all__ = ["ClusterCapacityResult", "NodeResult", "CEILING_NOTE", "FULL_MACHINE"]

FULL_MACHINE = 0.9   # machine_busy from which the record says the cores, not a node, set the total
CEILING_NOTE = ("not taken on a cluster: redis-benchmark sends every request to one address, and one node's "
                "ceiling taken while the other nodes sit idle says nothing of the nodes sharing the cores")


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
    def cores_full(self) -> bool:
        """The machine's cores were full with our nodes and driver: the cores, not any one node, set the total."""
        return self.machine_busy is not None and self.machine_busy >= FULL_MACHINE

    @property
    def accounting_passed(self) -> bool:
        return all(row["ok"] for row in self.accounting)

    # -- records -------------------------------------------------------------

    def node_entry(self, n: NodeResult) -> NodeEntry:
        r = n.result
        return NodeEntry(
            node=n.node, queues=tuple(n.queues), version=r.version, cycles_per_s=r.cycles_per_s, cycles=r.cycles,
            server_utilization=r.server_utilization, server_cpu_utilization=r.server_cpu_utilization,
            server_wait=r.server_wait, server_us_per_cycle=r.server_us_per_cycle,
            script_us_per_cycle=r.script_us_per_cycle, scripts_per_cycle=r.scripts_per_cycle,
            client_utilization=r.client_utilization, client_wait=r.client_wait, backlog=r.backlog,
            counts=dict(r.counts), latency_ms={v: r.latency_ms(v) for v in VERBS if r.latency_ms(v)})

    def entry(self) -> ClusterEntry:
        """The summary.json entry: one server's headline figures over the whole cluster, then the nodes."""
        settings = self.settings
        return ClusterEntry(
            cycles_per_s=self.cycles_per_s, server_us_per_cycle=self.server_us_per_cycle,
            server_utilization=self.server_utilization, client_utilization=self.client_utilization,
            bound=self.bound, bound_node=self.bound_node, busiest_node=self.busiest.node,
            ceiling_note=self.ceiling_note, script_us_per_cycle=self.script_us_per_cycle,
            median_bin_cycles_per_s=self.median_bin_rate, mode="open loop" if settings.rate else "closed loop",
            target_cycles_per_s=settings.rate, feed=settings.feed, server_wait=self.server_wait,
            client_wait=self.client_wait, steal=self.steal, version=self.version, pinning=self.pinning,
            cycles=self.cycles, window_s=self.window_s, client_cores=self.client_cores, cores_note=self.cores_note,
            machine_busy=self.machine_busy, cores_full=self.cores_full, queues=len(self.placements),
            placements=tuple(asdict(p) for p in self.placements), nodes=tuple(self.node_entry(n) for n in self.nodes),
            unloaded_masters=tuple(self.unloaded), accounting_passed=self.accounting_passed,
            accounting=tuple(self.accounting), latency_ms={v: self.latency_ms(v) for v in VERBS if self.latency_ms(v)},
            counts=self.counts, backlog=self.backlog, scripts=self.scripts, warnings=tuple(self.warnings),
            audit=self.audit)

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
