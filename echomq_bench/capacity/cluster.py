"""Capacity over a cluster: the driver's workers per master, a row per node.

`run_cluster_capacity(cluster, settings)` names Q queues with
`echomq_bench.servers.spread_queues` (default: one per master), so that they land
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
from dataclasses import replace
from pathlib import Path
from typing import Any

from echomq._instrument import QueueKeys
from echomq_bench.capacity.cluster_result import ClusterCapacityResult, NodeResult
from echomq_bench.capacity.settings import DEFAULT_SETTINGS, CapacityError, CapacitySettings
from echomq_bench.servers import Placement, format_placements, spread_queues
from echomq_bench.servers import server_version
from echomq_bench.capacity.session import (Session, backlog_size, close_session, collect, drive, fill_sessions,
                                           open_session, plans)
from echomq_bench.load.wire import Target
from echomq_bench.progress import ProgressFn, prefixed

__all__ = ["ClusterCapacityResult", "NodeResult", "run_cluster_capacity"]

# Default backlog per master: this share of what one server's default is
# sized for (session.BACKLOG_RATE). Masters sharing two cores each run at
# well under one server's rate; one that runs dry says so.
NODE_SHARE = 0.6


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
        options = self.node.connection_kwargs()
        if options.get("ssl"):
            raise CapacityError("the capacity driver speaks plain TCP only; rediss+cluster:// is not supported")
        return Target(self.node.host, self.node.port, options.get("username"), options.get("password"))


# --------------------------------------------------------------------------
# The run


def run_cluster_capacity(cluster: Any, settings: CapacitySettings = DEFAULT_SETTINGS, *,
                         lua_dir: Path | str | None = None, progress: ProgressFn | None = None,
                         cleanup: bool = True, log: ProgressFn | None = None) -> ClusterCapacityResult:
    """Measure a running cluster (echomq_bench.servers.Cluster), master by master, through one window.
    It is left running; the run's keys are removed unless settings.keep_keys (or cleanup=False).
    `log` gets the queues' placement before anything is filled."""
    settings.check()
    progress = prefixed(progress, f"{cluster.name}:")
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
    if log is not None:
        log(f"{cluster.name}: {len(placements)} queues over {len(masters)} masters\n{format_placements(placements)}")
    loaded = [name for name in masters if any(p.node == name for p in placements)]
    local = all(masters[name].pid is not None for name in loaded)
    cores = os.cpu_count() or 1
    pinning, cores_note = _cores_notes(len(loaded), settings.processes * len(loaded), cores, local)
    sessions: list[Session] = []
    node_settings: list[CapacitySettings] = []
    try:
        for name in loaded:
            names = tuple(p.queue for p in placements if p.node == name)
            ns = _node_settings(settings, placements, names)
            master = _Master(masters[name])
            sessions.append(open_session(master, ns, lua_dir, progress, names=names, target=master.target(),
                                         pinning=pinning))
            node_settings.append(ns)
        filled = _fill(sessions, node_settings, settings, progress)
        groups = [(plans(ns, s), s) for ns, s in zip(node_settings, sessions)]
        driven = drive(groups, settings, progress)
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
            server={"name": cluster.name, "version": results[0].version, "spec": cluster.describe(),
                    "nodes": [s.described for s in sessions]})
        return replace(out, warnings=_warnings(out, local))
    finally:
        for s in sessions:
            close_session(s, settings, cleanup)


def _cores_notes(nodes: int, workers: int, cores: int, local: bool) -> tuple[str, str]:
    """What the pinning was, and whose cores the nodes and the driver ran on."""
    if local:
        pinning = f"off: {nodes} nodes and the driver's {workers} processes share this machine's {cores} cores"
        cores_note = (f"all {nodes} nodes and the driver ({workers} processes) shared this machine's {cores} "
                      f"cores, unpinned: per-node figures are a floor for {nodes} machines, not a forecast")
    else:
        pinning = "off (cluster given by URL: its pids are not ours)"
        cores_note = (f"the nodes ran where the cluster runs; the driver ({workers} processes) on this machine's "
                      f"{cores} cores")
    return pinning, cores_note


def _node_settings(settings: CapacitySettings, placements: list[Placement], names: tuple[str, ...]) -> CapacitySettings:
    """One master's settings: its queues, its share of an open loop's rate and of a given backlog."""
    share = len(names) / len(placements)
    return replace(settings, queues=len(names), pin=False, ceiling=False,
                   rate=settings.rate * share if settings.rate else None,
                   backlog=_split(settings.backlog, placements, names))


def _split(total: int | None, placements: list[Placement], names: tuple[str, ...]) -> int | None:
    """This master's part of a total over all queues (queue i gets total // Q, the first total % Q one more)."""
    if total is None:
        return None
    q = len(placements)
    return sum(total // q + (i < total % q) for i, p in enumerate(placements) if p.queue in names)


def _fill(sessions: list[Session], node_settings: list[CapacitySettings], settings: CapacitySettings,
          progress: ProgressFn) -> dict[str, int]:
    """Every master's backlog, a chunk per queue in turn; returns the jobs put on each queue."""
    for s, ns in zip(sessions, node_settings):
        share = 1.0 if ns.rate or ns.backlog is not None or ns.feed == "produce" else NODE_SHARE
        s.backlog = backlog_size(ns, share)
    progress(f"filling {sum(s.backlog for s in sessions):,} jobs on {len(sessions)} masters")
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
