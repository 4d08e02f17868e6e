"""Count baselines: one per server binary, valid on any machine that runs it.

A baseline is `counts/count-<product>-<key>.json` under the baselines folder,
where the key names the binary and its C library (identity.BinaryIdentity)
and the product is what the binary says it is (redis, valkey). A build's
name plays no part: `redis` and `redis7.0` that reach one binary share its
baseline.
It holds, per verb, the instructions per call of PASSES fresh servers, their
mean and standard deviation, and each server command's instructions per
call; beside them the script SHAs, the valgrind version and, for the
reader only, the machine it was recorded on.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
from pathlib import Path
from typing import Any, Sequence

from echomq_bench.counts.identity import BinaryIdentity
from echomq_bench.errors import BenchError
from echomq_bench.counts.measure import CountRun
from echomq_bench.microbench.baseline import read_baseline_file

__all__ = ["SCHEMA", "PASSES", "MIN_PASSES", "CountBaselineError", "count_baseline_path", "load_count_baseline",
           "baseline_data", "write_count_baseline"]

SCHEMA = "echomq-count-baseline/1"
PASSES = 10      # fresh servers a baseline pools: the spread the allowance is drawn from
MIN_PASSES = 5   # fewer cannot estimate a spread the allowance can rest on


class CountBaselineError(BenchError, ValueError):
    """A count baseline that is missing, unreadable or of another binary; the message says which."""


def count_baseline_path(base: Path | str | None, binary: BinaryIdentity) -> Path:
    """A .json path is used as given; a folder holds counts/count-<product>-<key>.json."""
    from echomq_bench.microbench.baseline import default_baseline_dir

    path = Path(base) if base is not None else default_baseline_dir()
    if path.suffix == ".json":
        return path
    product = binary.version.split(" ", 1)[0] or "server"
    return path / "counts" / f"count-{re.sub(r'[^A-Za-z0-9_.-]+', '-', product)}-{binary.key}.json"


def load_count_baseline(path: Path, binary: BinaryIdentity) -> dict[str, Any]:
    """The baseline at `path`, checked to be a count baseline of this very binary."""
    if not path.is_file():
        raise CountBaselineError(
            f"no count baseline for {binary.version} (binary sha256 {binary.sha256[:12]}, {binary.libc}) at {path}; "
            f"write one with: echomq-bench gate --count instructions --update")
    data = read_baseline_file(path, SCHEMA, CountBaselineError, readable="count baseline",
                              kind="count baseline")
    theirs = BinaryIdentity.from_dict(data.get("binary") or {})
    if theirs.key != binary.key:
        raise CountBaselineError(
            f"{path}: recorded with {theirs.version} (sha256 {theirs.sha256[:12]}, {theirs.libc}); this server is "
            f"{binary.version} (sha256 {binary.sha256[:12]}, {binary.libc}): counts of another binary do not compare")
    return data


def _figure(verb: str, runs: Sequence[CountRun]) -> dict[str, Any]:
    per_run = [r.verbs[verb].instructions for r in runs]
    commands = sorted({c for r in runs for c in r.verbs[verb].commands})
    return {"instructions": round(statistics.fmean(per_run), 1), "sd": round(statistics.stdev(per_run), 2),
            "min": round(min(per_run), 1), "max": round(max(per_run), 1),
            "runs": [round(x, 1) for x in per_run],
            "lua": round(statistics.fmean(r.verbs[verb].lua for r in runs), 1),
            "commands": {c: {"calls": round(statistics.fmean(r.verbs[verb].commands.get(c, (0.0, 0.0))[0]
                                                             for r in runs), 3),
                             "instructions": round(statistics.fmean(r.verbs[verb].commands.get(c, (0.0, 0.0))[1]
                                                                    for r in runs), 1)}
                         for c in commands}}


def baseline_data(runs: Sequence[CountRun], machine: dict[str, Any], git: dict[str, Any]) -> dict[str, Any]:
    """What a baseline file holds, from PASSES runs of one binary."""
    if len(runs) < MIN_PASSES:
        raise ValueError(f"a count baseline needs at least {MIN_PASSES} runs, got {len(runs)}")
    first = runs[0]
    if any(r.binary.key != first.binary.key or r.scripts != first.scripts for r in runs):
        raise ValueError("a count baseline pools runs of one binary and one set of scripts")
    return {"schema": SCHEMA, "build": first.build, "binary": first.binary.to_dict(), "valgrind": first.valgrind,
            "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "git": git,
            "recorded_on": machine, "passes": len(runs), "settings": dict(first.settings),
            "scripts": dict(first.scripts), "figures": {verb: _figure(verb, runs) for verb in first.verbs}}


def write_count_baseline(path: Path, data: dict[str, Any]) -> None:
    from echomq_bench.records.record import write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)
