"""The gate's baseline read from the results history (`gate --baseline history`).

A gate run records its figures and the scripts it measured (record schema
3), so the latest gate run of a build on this machine fingerprint can be
the next gate's baseline without a baseline file: the history row names
the run's folder, and the baseline is read from that folder's record. Only
a run that wrote a baseline (--update) or named no regression qualifies; a
run recorded before gate runs kept their figures and scripts is passed over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from echomq_bench.microbench.baseline import SCHEMA, BaselineError
from echomq_bench.records.fingerprint import fingerprint_id
from echomq_bench.records.kinds.gate import GateRecord
from echomq_bench.records.history import gate_builds, gate_runs, history_path
from echomq_bench.records.record import ResultsError, read_record

__all__ = ["HISTORY", "UPDATE_WITH_HISTORY", "history_baseline", "baseline_of_run", "missing_from_history"]

HISTORY = "history"   # the word --baseline takes for the results history (a folder of that name: ./history)
UPDATE_WITH_HISTORY = ("--update writes a baseline file, and with --baseline history every passing gate run is a "
                       "baseline once recorded: drop --update, or name a folder to write to")


def baseline_of_run(run_dir: Path, build: str) -> dict[str, Any]:
    """A baseline, as a gate-<build>.json holds one, from a recorded gate run."""
    record = read_record(run_dir)
    entry = GateRecord.from_record(record.summary).of(build) if record.kind == "gate" else None
    scripts = {str(row["verb"]): {"file": row["file"], "numkeys": int(row["numkeys"]), "text": row["text"]}
               for row in record.tables.get("scripts", ()) if row.get("build") == build}
    if entry is None or not entry.figures or not scripts:
        raise BaselineError(f"{run_dir}: holds no figures and scripts of {build} (a gate record of schema 3 or "
                            f"later does; this is a {record.kind} record of schema {record.schema})")
    described = [s for s in record.meta.get("servers") or () if isinstance(s, Mapping) and s.get("name") == build]
    return {"schema": SCHEMA, "build": build, "version": entry.version,
            "created_utc": record.meta.get("created_utc"), "git": dict(record.meta.get("git") or {}),
            "fingerprint": dict(described[0].get("fingerprint") or {}) if described else {},
            "figures": {name: dict(f) for name, f in entry.figures.items()}, "scripts": scripts,
            "history_run": str(run_dir)}


def history_baseline(build: str, here: Mapping[str, Any], path: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """The newest qualifying gate run of `build` on the fingerprint `here`: its folder and its baseline."""
    where = path or history_path()
    machine = fingerprint_id(here)
    passed_over = []
    for run in gate_runs(build, machine, where):
        try:
            return run["run_dir"], baseline_of_run(run["run_dir"], build)
        except (ResultsError, BaselineError) as exc:
            passed_over.append(str(exc))
    why = f"; passed over: {'; '.join(passed_over)}" if passed_over else ""
    raise BaselineError(f"no gate run of {build} on this machine fingerprint ({machine}) in the results history at "
                        f"{where} that wrote a baseline or named no regression{why}; record one with: echomq-bench "
                        "gate --count time --update")


def missing_from_history(builds: list[str], path: Path | None = None) -> str | None:
    """Before any server starts: the problem when the history holds no gate run of some build, else None."""
    where = path or history_path()
    have = gate_builds(where)
    lacking = [b for b in builds if b not in have]
    if not lacking:
        return None
    return (f"the results history at {where} holds no gate run of {', '.join(lacking)}"
            f"{' (it has ' + ', '.join(sorted(have)) + ')' if have else ''}; record one with: echomq-bench gate "
            "--count time --update")
