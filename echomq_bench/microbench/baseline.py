"""The regression gate's baselines: where they live, reading and writing them, the
scripts they keep (text and SHA-1), and a deliberately slowed copy of the scripts to test the gate with.

A baseline pools UPDATE_PASSES passes, each on a fresh server process
(microbench.fresh), and keeps each figure's drift between them: a standard
deviation with passes - 1 degrees of freedom, which it states."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echomq._instrument import discover, lua_dir
from echomq_bench.errors import BenchError
from echomq_bench.records.fingerprint import fingerprint, fingerprint_id

if TYPE_CHECKING:
    from echomq_bench.microbench.figures import Measurement

__all__ = ["SCHEMA", "UPDATE_PASSES", "MIN_UPDATE_PASSES", "BaselineError", "baseline_path", "load_baseline",
           "read_baseline_file", "write_baseline", "script_texts", "script_sha1", "recorded_shas", "write_scripts",
           "slowed_copy", "shown", "pass_drift", "fingerprint", "fingerprint_id"]

SCHEMA = "echomq-gate-baseline/1"
# Fresh server processes a baseline pools, one pass each: the drift between them is a standard deviation with
# 9 degrees of freedom, whose 95% interval runs from 0.69 to 1.83 times itself (3 passes: 0.52 to 6.3 times).
UPDATE_PASSES = 10
MIN_UPDATE_PASSES = 5   # 4 degrees of freedom: 0.60 to 2.9 times itself
# The checkout's committed baselines: <checkout>/results/baselines, two folders above this package.
CHECKOUT_BASELINES = Path(__file__).resolve().parents[2] / "results" / "baselines"


class BaselineError(BenchError, ValueError):
    """A baseline that is missing or unreadable; the message says which and why."""


# -- baselines -----------------------------------------------------------------------------


def default_baseline_dir() -> Path:
    from echomq_bench.records.files import RESULTS_DIR

    return CHECKOUT_BASELINES if CHECKOUT_BASELINES.is_dir() else RESULTS_DIR / "baselines"


def baseline_path(base: Path | str | None, build: str, machine: str | None = None, *, writing: bool = False) -> Path:
    """A .json file is used for every build; a folder holds gate-<build>.json,
    per machine fingerprint in a subfolder named by `fingerprint_id` when one
    exists there (or is being written), else at the folder's top."""
    path = Path(base) if base is not None else default_baseline_dir()
    if path.suffix == ".json":
        return path
    name = f"gate-{re.sub(r'[^A-Za-z0-9_.-]+', '-', build)}.json"
    if machine is not None and (writing or (path / machine / name).is_file()):
        return path / machine / name
    return path / name


def load_baseline(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise BaselineError(f"no baseline at {path}; write one with: echomq-bench gate --count time --update "
                            f"--baseline {path.parent if path.name.startswith('gate-') else path}")
    return read_baseline_file(path, SCHEMA, BaselineError)


def read_baseline_file(path: Path, schema: str, error: type[ValueError], *, readable: str = "baseline",
                       kind: str = "gate baseline") -> dict[str, Any]:
    """A baseline file's JSON, refused with `error` unless it declares `schema` and holds figures."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise error(f"{path}: not a readable {readable} ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != schema or not isinstance(data.get("figures"), dict):
        raise error(f"{path}: not a {kind} (want schema {schema!r} with figures)")
    return data


def script_texts(folder: Path | str | None = None) -> dict[str, dict[str, Any]]:
    """Every verb's script as the server sees it (includes expanded)."""
    return {verb: {"file": src.path.name, "numkeys": src.numkeys, "text": src.text}
            for verb, src in discover(folder).items()}


def script_sha1(text: str) -> str:
    """A script's SHA-1, as EVALSHA names it."""
    return hashlib.sha1(text.encode()).hexdigest()


def recorded_shas(data: dict[str, Any]) -> dict[str, str | None]:
    """Each verb's script SHA-1 as a timing baseline records it; None for a script recorded without one."""
    return {verb: s.get("sha1") if isinstance(s, dict) else None for verb, s in (data.get("scripts") or {}).items()}



def pass_drift(passes: list[Measurement]) -> dict[str, float]:
    """Each figure's drift: the relative standard deviation of its ratio between
    passes, each on its own server process, which the within-run standard error
    does not see; it has len(passes) - 1 degrees of freedom."""
    per_pass = [p.figures() for p in passes]
    drift = {}
    for case in per_pass[0]:
        ratios = [f[case].server_ratio for f in per_pass]
        mean = sum(ratios) / len(ratios)
        drift[case] = (math.sqrt(sum((r - mean) ** 2 for r in ratios) / (len(ratios) - 1)) / mean
                       if len(ratios) > 1 and mean > 0 else 0.0)
    return drift


def write_baseline(path: Path, m: Measurement, folder: Path | str | None, drift: dict[str, float] | None = None,
                   **extra: Any) -> dict[str, Any]:
    from echomq_bench.records import meta, files as results

    figures = m.figures()
    drift = drift or {}
    data = {
        "schema": SCHEMA,
        "build": m.server,
        "version": m.version,
        "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git": meta.git_commit(),
        "machine": {"cpu_model": meta.cpu_model()},
        "settings": {"rounds": m.settings.rounds, "calls": m.settings.calls,
                     "heavy_calls": m.settings.heavy_calls, "sizes": vars(m.settings.sizes)},
        "load": {"server_main_thread_busy": round(m.server_utilization, 3),
                 "client_busy": round(m.client_utilization, 3)},
        **extra,
        "figures": {name: {**f.to_dict(), "drift": round(drift.get(name, 0.0), 4)}
                    for name, f in figures.items()},
        "scripts": {verb: {**s, "sha1": script_sha1(s["text"])} for verb, s in script_texts(folder).items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    results.write_json(path, data)
    return data


def shown(path: str | Path) -> str:
    """A path inside the checkout as a relative one: baselines are committed."""
    p = Path(path).resolve()
    root = CHECKOUT_BASELINES.parent.parent
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(p)


def write_scripts(texts: dict[str, dict[str, Any]], folder: Path) -> Path:
    for verb, s in texts.items():
        (folder / f"{verb}-{s['numkeys']}.lua").write_text(s["text"])
    return folder


def slowed_copy(dest: Path | str, verb: str = "claim", iterations: int = 2000,
                source: Path | str | None = None) -> Path:
    """A copy of lua/ (or `source`) in dest whose `verb` script first spins
    a busy loop of `iterations` additions: a regression of known size, for
    checking that the gate sees it (point ECHOMQ_LUA_DIR at dest)."""
    import shutil

    src = Path(source) if source is not None else lua_dir()
    dest = Path(dest)
    shutil.copytree(src, dest, dirs_exist_ok=True)
    matches = list(dest.glob(f"{verb}-*.lua"))
    if len(matches) != 1:
        raise FileNotFoundError(f"no single {verb}-<numkeys>.lua in {src}")
    text = matches[0].read_text()
    marker = "local rcall = redis.call"
    if marker not in text:
        raise ValueError(f"{matches[0]}: no line {marker!r} to put the busy loop before")
    loop = (f"local burn = 0\nfor i = 1, {int(iterations)} do burn = burn + i end  "
            f"-- slowed_copy: a deliberate regression\n")
    matches[0].write_text(text.replace(marker, loop + marker, 1))
    return dest

