"""The results history: every run's headline figures in one tidy table, so a
number can be followed across commits, builds and machines.

One SQLite file (the standard library's sqlite3; pandas reads it back),
by default results/history.sqlite, else $ECHOMQ_HISTORY (`off` keeps no
history). Its one table, `figures`, holds a row per run, build and metric:
the run's folder, kind and schema, when it ran, its commit (and a label,
when ECHOMQ_COMMIT_LABEL named the revision), the machine fingerprint of
the build (id and fields), the build's name and version, the metric, its
value, unit and which way is better, and the run's settings as JSON.

Rows come from the frozen record only, after its files are written
(`record.write_record` calls `record_written`): run -> record -> files ->
history row -> report. A run is known by a hash of its meta.json and
summary.json and by its folder: recording it again, or re-indexing its
folder, replaces its rows instead of adding more.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from echomq_bench.records.fingerprint import FIELDS, fingerprint_id
from echomq_bench.records.headlines import Headline, headlines
from echomq_bench.records.record import RESULTS_DIR
from echomq_bench.records.record import Record, ResultsError, read_record

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["HISTORY_ENV", "COLUMNS", "HistoryError", "history_path", "rows_of", "record_run", "record_written",
           "reindex", "Reindexed", "read_history", "gate_builds", "gate_runs", "ratio_runs", "server_fingerprint_id"]

HISTORY_ENV = "ECHOMQ_HISTORY"
HISTORY_FILE = "history.sqlite"
TABLE = "figures"
LAYOUT = 1  # PRAGMA user_version: the table's layout, for a later one to migrate from
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_key", "TEXT"), ("run_dir", "TEXT"), ("kind", "TEXT"), ("schema", "INTEGER"),
    ("created_utc", "TEXT"), ("git_commit", "TEXT"), ("dirty", "INTEGER"), ("commit_label", "TEXT"),
    ("revision", "TEXT"),
    ("fingerprint_id", "TEXT"), *((f, "INTEGER" if f == "cores" else "TEXT") for f in FIELDS),
    ("build", "TEXT"), ("version", "TEXT"),
    ("metric", "TEXT"), ("value", "REAL"), ("unit", "TEXT"), ("better", "TEXT"),
    ("settings", "TEXT"))
NAMES = tuple(name for name, _ in COLUMNS)


class HistoryError(ResultsError):
    """A history that cannot be read or is empty; the message names the file and why."""


def history_path() -> Path | None:
    """Where runs are recorded: $ECHOMQ_HISTORY (None when it is `off`), else results/history.sqlite."""
    chosen = os.environ.get(HISTORY_ENV, "").strip()
    if chosen.lower() == "off":
        return None
    return Path(chosen) if chosen else RESULTS_DIR / HISTORY_FILE


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30)  # two runs ending at once wait for each other
    columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
    with conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ({columns})")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_series ON {TABLE} (kind, metric, build, fingerprint_id)")
        conn.execute(f"PRAGMA user_version = {LAYOUT}")
    return conn


def _run_key(run_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in ("meta.json", "summary.json"):
        path = run_dir / name
        digest.update(path.read_bytes() if path.is_file() else b"")
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _fingerprint(meta: Mapping[str, Any], h: Headline) -> dict[str, Any]:
    """The build's fingerprint as meta.json recorded it; for a run recorded
    before runs kept one, the fields its meta has (no CPU flags, no
    allocator), which is a fingerprint of its own."""
    for server in meta.get("servers") or ():
        if isinstance(server, Mapping) and server.get("name") == h.build and isinstance(
                server.get("fingerprint"), Mapping):
            return {f: server["fingerprint"].get(f) for f in FIELDS}
    machine = meta.get("machine") or {}
    return {"cpu_model": machine.get("cpu_model"), "cpu_flags_sha256": None, "cores": machine.get("cpu_count"),
            "server_version": h.version, "allocator": None}


def server_fingerprint_id(server: Mapping[str, Any]) -> str | None:
    """The fingerprint id a run's rows of this server will carry (meta.describe_server's entry);
    None when the entry holds no fingerprint."""
    fp = server.get("fingerprint")
    return fingerprint_id({f: fp.get(f) for f in FIELDS}) if isinstance(fp, Mapping) else None


def _revision(git: Mapping[str, Any]) -> str:
    if git.get("label"):
        return str(git["label"])
    commit = git.get("commit")
    return f"{commit[:10]}{'+dirty' if git.get('dirty') else ''}" if commit else "unknown"


def rows_of(run_dir: Path | str, record: Record) -> list[dict[str, Any]]:
    """The history rows of one run: one per build and headline figure."""
    run_dir = Path(run_dir).resolve()
    meta = record.meta
    git = meta.get("git") or {}
    run = {"run_key": _run_key(run_dir), "run_dir": str(run_dir), "kind": record.kind, "schema": record.schema,
           "created_utc": meta.get("created_utc"), "git_commit": git.get("commit"),
           "dirty": None if git.get("dirty") is None else int(bool(git.get("dirty"))),
           "commit_label": git.get("label"), "revision": _revision(git),
           "settings": json.dumps(meta.get("settings") or {}, sort_keys=True, default=str)}
    rows = []
    for h in headlines(record):
        fp = _fingerprint(meta, h)
        rows.append({**run, "fingerprint_id": fingerprint_id(fp), **fp, "build": h.build, "version": h.version,
                     "metric": h.metric, "value": h.value, "unit": h.unit, "better": h.better})
    return rows


def _store(conn: sqlite3.Connection, run_dir: Path, record: Record) -> int:
    rows = rows_of(run_dir, record)
    key, where = _run_key(run_dir.resolve()), str(run_dir.resolve())
    marks = ", ".join("?" for _ in NAMES)
    with conn:
        # A folder holds one run: what it held before (an --out reused) goes with it.
        conn.execute(f"DELETE FROM {TABLE} WHERE run_key = ? OR run_dir = ?", (key, where))
        conn.executemany(f"INSERT INTO {TABLE} ({', '.join(NAMES)}) VALUES ({marks})",
                         [tuple(row.get(n) for n in NAMES) for row in rows])
    return len(rows)


def record_run(run_dir: Path | str, record: Record, path: Path | None = None) -> int:
    """The run's rows in the history at `path` (default `history_path()`), replacing any it had; how many."""
    where = path or history_path()
    if where is None:
        return 0
    conn = _connect(where)
    try:
        return _store(conn, Path(run_dir), record)
    finally:
        conn.close()


def record_written(run_dir: Path, record: Record) -> None:
    """The hook `write_record` calls once a run's files are on disk. The run
    is kept whatever happens here: a history that cannot be written is
    named on stderr with the way to add the run later."""
    try:
        record_run(run_dir, record)
    except (sqlite3.Error, OSError) as exc:
        print(f"echomq-bench: warning: the results history was not updated ({exc}); the run is in {run_dir}; "
              f"add it with: echomq-bench history --reindex {run_dir}", file=sys.stderr)


@dataclass(frozen=True)
class Reindexed:
    runs: int
    rows: int
    skipped: list[str] = field(default_factory=list)


def _run_folders(top: Path) -> list[Path]:
    if not top.is_dir():
        raise HistoryError(f"{top}: not a results folder (no such directory)")
    found = sorted({p.parent.resolve() for p in top.rglob("summary.json")} |
                   ({top.resolve()} if (top / "summary.json").is_file() else set()))
    if not found:
        raise HistoryError(f"{top}: holds no results folder (no summary.json in it or below it)")
    return found


def reindex(dirs: Iterable[Path | str], path: Path | None = None) -> Reindexed:
    """Every run folder in or below `dirs` into the history, each replacing
    its own rows: indexing a folder twice leaves the history as once. A
    folder that is not a readable run is skipped and named."""
    where = path or history_path()
    if where is None:
        raise HistoryError(f"{HISTORY_ENV}=off: no history is kept, so there is none to index into")
    folders = [f for d in dirs for f in _run_folders(Path(d))]  # every DIR checked before anything is written
    conn = _connect(where)
    runs = rows = 0
    skipped = []
    try:
        for folder in folders:
            try:
                record = read_record(folder)
            except ResultsError as exc:
                skipped.append(str(exc))
                continue
            rows += _store(conn, folder, record)
            runs += 1
    finally:
        conn.close()
    return Reindexed(runs, rows, skipped)


def read_history(path: Path | None = None) -> pd.DataFrame:
    """The whole table as a DataFrame, oldest run first; a missing or empty history is refused by name."""
    import pandas as pd

    where = path or history_path()
    if where is None:
        raise HistoryError(f"{HISTORY_ENV}=off: no history is kept")
    if not where.is_file():
        raise HistoryError(f"no results history at {where}: run a command that measures, or build it from "
                           "results folders with: echomq-bench history --reindex results")
    conn = sqlite3.connect(where)
    try:
        frame = pd.read_sql_query(f"SELECT * FROM {TABLE} ORDER BY created_utc, run_dir, build, metric", conn)
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise HistoryError(f"{where}: not a results history ({exc})") from None
    finally:
        conn.close()
    if frame.empty:
        raise HistoryError(f"the results history at {where} is empty (no run recorded)")
    return frame


def _query(path: Path | None, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows `sql` selects; none when there is no history yet."""
    if path is None or not path.is_file():
        return []
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.Error as exc:
        raise HistoryError(f"{path}: not a results history ({exc})") from None
    finally:
        conn.close()


def gate_builds(path: Path | None = None) -> set[str]:
    """The builds the history holds a gate run of."""
    where = path or history_path()
    return {b for (b,) in _query(where, f"SELECT DISTINCT build FROM {TABLE} WHERE kind = 'gate'")}


def gate_runs(build: str, fingerprint: str, path: Path | None = None) -> list[dict[str, Any]]:
    """The gate runs of `build` on `fingerprint` that may serve as its
    baseline, newest first: each either wrote a baseline (--update) or named
    no regression for the build. A run that failed never becomes the
    baseline, or a regression would hide itself by being recorded."""
    found = _query(path or history_path(),
                   f"SELECT run_dir, created_utc, revision, value, settings FROM {TABLE} WHERE kind = 'gate' "
                   "AND build = ? AND fingerprint_id = ? AND metric = 'gate.regressions' "
                   "ORDER BY created_utc DESC, rowid DESC", (build, fingerprint))
    out = []
    for run_dir, created, revision, regressions, settings in found:
        updated = bool((json.loads(settings or "{}").get("gate") or {}).get("update"))
        if updated or regressions == 0:
            out.append({"run_dir": Path(run_dir), "created_utc": created, "revision": revision, "updated": updated})
    return out


def ratio_runs(ratio_metric: str, se_metric: str, build: str, fingerprint: str, *, path: Path | None = None,
               limit: int = 10) -> list[tuple[float, float]]:
    """(log ratio, its standard error from the run's trials) of the latest `limit` runs of a ratio
    series on one fingerprint, newest first; none without a history."""
    rows = _query(path or history_path(),
                  f"SELECT r.value, s.value FROM {TABLE} r JOIN {TABLE} s ON s.run_key = r.run_key "
                  f"AND s.build = r.build AND s.metric = ? WHERE r.metric = ? AND r.build = ? "
                  f"AND r.fingerprint_id = ? AND r.value > 0 ORDER BY r.created_utc DESC LIMIT ?",
                  (se_metric, ratio_metric, build, fingerprint, limit))
    return [(math.log(float(ratio)), float(se)) for ratio, se in rows if se is not None and float(se) > 0]
