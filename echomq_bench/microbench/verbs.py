"""Server µs per verb on each build: the main job's build matrix.

The gate's per-verb microbenchmark (echomq_bench.microbench.runner), on the
verbs of one job's life and the two pumps moving 100 jobs, with no
baseline: each verb from its prepared state, its server time from
commandstats on the server's own clock, `typical` (the faster half's mean)
pooled over every round. Beside each figure is its ratio to the reference
of its weight measured in the same batches (the no-op script, or the
100-row read), which is what moves less when the machine is busier; the
builds run one after another, so the absolute µs of two builds are as
comparable as the machine was steady between them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from echomq_bench.microbench.runner import QUICK, MeasureOptions, Settings, measure
from echomq_bench.progress import ProgressFn, prefixed, silent
from echomq_bench.records.kinds.verbs import VerbFigures, VerbsBuild

__all__ = ["MATRIX_CASES", "VERB_LABELS", "matrix_settings", "measure_builds"]

# The verbs a job's life takes, then the pumps at their default cap.
MATRIX_CASES = ("enqueue", "claim", "complete", "retry_schedule", "promote_100", "reap_100")
VERB_LABELS = {"enqueue": "enqueue", "claim": "claim", "complete": "complete", "retry_schedule": "retry",
               "promote_100": "promote(100)", "reap_100": "reap(100)"}


def matrix_settings(rounds: int) -> Settings:
    """The quick gate's batches, `rounds` of them."""
    if rounds < 2:
        raise ValueError(f"the verb figures need at least 2 rounds for their spread, got {rounds}")
    return replace(QUICK, rounds=rounds)


def measure_builds(servers: Iterable[Any], settings: Settings,
                   progress: ProgressFn = silent) -> tuple[list[VerbsBuild], list[dict[str, Any]]]:
    """Each server in turn: its summary entry (per verb: server µs, calls,
    ratio to the reference and its standard error) and its tidy rows."""
    builds: list[VerbsBuild] = []
    rows: list[dict[str, Any]] = []
    for server in servers:
        version = server.version()
        name: str = server.name

        m = measure(server.client(), MeasureOptions(server=name, version=version, settings=settings,
                                                    cases=MATRIX_CASES, progress=prefixed(progress, f"{name}:")))
        progress(f"{server.name}: {len(MATRIX_CASES)} verbs, {settings.rounds} rounds in {m.wall_s:.1f} s")
        figures = m.figures()
        builds.append(VerbsBuild(
            build=server.name, version=version, server_utilization=round(m.server_utilization, 4),
            client_utilization=round(m.client_utilization, 4),
            verbs={case: VerbFigures(server_us=round(f.server_us, 3), calls=f.calls, reference=f.reference,
                                     server_ratio=round(f.server_ratio, 5),
                                     server_ratio_se=round(f.server_ratio_se, 5))
                   for case, f in figures.items() if case in MATRIX_CASES}))
        rows.extend(m.tidy_rows(version=version))
    return builds, rows
