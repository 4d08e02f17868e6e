"""The one shape a run leaves behind, and the one reader of it.

A runner builds a frozen `Record` once, when the run is over, and hands it
to `echomq_bench.records.files.write_record`; reports and notebooks read it
back with `read_record`, or as a `Run` of pandas tables with
`echomq_bench.records.files.load`. Both are made from one parse of the
folder, `read_folder`. Nothing
patches a record after it is built: `dataclasses.replace` makes a new one.

On disk, in the run folder:

    summary.json   {"kind": ..., "schema": ..., <the summary's own keys>}
    <table>.csv    one tidy CSV per table (`write_tidy`)
    meta.json      the run's context, when the record carries it

A table with no rows is not kept (it has no columns to name). A CSV cell
left empty reads back as an absent key, so a row written without a column
comes back without it; numbers and booleans come back as numbers
and booleans. The summary is JSON: tuples come back as lists.

This module does not import pandas at import time: `echomq-bench check`
and the runners load it without paying for pandas.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from echomq_bench.errors import BenchError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RESULTS_DIR", "SCHEMA", "OLDEST_READ", "KINDS", "CONTAINER", "Record", "Run", "ResultsError",
           "check_schema", "read_folder", "read_record", "write_json", "write_tidy", "read_json"]

# What changed at each number; a reader keeps reading every older one, except
# where OLDEST_READ names a kind's first readable number.
#   0  folders written before records declared a schema
#   1  summary.json declares kind and schema
#   2  reapcost: every row names its form ("bare", "rows"), and the summary
#      holds a build entry per form, the forms side by side and the ratio
#      target per form; a reapcost record before 2 is refused
#   3  gate: each build's summary entry holds its figures, and the scripts
#      it measured are a table (build, verb, file, numkeys, text), so a gate
#      run recorded in the results history can serve as a later gate's
#      baseline; a gate record before 3 cannot
#   4  compare: each verdict once, in `verdicts` or --slo's `verdict_detail`; an older one's flat copies go unread
SCHEMA = 4
OLDEST_READ = {"reapcost": 2}
# Every kind of record, in the order the report shows them (the four that
# answer the main job's questions in the order they are asked), written once:
# the report finds each kind's renderer by name (echomq_bench.report.kinds)
# and the results history its headlines and typed record (records.kinds).
# "run" is the main job's folder that holds one folder per part.
KINDS = ("run", "check", "verbs", "compare", "lease", "reapcost", "consumers", "capacity", "faults", "peers", "gate",
         "counts", "failover", "reshard", "locust")
CONTAINER = "run"
# Where results go when a command is given no --out.
RESULTS_DIR = Path(os.environ.get("ECHOMQ_RESULTS_DIR", "results"))
_HEAD = ("kind", "schema")

# Runners hand in lists; the record keeps each table as a tuple of read-only rows.
Rows = Sequence[Mapping[str, Any]]


class ResultsError(BenchError, ValueError):
    """A results folder that cannot be read; the message says which and why."""


@dataclass(frozen=True)
class Record:
    """One run's results: what kind of run, its headline figures (`summary`,
    JSON-shaped), its tidy tables by name, and its context (`meta`)."""

    kind: str
    summary: Mapping[str, Any]
    tables: Mapping[str, Rows] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        if not self.kind or not isinstance(self.kind, str):
            raise ValueError(f"a record needs a kind, got {self.kind!r}")
        clash = [k for k in _HEAD if k in self.summary]
        if clash:
            raise ValueError(f"summary keys {clash} are the record's own; pass them as fields")
        # Read-only views over private copies: the caller's dicts stay theirs.
        object.__setattr__(self, "summary", MappingProxyType(dict(self.summary)))
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))
        # A table with no rows has no columns to name, so it is not kept.
        object.__setattr__(self, "tables", MappingProxyType(
            {name: tuple(MappingProxyType(dict(row)) for row in rows)
             for name, rows in self.tables.items() if rows}))

    def summary_json(self) -> dict[str, Any]:
        """summary.json as written: kind and schema first."""
        return {"kind": self.kind, "schema": self.schema, **_plain(self.summary)}


def _plain(value: Any) -> Any:
    """Read-only views back into the dicts and lists JSON writes."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def write_json(path: Path, data: Mapping[str, Any]) -> Path:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_plain(data), indent=2, sort_keys=False, default=str) + "\n")
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


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    return data


@dataclass(frozen=True)
class Run:
    """A results folder as read for pandas: its context, its summary.json as written (kind and schema
    first; empty when the folder has none) and each tidy table as a DataFrame by its name."""

    path: Path
    meta: dict[str, Any]
    summary: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def kind(self) -> str | None:
        """The kind summary.json declares (None when it declares none)."""
        kind = self.summary.get("kind")
        return kind if isinstance(kind, str) and kind else None

    @property
    def schema(self) -> int | None:
        return self.summary.get("schema")

    def table(self, name: str) -> pd.DataFrame:
        if name not in self.tables:
            raise ResultsError(f"{self.path}: no table {name!r}; have {sorted(self.tables)}")
        return self.tables[name]


def check_schema(run_dir: Path, kind: str | None, schema: object) -> None:
    """Refuse a record this version cannot read: a newer schema than it knows, or
    one older than its kind's first readable number (OLDEST_READ)."""
    if not isinstance(schema, int) or schema > SCHEMA:
        raise ResultsError(f"{run_dir}: summary.json has schema {schema!r}; this version reads schema {SCHEMA} "
                           "and older")
    oldest = OLDEST_READ.get(kind or "", 0)
    if schema < oldest:
        raise ResultsError(f"{run_dir}: a {kind} record of schema {schema} is older than this version reads "
                           f"(schema {oldest} on); run `echomq-bench {kind}` again")


def read_folder(run_dir: Path) -> Run:
    """The one parse of a results folder: summary.json (its schema checked; a folder written before
    summaries declared one is schema 0), meta.json and every CSV, each file as it lies; what a folder
    lacks is left empty, for the caller to require."""
    import pandas as pd

    summary = read_json(run_dir / "summary.json") if (run_dir / "summary.json").is_file() else {}
    kind = summary.get("kind")
    check_schema(run_dir, kind if isinstance(kind, str) else None, summary.get("schema", 0))
    meta = read_json(run_dir / "meta.json") if (run_dir / "meta.json").is_file() else {}
    tables = {}
    for path in sorted(run_dir.glob("*.csv")):
        try:
            tables[path.stem] = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ResultsError(f"{path}: not a readable CSV ({exc})") from None
    return Run(run_dir, meta, summary, tables)


def _cell(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value  # numpy scalar -> Python


def _rows(frame: pd.DataFrame) -> Rows:
    """A table's rows as dicts of Python values; an empty cell is an absent key."""
    return tuple({k: _cell(v) for k, v in raw.items() if not (isinstance(v, float) and math.isnan(v))}
                 for raw in frame.to_dict("records"))


def read_record(run_dir: Path | str) -> Record:
    """The record `files.write_record` wrote. A folder whose summary.json has no
    kind is refused with the kinds this version writes, and one written by
    a newer schema than this version knows is refused by number."""
    run_dir = Path(run_dir)
    if not (run_dir / "summary.json").is_file():
        raise ResultsError(f"{run_dir}: not a finished run (no summary.json)")
    run = read_folder(run_dir)
    data = dict(run.summary)
    kind = data.pop("kind", None)
    schema = data.pop("schema", 0)  # folders written before records declared a schema
    if not kind:
        raise ResultsError(f"{run_dir}: summary.json declares no kind; known kinds: {', '.join(KINDS)}")
    return Record(kind=kind, summary=data, tables={name: _rows(frame) for name, frame in run.tables.items()},
                  meta=run.meta, schema=schema)
