"""The peers run's record (`echomq_bench.records.kinds.peers.PeersRecord`) and tidy rows, all read from
its PeerRun results."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from echomq_bench.peers.registry import BASELINE, HEADLINE, get
from echomq_bench.peers.base import PAYLOAD_BYTES, version_of
from echomq_bench.peers.family import ALPHA, CORRECTION, FAILED, Tally, failure_kind, family_level, tally
from echomq_bench.peers.headline import headline_verdicts
from echomq_bench.peers.intervals import FIGURES_WITH_CI, interval, ratio_verdict
from echomq_bench.peers.result import INTERLEAVED, PeerRun, Phase
from echomq_bench.peers.rounds import PeersSettings, pairs
from echomq_bench.measurement.stats import LEVEL, median, span
from echomq_bench.measurement.verdicts import RatioVerdict
from echomq_bench.records.kinds.peers import (FailureEntry, HeadlineEntry, IntervalEntry, MemoryEntry, PeersRecord,
                                              PhaseEntry, QueueEntry)
from echomq_bench.records.verdicts import RatioVerdictEntry

__all__ = ["build_record", "tidy_rows", "command_rows", "ratio_rows", "FIGURES", "RATIO_FIGURES"]

_PHASE_FIGURES = ("jobs_per_s", "server_us_per_job", "server_all_threads_us_per_job", "commands_per_job",
                  "scripts_per_job", "script_us_per_job", "round_trips_per_job", "transactions_per_job",
                  "client_us_per_job", "server_utilization", "client_utilization")


def _phase(phases: list[Phase]) -> PhaseEntry:
    bounds = [p.bottleneck for p in phases]
    return PhaseEntry(**{k: median(getattr(p, k) for p in phases) for k in _PHASE_FIGURES},
                      bottleneck=max(set(bounds), key=bounds.count))


def build_record(runs: list[PeerRun], names: list[str], skipped: dict[str, str],
                 failures: list[dict[str, Any]], settings: PeersSettings) -> PeersRecord:
    """The record: the table over the interleaved rounds alone, each server's ratio verdicts one Bonferroni
    family; the headline over rounds of one kind, a family of its own (docs/design/peers.md)."""
    table_runs = [r for r in runs if r.rounds == INTERLEAVED]
    table_failures = [f for f in failures if failure_kind(f) == INTERLEAVED]
    servers = (list(dict.fromkeys([*(r.server for r in runs), *(str(f["server"]) for f in failures)]))
               or [s.name for s in settings.servers])
    entries, sizes = [], {}
    for server in servers:
        had = {q: tally(table_runs, table_failures, (server, *q), INTERLEAVED) for q in pairs(names, settings.modes)}
        had = {q: t for q, t in had.items() if t.attempted}
        judged = [q for q in had if q[0] != BASELINE and (BASELINE, q[1]) in had]
        sizes[server] = len(judged) * len(RATIO_FIGURES)
        level = family_level(sizes[server]) if judged else LEVEL
        for (name, mode), rounds in had.items():
            mine = [r for r in table_runs if (r.server, r.queue, r.mode) == (server, name, mode)]
            base = [r for r in table_runs if (r.server, r.queue, r.mode) == (server, BASELINE, mode)]
            verdicts = {k: ratio_verdict(mine, base, k, level=level, rounds=rounds)
                        for k in RATIO_FIGURES} if (name, mode) in judged else {}
            entries.append(_entry(server, (name, mode), mine, verdicts, settings, rounds))
    head_modes = [mode for name, mode in pairs([HEADLINE], settings.modes)]
    return PeersRecord(
        jobs=settings.jobs, consumers=settings.consumers, trials=settings.trials,
        headline=HeadlineEntry(queue=HEADLINE, precision=settings.precision, max_trials=settings.max_trials,
                               budget_s=settings.budget_s if math.isfinite(settings.budget_s) else None,
                               verdicts=headline_verdicts(runs, failures, servers, head_modes)),
        modes=tuple(settings.modes), baseline=BASELINE, payload_bytes=PAYLOAD_BYTES, figures=FIGURES,
        queues=tuple(entries), skipped=dict(skipped), failures=tuple(FailureEntry.from_record(f) for f in failures),
        correction=CORRECTION_TEXT, family_sizes=sizes)


# The ratios to the baseline each queue is judged on; a server's family is these over every queue and mode.
RATIO_FIGURES = ("server_us_per_job", "jobs_per_s", "commands_per_job", "round_trips_per_job")
CORRECTION_TEXT = (f"{CORRECTION}: each server's m ratio verdicts (every queue, mode and figure against "
                   f"{BASELINE}, interleaved rounds) each at level 1 - {ALPHA:.2f}/m, so that together they hold "
                   f"at {1 - ALPHA:.0%}; the headline's verdicts (one per mode) a family of their own, judged on "
                   "rounds of one kind")


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
    "vs_baseline": f"trial-paired ratio to {BASELINE} in the same mode on the same server over the interleaved "
                   "rounds, judged as compare judges at the level of the server's Bonferroni family (fewer trials "
                   "than the method needs: inconclusive; failed in most rounds: failed, no ratio)",
    "attempted": "rounds the queue had in this mode on this server: runs measured and runs that errored",
    "failed": "of those rounds, the ones that errored or did not drain clean: failures of the queue",
    "bottleneck": "server when its main thread was >= 85% busy or busier than the client processes "
                  "(client CPU in cores), else client",
}


def _entry(server: str, queue: tuple[str, str], mine: list[PeerRun], verdicts: dict[str, RatioVerdict | None],
           settings: PeersSettings, rounds: Tally) -> QueueEntry:
    """One queue in one mode on one server: medians, intervals, the ratios to the baseline, and its rounds."""
    name, mode = queue
    peer = get(name, mode)
    entry = QueueEntry(
        server=server, queue=name, mode=mode,
        library=f"{peer.distribution.removeprefix('npm:')} {version_of(peer.distribution)}",
        enqueue_mode=peer.enqueue_mode, drain_mode=peer.drain_mode, settings=peer.settings(settings.consumers),
        jobs=settings.jobs, consumers=settings.consumers, trials=len(mine),
        attempted=rounds.attempted, failed=rounds.failed, drained_clean=rounds.failed == 0,
        # A figure no trial pair judged (a zero or a failed trial on either side): an empty verdict, no ratio.
        vs_baseline={k: RatioVerdictEntry() if v is None else RatioVerdictEntry.of(v) for k, v in verdicts.items()})
    if not mine:   # every round errored: the row says so, with nothing measured
        return entry
    clean = [r for r in mine if r.clean]
    spread = {k: list(span(getattr(r, k) for r in mine))
              for k in ("jobs_per_s", "server_us_per_job", "commands_per_job")}
    return replace(
        entry, server_version=mine[0].server_version,
        scripts_per_job=median(r.scripts_per_job for r in mine),
        transactions_per_job=median(r.transactions_per_job for r in mine),
        enqueue=_phase([r.enqueue for r in mine]), drain=_phase([r.drain for r in mine]),
        memory=MemoryEntry(bytes_per_pending_job=median(r.bytes_per_pending_job for r in mine),
                           residual_bytes_after_drain=median(r.residual_bytes for r in mine),
                           keys_after_drain=median(r.keys_after for r in mine),
                           key_sample_after_drain=tuple(mine[-1].key_sample)),
        # Intervals over the clean runs alone: a run that lost or kept jobs measured something else.
        ci={k: IntervalEntry.from_record(interval([float(getattr(r, k)) for r in clean])) for k in FIGURES_WITH_CI},
        spread={**spread, "drain_jobs_per_s": list(span(r.drain.jobs_per_s for r in mine))},
        ran=tuple(r.ran for r in mine), leftovers=mine[-1].leftovers,
        **_medians(mine))


def _medians(runs: list[PeerRun]) -> dict[str, Any]:
    """The medians over the runs of the figures that carry an interval."""
    return {k: median(getattr(r, k) for r in runs) for k in FIGURES_WITH_CI}


TOTALS = ("jobs_per_s", "server_us_per_job", "script_us_per_job", "commands_per_job", "round_trips_per_job",
          "scripts_per_job", "transactions_per_job", "client_us_per_job", "bytes_per_pending_job", "residual_bytes")


def tidy_rows(runs: list[PeerRun]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for r in runs:
        base = {"server": r.server, "server_version": r.server_version, "queue": r.queue, "mode": r.mode,
                "trial": r.trial, "rounds": r.rounds, "clean": r.clean, "jobs": r.jobs, "consumers": r.consumers}
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
    """One row per queue, mode, server and figure: the ratio to the baseline, its interval, level and verdict,
    with the rounds it pooled and the queue's failed rounds; the headline's verdicts first."""
    rows = [_ratio_row(record, (h.server, record.headline.queue, h.mode, "server_us_per_job"), h.verdict,
                       (h.rounds, h.attempted, h.failed))
            for h in record.headline.verdicts]
    for e in record.queues:
        for metric, v in e.vs_baseline.items():
            rows.append(_ratio_row(record, (e.server, e.queue, e.mode, metric), v,
                                   (INTERLEAVED, e.attempted, e.failed)))
    return [row for row in rows if row]


def _ratio_row(record: PeersRecord, where: tuple[str, str, str, str], v: RatioVerdictEntry,
               rounds: tuple[str, int, int]) -> dict[str, Any]:
    """A judged verdict as a row (a failed one without a ratio); nothing for a figure no trial pair judged."""
    if v.ratio is None and v.verdict != FAILED:
        return {}
    low, high = v.ci or (None, None)
    server, queue, mode, metric = where
    kind, attempted, failed = rounds
    return {"server": server, "queue": queue, "mode": mode, "metric": metric, "baseline": record.baseline,
            "rounds": kind, "ratio": v.ratio, "ci_low": low, "ci_high": high, "level": v.level, "n": v.n,
            "attempted": attempted, "failed": failed, "verdict": v.text, "method": v.method}


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
