"""The one writer of a run: its record's files, then its rows in the results history.

Results flow one way: run -> frozen record -> files -> history row ->
report. Every command that measures hands its `Record` here once, when the
run is over; the history row is made from the record just written, so the
history never holds a figure the folder does not.
"""

from __future__ import annotations

from pathlib import Path

from echomq_bench.records.history import record_written
from echomq_bench.records.record import Record, write_json, write_tidy

__all__ = ["write_record"]


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
