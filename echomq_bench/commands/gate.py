"""`echomq-bench gate`: fail when a verb got slower than the committed baseline.

Two checks per verb, both on the server's own clock (commandstats):

1. normalised: the verb's server time over the no-op script's, measured
   call by call in the same batches (echomq_bench.microbench.runner), against the same
   ratio in the baseline. A machine that is slower today slows both alike.
   Allowed change: --tolerance, widened to 3 standard errors of the two
   measurements when the machine is noisier than that.
2. script A/B: when a verb's script differs from the one the baseline was
   measured with (the baseline keeps every script's text), the baseline's
   script runs too, interleaved call by call with the current one on the
   same state, and the gate reads their ratio directly. Noise from the
   neighbours hits both alike, so this check can be tight (--ab-tolerance).

A verb flagged by either check is measured once more; only a verb flagged
twice is a regression (exit 1, named). `--update` writes the baseline.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from echomq_bench.microbench.cases import CASES, VERB_CASES
from echomq.scripts import discover, lua_dir
from echomq_bench.measurement.serverstats import bound
from echomq_bench.progress import Progress

if TYPE_CHECKING:
    from echomq_bench.microbench.runner import Figure, Measurement, Settings

# numpy (microbench) and pandas (results) load when a gate runs, not when
# the CLI builds its parser for another command.

__all__ = ["configure", "run", "run_gate", "Verdict", "GateResult", "baseline_path", "load_baseline",
           "write_baseline", "slowed_copy", "DEFAULT_TOLERANCE", "DEFAULT_AB_TOLERANCE", "BaselineError"]

SCHEMA = "echomq-gate-baseline/1"
DEFAULT_TOLERANCE = 0.20
DEFAULT_AB_TOLERANCE = 0.10
Z = 3.0
UPDATE_PASSES = 3
CHECKOUT_BASELINES = Path(__file__).resolve().parent.parent / "results" / "baselines"


class BaselineError(ValueError):
    """A baseline that is missing or unreadable; the message says which and why."""


# -- baselines -----------------------------------------------------------------------------


def default_baseline_dir() -> Path:
    from echomq_bench.records.files import RESULTS_DIR

    return CHECKOUT_BASELINES if CHECKOUT_BASELINES.is_dir() else RESULTS_DIR / "baselines"


def baseline_path(base: Path | str | None, build: str) -> Path:
    """A .json file is used for every build; a folder holds gate-<build>.json."""
    path = Path(base) if base is not None else default_baseline_dir()
    if path.suffix == ".json":
        return path
    return path / f"gate-{re.sub(r'[^A-Za-z0-9_.-]+', '-', build)}.json"


def load_baseline(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise BaselineError(f"no baseline at {path}; write one with: echomq-bench gate --update "
                            f"--baseline {path.parent if path.name.startswith('gate-') else path}")
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not a readable baseline ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("figures"), dict):
        raise BaselineError(f"{path}: not a gate baseline (want schema {SCHEMA!r} with figures)")
    return data


def script_texts(folder: Path | str | None = None) -> dict[str, dict[str, Any]]:
    """Every verb's script as the server sees it (includes expanded)."""
    return {verb: {"file": src.path.name, "numkeys": src.numkeys, "text": src.text}
            for verb, src in discover(folder).items()}


def _measure_passes(client: Any, name: str, version: str, settings: Settings, cases: Sequence[str],
                    progress: Any) -> tuple[Measurement, dict[str, float]]:
    """UPDATE_PASSES separate measurements pooled into one, and each
    figure's drift: the relative standard deviation of its ratio between
    passes, which the within-run standard error does not see."""
    from echomq_bench.microbench.runner import measure

    passes = []
    for n in range(UPDATE_PASSES):
        if progress:
            progress(f"baseline pass {n + 1}/{UPDATE_PASSES}")
        passes.append(measure(client, server=name, version=version, settings=settings, cases=cases))
    pooled = passes[0]
    for more in passes[1:]:
        pooled = pooled.merge(more)
    per_pass = [p.figures() for p in passes]
    drift = {}
    for case in per_pass[0]:
        ratios = [f[case].server_ratio for f in per_pass]
        mean = sum(ratios) / len(ratios)
        drift[case] = (math.sqrt(sum((r - mean) ** 2 for r in ratios) / (len(ratios) - 1)) / mean
                       if len(ratios) > 1 and mean > 0 else 0.0)
    return pooled, drift


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
        "scripts": script_texts(folder),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    results.write_json(path, data)
    return data


def _shown(path: str | Path) -> str:
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


# -- verdicts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    case: str
    reference: str
    server_us: float
    client_us: float
    base_ratio: float | None
    now_ratio: float
    change: float | None           # now/base - 1, normalised
    allowed: float | None          # the normalised check's allowance
    ab_change: float | None = None   # current script / baseline script - 1, interleaved
    ab_allowed: float | None = None
    confirmed: bool | None = None  # None: not re-measured

    @property
    def normalised_slower(self) -> bool:
        return self.change is not None and self.allowed is not None and self.change > self.allowed

    @property
    def ab_slower(self) -> bool:
        return self.ab_change is not None and self.ab_allowed is not None and self.ab_change > self.ab_allowed

    @property
    def flagged(self) -> bool:
        return self.normalised_slower or self.ab_slower

    @property
    def regressed(self) -> bool:
        return self.flagged and self.confirmed is not False

    @property
    def status(self) -> str:
        if self.base_ratio is None:
            return "new"
        if self.regressed:
            return "SLOWER"
        if self.flagged:
            return "ok (not confirmed)"
        if (self.change is not None and self.allowed is not None and self.change < -self.allowed) or (
                self.ab_change is not None and self.ab_allowed is not None and self.ab_change < -self.ab_allowed):
            return "faster"
        return "ok"

    def to_dict(self) -> dict[str, Any]:
        out = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in vars(self).items()}
        out["status"] = self.status
        return out


def _allowed(tol: float, *errors: float) -> float:
    """The tolerance, or Z combined relative errors when the noise is larger."""
    se = math.sqrt(sum(x * x for x in errors if x == x))  # nan-safe
    return max(tol, Z * se)


def verdicts(m: Measurement, base: dict[str, Any] | None, tolerance: float, ab_tolerance: float) -> list[Verdict]:
    figures = m.figures()
    comparisons = m.comparisons()
    out = []
    for case in m.cases:
        f: Figure = figures[case]
        b = (base or {}).get("figures", {}).get(case)
        if b and b.get("reference", "noop_script") != f.reference:
            b = None  # measured against another reference: not comparable, treat as new
        change = allowed = None
        if b:
            change = f.server_ratio / float(b["server_ratio"]) - 1
            allowed = _allowed(tolerance, f.server_ratio_se, float(b.get("server_ratio_se", 0.0)),
                               float(b.get("drift", 0.0)))
        ab = comparisons.get(case)
        out.append(Verdict(case, f.reference, f.server_us, f.client_us, float(b["server_ratio"]) if b else None,
                           f.server_ratio, change, allowed,
                           ab.ratio - 1 if ab else None, _allowed(ab_tolerance, ab.se, 0.0) if ab else None))
    return out


@dataclass(frozen=True)
class GateResult:
    build: str
    version: str
    baseline: Path
    baseline_info: dict[str, Any] | None
    measurement: Measurement
    verdicts: list[Verdict]
    changed_scripts: list[str] = field(default_factory=list)
    updated: bool = False
    run_dir: Path | None = None       # the results folder the run was written to

    @property
    def regressions(self) -> list[str]:
        return [v.case for v in self.verdicts if v.regressed]

    def summary(self) -> dict[str, Any]:
        m = self.measurement
        return {"build": self.build, "version": self.version, "baseline": str(self.baseline),
                "updated": self.updated, "changed_scripts": self.changed_scripts,
                "regressions": self.regressions, "lua_dir": m.lua_dir,
                "server_main_thread_busy": round(m.server_utilization, 3),
                "client_busy": round(m.client_utilization, 3),
                "bound": bound(m.server_utilization, m.client_utilization),
                "verdicts": [v.to_dict() for v in self.verdicts]}


# -- running -------------------------------------------------------------------------------


def _changed(current: dict[str, dict[str, Any]], base: dict[str, Any] | None) -> list[str]:
    if not base:
        return []
    old = base.get("scripts", {})
    return sorted(v for v in current if v in old and old[v].get("text") != current[v]["text"])


def gate_one(server: Any, *, baseline: Path | str | None = None, settings: Settings | None = None,
             tolerance: float = DEFAULT_TOLERANCE, ab_tolerance: float = DEFAULT_AB_TOLERANCE,
             update: bool = False, cases: Sequence[str] | None = None, confirm: bool = True,
             quiet: bool = False) -> GateResult:
    """Measure one server and judge it against its baseline (or write it)."""
    from echomq_bench.microbench.runner import FULL, measure

    settings = settings or FULL
    path = baseline_path(baseline, server.name)
    base = None
    if path.is_file() or not update:
        base = load_baseline(path)
    current = script_texts()
    changed = _changed(current, base)
    names = list(cases) if cases else [c.name for c in VERB_CASES]
    ab_cases = [] if update else [c for c in names if CASES[c].script in changed]
    client = server.client()
    version = server.version()
    progress = None if quiet else Progress(label=f"gate {server.name}")
    with tempfile.TemporaryDirectory(prefix="echomq-gate-") as tmp:
        ab_dir = write_scripts(base["scripts"], Path(tmp)) if ab_cases and base else None
        if update:
            m, drift = _measure_passes(client, server.name, version, settings, names, progress)
            found = verdicts(m, base, tolerance, ab_tolerance)
        else:
            m = measure(client, server=server.name, version=version, settings=settings, cases=names,
                        ab_lua_dir=ab_dir, ab_cases=ab_cases if ab_dir else (), progress=progress)
            found = verdicts(m, base, tolerance, ab_tolerance)
            flagged = [v.case for v in found if v.flagged]
            if flagged and confirm:
                if progress:
                    progress(f"confirming {', '.join(flagged)}")
                again = measure(client, server=server.name, version=version, settings=settings, cases=flagged,
                                ab_lua_dir=ab_dir,
                                ab_cases=[c for c in ab_cases if c in flagged] if ab_dir else (),
                                progress=progress)
                second = {v.case: v for v in verdicts(again, base, tolerance, ab_tolerance)}
                found = [replace(v, confirmed=second[v.case].flagged) if v.case in second else v for v in found]
    if progress:
        progress.done()
    result = GateResult(server.name, version, path, base, m, found, changed)
    if update:
        write_baseline(path, m, None, drift, lua_dir=_shown(m.lua_dir), passes=UPDATE_PASSES)
        result = replace(result, updated=True)
    client.close()
    return result


def run_gate(servers: Iterable[Any], *, out_dir: Path | str | None = None, **options: Any) -> list[GateResult]:
    """gate_one on each server; writes results/<run-id>/ (meta, tidy CSV, summary)."""
    from echomq_bench.records import meta, files as results
    from echomq_bench.microbench.runner import FULL

    servers = list(servers)
    found = [gate_one(s, **options) for s in servers]
    run_dir = results.new_run_dir("gate", out_dir)
    settings = options.get("settings") or FULL
    info = meta.collect(servers, gate={
        "baseline": [str(r.baseline) for r in found], "update": options.get("update", False),
        "tolerance": options.get("tolerance", DEFAULT_TOLERANCE),
        "ab_tolerance": options.get("ab_tolerance", DEFAULT_AB_TOLERANCE),
        "rounds": settings.rounds, "calls": settings.calls, "heavy_calls": settings.heavy_calls,
        "sizes": vars(settings.sizes), "lua_dir": [r.measurement.lua_dir for r in found]})
    rows = [row for r in found for row in r.measurement.tidy_rows()]
    results.write_record(run_dir, results.Record(
        kind="gate", meta=info, tables={"microbench": rows},
        summary={"passed": not any(r.regressions for r in found), "builds": [r.summary() for r in found]}))
    return [replace(r, run_dir=run_dir) for r in found]


# -- printing ------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:+.1f}%"


def format_result(r: GateResult) -> str:
    m = r.measurement
    lines = []
    when = (r.baseline_info or {}).get("created_utc", "")
    bver = (r.baseline_info or {}).get("version", "")
    lines.append(f"== {r.build}: {r.version}; scripts {_shown(m.lua_dir)}")
    if r.updated:
        lines.append(f"   baseline written: {_shown(r.baseline)}")
    else:
        lines.append(f"   baseline {_shown(r.baseline)} ({bver}, {when})")
    if bver and bver != r.version:
        lines.append(f"   note: the baseline was measured on {bver}; the normalised check compares the builds")
    if r.changed_scripts:
        lines.append(f"   scripts that differ from the baseline's: {', '.join(r.changed_scripts)} "
                     "(measured A/B against the baseline's text)")
    head = (f"{'verb':<18} {'server µs':>9} {'client µs':>9} {'vs':>8}  {'baseline':>8} {'now':>8} {'change':>7} "
            f"{'allowed':>7}  {'script A/B':>10} {'allowed':>7}  verdict")
    lines += [head, "-" * len(head)]
    refs = m.figures()
    for name in ("noop_script", "ping", "read_100"):
        if name not in refs:
            continue
        f = refs[name]
        server_us = f.server_us_mean if name == "ping" else f.server_us
        lines.append(f"{name:<18} {server_us:>9.2f} {f.client_us:>9.1f} {'':>8}  (reference)")
    for v in r.verdicts:
        base = f"{v.base_ratio:>8.3f}" if v.base_ratio is not None else f"{'-':>8}"
        allowed = f"±{v.allowed * 100:.0f}%" if v.allowed is not None else ""
        ab = _pct(v.ab_change) if v.ab_change is not None else "same"
        ab_allowed = f"+{v.ab_allowed * 100:.0f}%" if v.ab_allowed is not None else ""
        vs = {"noop_script": "no-op", "read_100": "read100"}.get(v.reference, v.reference)
        lines.append(f"{v.case:<18} {v.server_us:>9.2f} {v.client_us:>9.1f} {vs:>8}  {base} {v.now_ratio:>8.3f} "
                     f"{_pct(v.change):>7} {allowed:>7}  {ab:>10} {ab_allowed:>7}  {v.status}")
    side = bound(m.server_utilization, m.client_utilization)
    lines.append(f"baseline/now = server µs / server µs of the reference in 'vs' (typical: mean of the faster half of "
                 f"{m.settings.rounds} rounds x {m.settings.calls} calls); server main thread busy "
                 f"{m.server_utilization:.0%}, client {m.client_utilization:.0%}: {side}-bound (one call at a "
                 "time; server figures are the server's own clock)")
    if r.updated:
        lines.append("UPDATED")
    elif r.regressions:
        lines.append(f"REGRESSION on {r.build}: {', '.join(r.regressions)}")
    else:
        lines.append(f"PASS on {r.build}: {len(r.verdicts)} verbs within tolerance")
    return "\n".join(lines)


# -- CLI -----------------------------------------------------------------------------------


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < 10:
        raise argparse.ArgumentTypeError(f"want a fraction such as 0.2 (20%), got {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"want an integer of at least 1, got {value}")
    return value


def _verbs(text: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in names if v not in CASES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown verb(s) {unknown or text!r}; known: {', '.join(CASES)}")
    return names


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("--baseline", type=Path, default=None, metavar="PATH",
                        help="a folder of gate-<build>.json (default: results/baselines) or one .json file "
                             "used for every build")
    parser.add_argument("--update", action="store_true", help="measure and write the baseline(s); exits 0")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls (CI); wider allowances")
    parser.add_argument("--tolerance", type=_fraction, default=DEFAULT_TOLERANCE,
                        help=f"allowed slowdown of the normalised figure (default {DEFAULT_TOLERANCE})")
    parser.add_argument("--ab-tolerance", type=_fraction, default=DEFAULT_AB_TOLERANCE,
                        help=f"allowed slowdown against the baseline's script, interleaved "
                             f"(default {DEFAULT_AB_TOLERANCE})")
    parser.add_argument("--rounds", type=_positive, default=None, help="rounds (default 20, quick 8)")
    parser.add_argument("--verbs", type=_verbs, default=None, help="comma-separated subset of verbs")
    parser.add_argument("--no-confirm", action="store_true", help="do not re-measure flagged verbs")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default results/<run-id>)")


def run(args: argparse.Namespace) -> int:
    from echomq_bench.microbench.runner import FULL, QUICK
    from echomq_bench.servers.embedded import running

    settings = QUICK if args.quick else FULL
    if args.rounds:
        settings = replace(settings, rounds=args.rounds)
    if not args.update:
        for spec in args.server:  # fail before starting anything
            path = baseline_path(args.baseline, spec.name)
            try:
                load_baseline(path)
            except BaselineError as exc:
                print(f"echomq-bench gate: error: {exc}", file=sys.stderr)
                return 2
    with running(*args.server) as servers:
        found = run_gate(servers, out_dir=args.out, baseline=args.baseline, settings=settings,
                         tolerance=args.tolerance, ab_tolerance=args.ab_tolerance, update=args.update,
                         cases=args.verbs, confirm=not args.no_confirm)
    for r in found:
        print(format_result(r))
    run_dir = found[0].run_dir
    if run_dir:
        print(f"results: {run_dir}")
    bad = [f"{r.build}:{c}" for r in found for c in r.regressions]
    if bad and not args.update:
        print(f"FAIL: regressed: {', '.join(bad)}")
        return 1
    return 0
