"""The peers run's record (`echomq_bench.records.kinds.peers.PeersRecord`) and tidy rows, all read from
its PeerRun results."""

from __future__ import annotations

import math
from typing import Any

from echomq_bench.peers.registry import BASELINE, get
from echomq_bench.peers.base import PAYLOAD_BYTES, version_of
from echomq_bench.peers.intervals import FIGURES_WITH_CI, interval, ratio_verdict
from echomq_bench.peers.result import PeerRun, Phase
from echomq_bench.peers.rounds import HEADLINE, PeersSettings, pairs
from echomq_bench.measurement.stats import median, span
from echomq_bench.records.kinds.compare import RatioVerdictEntry
from echomq_bench.records.kinds.peers import (FailureEntry, HeadlineEntry, IntervalEntry, MemoryEntry, PeersRecord,
                                              PhaseEntry, QueueEntry)

__all__ = ["build_record", "tidy_rows", "command_rows", "ratio_rows", "FIGURES"]

_PHASE_FIGURES = ("jobs_per_s", "server_us_per_job", "server_all_threads_us_per_job", "commands_per_job",
                  "scripts_per_job", "script_us_per_job", "round_trips_per_job", "transactions_per_job",
                  "client_us_per_job", "server_utilization", "client_utilization")


def _phase(phases: list[Phase]) -> PhaseEntry:
    bounds = [p.bottleneck for p in phases]
    return PhaseEntry(**{k: median(getattr(p, k) for p in phases) for k in _PHASE_FIGURES},
                      bottleneck=max(set(bounds), key=bounds.count))


def build_record(runs: list[PeerRun], names: list[str], skipped: dict[str, str],
                 failures: list[dict[str, Any]], settings: PeersSettings) -> PeersRecord:
    entries = []
    servers = list(dict.fromkeys(r.server for r in runs)) or [s.name for s in settings.servers]
    for server in servers:
        for name, mode in pairs(names, settings.modes):
            mine = [r for r in runs if r.server == server and r.queue == name and r.mode == mode]
            if mine:
                base = [r for r in runs if r.server == server and r.queue == BASELINE and r.mode == mode]
                entries.append(_entry(server, (name, mode), mine, base, settings))
    return PeersRecord(
        jobs=settings.jobs, consumers=settings.consumers, trials=settings.trials,
        # The headline pair's rounds beyond `trials`: what ended them is in the rows' n.
        headline=HeadlineEntry(queue=HEADLINE, precision=settings.precision, max_trials=settings.max_trials,
                               budget_s=settings.budget_s if math.isfinite(settings.budget_s) else None),
        modes=tuple(settings.modes), baseline=BASELINE, payload_bytes=PAYLOAD_BYTES, figures=FIGURES,
        queues=tuple(entries), skipped=dict(skipped), failures=tuple(FailureEntry.from_record(f) for f in failures))


# What each summary figure is, written into summary.json beside the numbers.
FIGURES = {
    "jobs_per_s": "N / (enqueue wall + drain wall): a job's whole life",
    "server_us_per_job": "server main-thread CPU (INFO cpu *_main_thread deltas) over both phases, per job",
    "script_us_per_job": "commandstats usec of EVAL/EVALSHA/FCALL calls per job (the commands they run included)",
    "commands_per_job": "commandstats calls over both phases per job, commands inside scripts and "
                        "MULTI/EXEC included; the runner's own INFO calls excluded",
    "round_trips_per_job": "INFO stats total_reads_processed per job, the runner's own reads excluded: one per "
                           "request the clients sent, a pipeline or MULTI/EXEC sent at once counted once",
    "scripts_per_job": "EVAL/EVALSHA/FCALL calls per job; the commands they run count in commands_per_job",
    "bytes_per_pending_job": "INFO used_memory after enqueue minus before, over N",
    "client_us_per_job": "CPU of the producer and consumer processes (and children they waited for) per job",
    "ci": "geometric mean over trials with a t-interval on the logs (the compare verdicts' method)",
    "vs_baseline": f"trial-paired ratio to {BASELINE} in the same mode on the same server, judged as compare "
                   "judges (fewer trials than the method needs: inconclusive)",
    "bottleneck": "server when its main thread was >= 85% busy or busier than the client processes "
                  "(client CPU in cores), else client",
}


def _entry(server: str, queue: tuple[str, str], mine: list[PeerRun], base: list[PeerRun],
           settings: PeersSettings) -> QueueEntry:
    """One queue in one mode on one server: medians, intervals and the ratio to the baseline."""
    name, mode = queue
    peer = get(name, mode)
    clean = [r for r in mine if r.clean] or mine
    verdicts = {k: ratio_verdict(mine, base, k) for k in ("server_us_per_job", "jobs_per_s", "commands_per_job",
                                                          "round_trips_per_job")} if name != BASELINE and base else {}
    spread = {k: list(span(getattr(r, k) for r in mine))
              for k in ("jobs_per_s", "server_us_per_job", "commands_per_job")}
    return QueueEntry(
        server=server, server_version=mine[0].server_version, queue=name, mode=mode,
        library=f"{peer.distribution.removeprefix('npm:')} {version_of(peer.distribution)}",
        enqueue_mode=peer.enqueue_mode, drain_mode=peer.drain_mode, settings=peer.settings(settings.consumers),
        jobs=settings.jobs, consumers=settings.consumers, trials=len(mine),
        scripts_per_job=median(r.scripts_per_job for r in mine),
        transactions_per_job=median(r.transactions_per_job for r in mine),
        enqueue=_phase([r.enqueue for r in mine]), drain=_phase([r.drain for r in mine]),
        memory=MemoryEntry(bytes_per_pending_job=median(r.bytes_per_pending_job for r in mine),
                           residual_bytes_after_drain=median(r.residual_bytes for r in mine),
                           keys_after_drain=median(r.keys_after for r in mine),
                           key_sample_after_drain=tuple(mine[-1].key_sample)),
        ci={k: IntervalEntry.from_record(interval([float(getattr(r, k)) for r in clean])) for k in FIGURES_WITH_CI},
        # A figure no trial pair judged (a zero or a failed trial on either side): an empty verdict, no ratio.
        vs_baseline={k: RatioVerdictEntry() if v is None else RatioVerdictEntry.from_record(v)
                     for k, v in verdicts.items()},
        spread={**spread, "drain_jobs_per_s": list(span(r.drain.jobs_per_s for r in mine))},
        drained_clean=all(r.clean for r in mine), ran=tuple(r.ran for r in mine), leftovers=mine[-1].leftovers,
        **{k: median(getattr(r, k) for r in mine) for k in FIGURES_WITH_CI})


TOTALS = ("jobs_per_s", "server_us_per_job", "script_us_per_job", "commands_per_job", "round_trips_per_job",
          "scripts_per_job", "transactions_per_job", "client_us_per_job", "bytes_per_pending_job", "residual_bytes")


def tidy_rows(runs: list[PeerRun]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for r in runs:
        base = {"server": r.server, "server_version": r.server_version, "queue": r.queue, "mode": r.mode,
                "trial": r.trial, "jobs": r.jobs, "consumers": r.consumers}
        for phase_name, phase in (("enqueue", r.enqueue), ("drain", r.drain)):
            for metric, value in phase.figures().items():
                if metric == "bottleneck":
                    continue
                rows.append({**base, "phase": phase_name, "metric": metric, "value": value, "unit": _unit(metric)})
        for metric in TOTALS:
            rows.append({**base, "phase": "total", "metric": metric, "value": getattr(r, metric),
                         "unit": _unit(metric)})
    return rows


def command_rows(runs: list[PeerRun]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        for phase_name, phase in (("enqueue", r.enqueue), ("drain", r.drain)):
            for command, (calls, usec) in sorted(phase.commands.items()):
                base = {"server": r.server, "queue": r.queue, "mode": r.mode, "trial": r.trial,
                        "phase": phase_name, "command": command}
                rows.append({**base, "metric": "calls_per_job", "value": calls / r.jobs, "unit": "calls"})
                rows.append({**base, "metric": "usec_per_job", "value": usec / r.jobs, "unit": "us"})
    return rows


def ratio_rows(record: PeersRecord) -> list[dict[str, Any]]:
    """One row per queue, mode, server and figure: the ratio to the baseline, its interval and verdict."""
    rows = []
    for e in record.queues:
        for metric, v in e.vs_baseline.items():
            if v.ratio is None:
                continue
            low, high = v.ci or (None, None)
            rows.append({"server": e.server, "queue": e.queue, "mode": e.mode, "metric": metric,
                         "baseline": record.baseline, "ratio": v.ratio, "ci_low": low, "ci_high": high,
                         "n": v.n, "verdict": v.text, "method": v.method})
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
