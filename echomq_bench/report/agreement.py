"""The report's agreement table: compare records of the same builds made in
different interleave modes, each mode's headline ratio with its interval,
and whether the intervals all overlap (`echomq_bench.measurement.agreement`).

Records belong together when they name the same builds with the same
versions, specs and scripts in the same order. A record without a verdict
on its headline (written before compare judged by verdicts) takes no part.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pandas as pd

from echomq_bench.capacity.compare_result import INTERLEAVE_TEXT, METRICS
from echomq_bench.measurement.agreement import ModeEstimate, agreement, estimate_of, rows
from echomq_bench.records.files import Run
from echomq_bench.records.kinds.compare import CompareRecord
from echomq_bench.report.context import builds, commit, machine
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table

__all__ = ["agreement_section", "agreement_groups", "estimate_in"]

MODES = tuple(INTERLEAVE_TEXT)   # together, slot, trial: the table's row order


def _record(run: Run) -> CompareRecord:
    return CompareRecord.from_record(run.summary)


def _pair_key(record: CompareRecord) -> tuple[tuple[str, str, str, str], ...]:
    return tuple((name, str(e.version), str(e.spec), str(e.scripts)) for name, e in record.builds.items())


def estimate_in(run: Run, build: str, label: str) -> ModeEstimate | None:
    """The record's headline verdict for `build` against its baseline, or None when it carries none."""
    record = _record(run)
    entry = record.builds.get(build)
    verdict = entry.verdicts.get(record.headline) if entry else None
    return None if verdict is None or verdict.ratio is None else estimate_of(label, verdict)


def _mode_of(run: Run) -> str:
    return _record(run).interleave


def agreement_groups(runs: list[Run]) -> list[list[Run]]:
    """The compare records of one set of builds, in at least two interleave
    modes, each group in mode order (together, slot, trial) then by run."""
    by_pair: dict[tuple[tuple[str, str, str, str], ...], list[Run]] = defaultdict(list)
    for run in runs:
        if run.kind == "compare" and _record(run).builds:
            by_pair[_pair_key(_record(run))].append(run)
    rank = {m: i for i, m in enumerate(MODES)}
    groups = []
    for group in by_pair.values():
        if len({_mode_of(r) for r in group}) >= 2:
            groups.append(sorted(group, key=lambda r: (rank.get(_mode_of(r), len(rank)), r.run_id)))
    return groups


def _labels(group: list[Run]) -> list[str]:
    """The mode's name; the run's beside it when a mode occurs twice."""
    modes = [_mode_of(r) for r in group]
    return [m if modes.count(m) == 1 else f"{m} ({r.run_id})" for m, r in zip(modes, group)]


def _group_blocks(group: list[Run], build: str) -> list[Block]:
    first = _record(group[0])
    base = first.baseline or "?"
    labels = _labels(group)
    found = [(r, e) for r, label in zip(group, labels) if (e := estimate_in(r, build, label)) is not None]
    if len({_mode_of(r) for r, _ in found}) < 2:
        return []
    estimates = [e for _, e in found]
    min_trials = first.min_trials
    metric = METRICS.get(first.headline, (None, False, "headline"))[2]
    table = pd.DataFrame([{**row, "run": r.run_id} for (r, _), row in zip(found, rows(estimates))])
    table = table.rename(columns={"ratio": f"{metric}, {build} / {base}"})
    runs = [f"{e.mode}: run {r.run_id}, {r.meta.get('created_utc', '?')}, commit {commit(r)}, {machine(r)}; "
            f"{INTERLEAVE_TEXT.get(_mode_of(r), _mode_of(r))}" for r, e in found]
    return [
        Para(f"{build} against {base}, the same builds compared in {len(found)} ways of sharing a trial "
             f"(compare --interleave). Each row is one compare record's headline, {metric} {build}/{base}: the "
             "geometric mean over the counted trials with its 95% t-interval on the log ratios. The modes agree "
             "when every pair of intervals overlaps; two intervals apart are a disagreement, and a mode with "
             f"fewer than {min_trials} counted trials cannot show agreement."),
        Table(table, f"{metric}, {build} / {base}, by interleave mode", id=f"agreement-{build}"),
        Para(agreement(estimates, min_trials=min_trials).line),
        Notes([f"Servers: {builds(group[0])}.", *runs]),
    ]


def agreement_section(runs: list[Run], out: Path) -> list[Block]:
    """The agreement table of each set of builds compared in two or more modes; nothing when there is none."""
    blocks: list[Block] = []
    for group in agreement_groups(runs):
        first = _record(group[0])
        for build in first.builds:
            base = first.baseline
            if build != base:
                blocks += _group_blocks(group, build)
    if not blocks:
        return []
    return [Heading("Do the interleave modes agree?", anchor="agreement"), *blocks]
