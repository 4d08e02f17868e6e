"""The peers run's summary, tidy rows and table, all read from its PeerRun records."""

from __future__ import annotations

import statistics
from typing import Any, Iterable

from echomq_bench.peers import get
from echomq_bench.peers.base import PAYLOAD_BYTES, version_of
from echomq_bench.peers.result import PeerRun, Phase
from echomq_bench.peers.runner import PeersSettings

__all__ = ["build_summary", "tidy_rows", "command_rows", "format_table"]


def _median(values: Iterable[float]) -> float:
    return float(statistics.median(values))


def _spread(values: list[float]) -> list[float]:
    return [min(values), max(values)]


def _phase_summary(phases: list[Phase]) -> dict[str, Any]:
    keys = ("jobs_per_s", "server_us_per_job", "server_all_threads_us_per_job", "commands_per_job",
            "scripts_per_job", "transactions_per_job", "client_us_per_job", "server_utilization",
            "client_utilization")
    out: dict[str, Any] = {k: _median(getattr(p, k) for p in phases) for k in keys}
    bounds = [p.bottleneck for p in phases]
    out["bottleneck"] = max(set(bounds), key=bounds.count)
    return out


def build_summary(runs: list[PeerRun], names: list[str], skipped: dict[str, str],
                  failures: list[dict[str, Any]], settings: PeersSettings) -> dict[str, Any]:
    entries = []
    servers = list(dict.fromkeys(r.server for r in runs)) or [s.name for s in settings.servers]
    for server in servers:
        for name in names:
            mine = [r for r in runs if r.server == server and r.queue == name]
            if mine:
                entries.append(_entry(server, name, mine, settings))
    return {
        "kind": "peers",
        "jobs": settings.jobs,
        "consumers": settings.consumers,
        "trials": settings.trials,
        "payload_bytes": PAYLOAD_BYTES,
        "figures": FIGURES,
        "queues": entries,
        "skipped": skipped,
        "failures": failures,
    }


# What each summary figure is, written into summary.json beside the numbers.
FIGURES = {
    "jobs_per_s": "N / (enqueue wall + drain wall): a job's whole life",
    "server_us_per_job": "server main-thread CPU (INFO cpu *_main_thread deltas) over both phases, per job",
    "commands_per_job": "commandstats calls over both phases per job, commands inside scripts and "
                        "MULTI/EXEC included; the runner's own INFO calls excluded",
    "scripts_per_job": "EVAL/EVALSHA/FCALL calls per job; the commands they run count in commands_per_job",
    "bytes_per_pending_job": "INFO used_memory after enqueue minus before, over N",
    "bottleneck": "server when its main thread was >= 85% busy or busier than the client processes "
                  "(client CPU in cores), else client",
}


def _entry(server: str, name: str, mine: list[PeerRun], settings: PeersSettings) -> dict[str, Any]:
    """One queue on one server, medians over its trials."""
    peer = get(name)
    entry: dict[str, Any] = {
        "server": server,
        "server_version": mine[0].server_version,
        "queue": name,
        "library": f"{peer.distribution} {version_of(peer.distribution)}",
        "enqueue_mode": peer.enqueue_mode,
        "drain_mode": peer.drain_mode,
        "settings": peer.settings(settings.consumers),
        "jobs": settings.jobs,
        "consumers": settings.consumers,
        "trials": len(mine),
        "jobs_per_s": _median(r.jobs_per_s for r in mine),
        "server_us_per_job": _median(r.server_us_per_job for r in mine),
        "commands_per_job": _median(r.commands_per_job for r in mine),
        "scripts_per_job": _median(r.scripts_per_job for r in mine),
        "transactions_per_job": _median(r.transactions_per_job for r in mine),
        "client_us_per_job": _median(r.client_us_per_job for r in mine),
        "enqueue": _phase_summary([r.enqueue for r in mine]),
        "drain": _phase_summary([r.drain for r in mine]),
        "memory": {
            "bytes_per_pending_job": _median(r.bytes_per_pending_job for r in mine),
            "residual_bytes_after_drain": _median(r.residual_bytes for r in mine),
            "keys_after_drain": _median(r.keys_after for r in mine),
            "key_sample_after_drain": mine[-1].key_sample,
        },
        "spread": {k: _spread([getattr(r, k) for r in mine])
                   for k in ("jobs_per_s", "server_us_per_job", "commands_per_job")},
        "drained_clean": all(r.clean for r in mine),
        "ran": [r.ran for r in mine],
        "leftovers": mine[-1].leftovers,
    }
    entry["spread"]["drain_jobs_per_s"] = _spread([r.drain.jobs_per_s for r in mine])
    return entry


def tidy_rows(runs: list[PeerRun]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for r in runs:
        base = {"server": r.server, "server_version": r.server_version, "queue": r.queue, "trial": r.trial,
                "jobs": r.jobs, "consumers": r.consumers}
        for phase_name, phase in (("enqueue", r.enqueue), ("drain", r.drain)):
            for metric, value in phase.figures().items():
                if metric == "bottleneck":
                    continue
                rows.append({**base, "phase": phase_name, "metric": metric, "value": value, "unit": _unit(metric)})
        for metric in ("jobs_per_s", "server_us_per_job", "commands_per_job", "scripts_per_job",
                       "transactions_per_job", "client_us_per_job", "bytes_per_pending_job", "residual_bytes"):
            rows.append({**base, "phase": "total", "metric": metric, "value": getattr(r, metric),
                         "unit": _unit(metric)})
    return rows


def command_rows(runs: list[PeerRun]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        for phase_name, phase in (("enqueue", r.enqueue), ("drain", r.drain)):
            for command, (calls, usec) in sorted(phase.commands.items()):
                base = {"server": r.server, "queue": r.queue, "trial": r.trial, "phase": phase_name,
                        "command": command}
                rows.append({**base, "metric": "calls_per_job", "value": calls / r.jobs, "unit": "calls"})
                rows.append({**base, "metric": "usec_per_job", "value": usec / r.jobs, "unit": "us"})
    return rows


def _unit(metric: str) -> str:
    if metric.endswith("_per_s"):
        return "jobs/s"
    if "us_per_job" in metric:
        return "us"
    if metric.endswith("_s"):
        return "s"
    if "bytes" in metric:
        return "bytes"
    if "utilization" in metric:
        return "cores"
    return "count"


def format_table(summary: dict[str, Any]) -> str:
    head = (f"{'server':<14} {'queue':<12} {'enq/s':>8} {'drain/s':>8} {'jobs/s':>8} "
            f"{'srv µs/job':>10} {'range':>13} {'enq+drain':>12} {'cmds/job':>8} {'B/pending':>9} "
            f"{'cli µs/job':>10} {'drain bound':>11}  clean")
    lines = [f"peers: {summary['jobs']:,} jobs, {summary['consumers']} consumers, "
             f"{summary['trials']} trial(s), medians; µs are server main-thread CPU", head]
    for e in summary["queues"]:
        split = f"{e['enqueue']['server_us_per_job']:.1f}+{e['drain']['server_us_per_job']:.1f}"
        lo, hi = e["spread"]["server_us_per_job"]
        lines.append(
            f"{e['server_version']:<14} {e['queue']:<12} {e['enqueue']['jobs_per_s']:>8,.0f} "
            f"{e['drain']['jobs_per_s']:>8,.0f} {e['jobs_per_s']:>8,.0f} {e['server_us_per_job']:>10.1f} "
            f"{f'{lo:.1f}..{hi:.1f}':>13} {split:>12} {e['commands_per_job']:>8.1f} "
            f"{e['memory']['bytes_per_pending_job']:>9,.0f} "
            f"{e['client_us_per_job']:>10.0f} {e['drain']['bottleneck']:>11}  "
            f"{'yes' if e['drained_clean'] else 'NO'}")
    lines.append("")
    seen = set()
    for e in summary["queues"]:
        if e["queue"] in seen:
            continue
        seen.add(e["queue"])
        lines.append(f"{e['queue']} ({e['library']}): enqueue {e['enqueue_mode']}; drain {e['drain_mode']}")
    for name, why in summary["skipped"].items():
        lines.append(f"skipped {name}: {why}")
    for f in summary["failures"]:
        lines.append(f"FAILED {f['server']} {f['queue']} trial {f['trial']}: {f['error'].splitlines()[0]}")
    return "\n".join(lines)
