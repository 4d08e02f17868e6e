"""Results on disk: what runners write once and reports and notebooks read.

A run is a folder `results/<run-id>/` holding

    meta.json      the context (echomq_bench.records.meta.collect)
    summary.json   the headline figures of the run
    *.csv          tidy tables: one row per observation, a `metric` and a
                   `value` column plus the columns that name the condition
                   (build, trial, consumers, lease_ms, ...)
    *.png, *.hgrm  charts and histograms that belong to the run

`load(dir)` gives them back as a `Run` with pandas DataFrames.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from echomq.errors import EchoMQError

__all__ = ["RESULTS_DIR", "new_run_dir", "write_json", "write_tidy", "Run", "load", "load_many", "ResultsError"]

RESULTS_DIR = Path(os.environ.get("ECHOMQ_RESULTS_DIR", "results"))
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class ResultsError(EchoMQError, ValueError):
    """A results folder that cannot be read; the message says which and why."""

    code = "EMQRESULTS"


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


def write_json(path: Path, data: Mapping[str, Any]) -> Path:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)  # readers never see half a file
    return path


def write_tidy(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """A tidy CSV; columns are the union of the rows' keys, metric and value last."""
    rows = list(rows)
    cols: list[str] = []
    for row in rows:
        cols.extend(k for k in row if k not in cols)
    for last in ("metric", "value", "unit"):
        if last in cols:
            cols.remove(last)
            cols.append(last)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=cols)
        writer.writeheader()
        writer.writerows(rows)
    return path


@dataclass
class Run:
    path: Path
    meta: dict[str, Any]
    summary: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.path.name

    def table(self, name: str) -> pd.DataFrame:
        if name not in self.tables:
            raise ResultsError(f"{self.path}: no table {name!r}; have {sorted(self.tables)}")
        return self.tables[name]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    return data


def load(path: Path | str) -> Run:
    """One run folder (a `latest` link is followed) as meta, summary and tables."""
    path = Path(path)
    if not path.is_dir():
        raise ResultsError(f"{path}: not a results folder (no such directory)")
    path = path.resolve()
    if not (path / "meta.json").is_file():
        raise ResultsError(f"{path}: not a results folder (no meta.json)")
    meta = _read_json(path / "meta.json")
    summary = _read_json(path / "summary.json") if (path / "summary.json").is_file() else {}
    tables = {}
    for csv_path in sorted(path.glob("*.csv")):
        try:
            tables[csv_path.stem] = pd.read_csv(csv_path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ResultsError(f"{csv_path}: not a readable CSV ({exc})") from None
    return Run(path, meta, summary, tables)


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
