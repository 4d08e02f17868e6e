"""Results on disk: what runners write once and reports and notebooks read.

A run is a folder `results/<run-id>/` holding

    meta.json      the context (echomq_bench.records.meta.collect)
    summary.json   the headline figures of the run, `kind` and `schema` first
    *.csv          tidy tables: one row per observation, a `metric` and a
                   `value` column plus the columns that name the condition
                   (build, trial, consumers, lease_ms, ...)
    *.png, *.hgrm  charts and histograms that belong to the run

Runners write them once through `write_record` (run -> frozen record ->
files -> history row -> report: the history row is made from the record
just written, so the history never holds a figure the folder does not);
`load(dir)` gives them back as a `Run` with pandas DataFrames, and
`read_record(dir)` as the frozen `Record` that was written: both from the
one parse of the folder, `echomq_bench.records.record.read_folder`.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Iterable

from echomq_bench.records.history import record_written
from echomq_bench.records.record import (KINDS, RESULTS_DIR, Record, ResultsError, Run, read_folder, read_record,
                                         write_json, write_tidy)

__all__ = ["RESULTS_DIR", "new_run_dir", "write_json", "write_tidy", "Run", "load", "load_many", "ResultsError",
           "Record", "write_record", "read_record", "KINDS"]

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def new_run_dir(kind: str, out: Path | str | None = None) -> Path:
    """A fresh folder for one run: OUT when given, else results/<utc-time>-<kind>."""
    if out is not None:
        path = Path(out)
    else:
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = RESULTS_DIR / f"{stamp}-{_SAFE.sub('-', kind)}"
        n = 1
        while path.exists():
            n += 1
            path = RESULTS_DIR / f"{stamp}-{_SAFE.sub('-', kind)}-{n}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_record(run_dir: Path | str, record: Record) -> Path:
    """The record's files in `run_dir` (made if missing); tables first and
    summary.json last, so a folder with a summary is a finished run; then
    the run's headline figures into the results history."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if record.meta:
        write_json(run_dir / "meta.json", record.meta)
    for name, rows in record.tables.items():
        write_tidy(run_dir / f"{name}.csv", rows)
    write_json(run_dir / "summary.json", record.summary_json())
    record_written(run_dir, record)
    return run_dir


def load(path: Path | str) -> Run:
    """One run folder (a `latest` link is followed) as meta, summary and tables."""
    path = Path(path)
    if not path.is_dir():
        raise ResultsError(f"{path}: not a results folder (no such directory)")
    path = path.resolve()
    if not (path / "meta.json").is_file():
        raise ResultsError(f"{path}: not a results folder (no meta.json)")
    return read_folder(path)


def load_many(paths: Iterable[Path | str]) -> list[Run]:
    """Each folder that is a run, and each run one level inside it (the main
    job keeps its parts there; a folder of runs holds nothing else)."""
    runs = []
    for p in map(Path, paths):
        if not p.is_dir():
            raise ResultsError(f"{p}: not a results folder (no such directory)")
        inner = [c for c in sorted(p.iterdir()) if c.is_dir() and (c / "meta.json").is_file()]
        if (p / "meta.json").is_file():
            runs.append(load(p))
        elif not inner:
            raise ResultsError(f"{p}: holds no results folder (no meta.json in it or below it)")
        runs.extend(load(c) for c in inner)
    return runs
