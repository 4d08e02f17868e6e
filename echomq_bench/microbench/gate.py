"""The regression gate's comparison: one server measured and judged against its baseline.

Two checks per verb, both on the server's own clock (commandstats): the
verb's server time over the reference's against the same ratio in the
baseline, and, when a verb's script differs from the baseline's, the two
scripts interleaved call by call. A verb flagged by either check is measured
once more; only a verb flagged twice is a regression.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from echomq_bench.measurement.serverstats import bound
from echomq_bench.progress import Progress
from echomq_bench.microbench.baseline import (UPDATE_PASSES, baseline_path, load_baseline, pass_drift, script_texts,
                                              shown, write_baseline, write_scripts)
from echomq_bench.microbench.cases import CASES, VERB_CASES

if TYPE_CHECKING:
    from echomq_bench.microbench.figures import Figure, Measurement
    from echomq_bench.microbench.settings import Settings

# numpy (microbench.runner) loads when a gate runs, not when the CLI builds
# its parser for another command.

__all__ = ["GateOptions", "GateResult", "Verdict", "gate_one", "verdicts", "format_result",
           "DEFAULT_TOLERANCE", "DEFAULT_AB_TOLERANCE"]

DEFAULT_TOLERANCE = 0.20
DEFAULT_AB_TOLERANCE = 0.10
Z = 3.0


@dataclass(frozen=True)
class GateOptions:
    """How one gate run judges a server: baseline, measurement settings, allowances."""

    baseline: Path | str | None = None      # a folder of gate-<build>.json, or one .json for every build
    settings: Settings | None = None        # microbench settings; None: microbench.runner.FULL
    tolerance: float = DEFAULT_TOLERANCE
    ab_tolerance: float = DEFAULT_AB_TOLERANCE
    update: bool = False                    # measure and write the baseline instead of judging
    cases: Sequence[str] | None = None      # None: every verb
    confirm: bool = True                    # re-measure flagged verbs before calling them regressions
    quiet: bool = False


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



def _changed(current: dict[str, dict[str, Any]], base: dict[str, Any] | None) -> list[str]:
    if not base:
        return []
    old = base.get("scripts", {})
    return sorted(v for v in current if v in old and old[v].get("text") != current[v]["text"])


def _measure_passes(client: Any, name: str, version: str, settings: Settings, cases: Sequence[str],
                    progress: Any) -> tuple[Measurement, dict[str, float]]:
    """UPDATE_PASSES separate measurements pooled into one, and each figure's drift between them."""
    from echomq_bench.microbench.runner import MeasureOptions, measure

    passes = []
    for n in range(UPDATE_PASSES):
        if progress:
            progress(f"baseline pass {n + 1}/{UPDATE_PASSES}")
        passes.append(measure(client, MeasureOptions(server=name, version=version, settings=settings, cases=cases)))
    pooled = passes[0]
    for more in passes[1:]:
        pooled = pooled.merge(more)
    return pooled, pass_drift(passes)


def gate_one(server: Any, options: GateOptions = GateOptions()) -> GateResult:
    """Measure one server and judge it against its baseline (or write it)."""
    from echomq_bench.microbench.runner import FULL, MeasureOptions, measure

    o = options
    settings = o.settings or FULL
    path = baseline_path(o.baseline, server.name)
    base = None
    if path.is_file() or not o.update:
        base = load_baseline(path)
    changed = _changed(script_texts(), base)
    names = list(o.cases) if o.cases else [c.name for c in VERB_CASES]
    ab_cases = [] if o.update else [c for c in names if CASES[c].script in changed]
    client = server.client()
    version = server.version()
    progress = None if o.quiet else Progress(label=f"gate {server.name}")
    with tempfile.TemporaryDirectory(prefix="echomq-gate-") as tmp:
        ab_dir = write_scripts(base["scripts"], Path(tmp)) if ab_cases and base else None
        if o.update:
            m, drift = _measure_passes(client, server.name, version, settings, names, progress)
            found = verdicts(m, base, o.tolerance, o.ab_tolerance)
        else:
            mo = MeasureOptions(server=server.name, version=version, settings=settings, cases=names,
                                ab_lua_dir=ab_dir, ab_cases=ab_cases if ab_dir else (), progress=progress)
            m = measure(client, mo)
            found = _confirmed(client, mo, verdicts(m, base, o.tolerance, o.ab_tolerance), base, o)
    if progress:
        progress.done()
    result = GateResult(server.name, version, path, base, m, found, changed)
    if o.update:
        write_baseline(path, m, None, drift, lua_dir=shown(m.lua_dir), passes=UPDATE_PASSES)
        result = replace(result, updated=True)
    client.close()
    return result


def _confirmed(client: Any, first: Any, found: list[Verdict], base: dict[str, Any] | None,
               o: GateOptions) -> list[Verdict]:
    """The flagged verbs measured once more; a verb not flagged again is marked unconfirmed."""
    from echomq_bench.microbench.runner import measure

    flagged = [v.case for v in found if v.flagged]
    if not flagged or not o.confirm:
        return found
    if first.progress:
        first.progress(f"confirming {', '.join(flagged)}")
    again = measure(client, replace(first, cases=flagged,
                                    ab_cases=[c for c in first.ab_cases if c in flagged] if first.ab_lua_dir else ()))
    second = {v.case: v for v in verdicts(again, base, o.tolerance, o.ab_tolerance)}
    return [replace(v, confirmed=second[v.case].flagged) if v.case in second else v for v in found]


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:+.1f}%"


def format_result(r: GateResult) -> str:
    m = r.measurement
    lines = []
    when = (r.baseline_info or {}).get("created_utc", "")
    bver = (r.baseline_info or {}).get("version", "")
    lines.append(f"== {r.build}: {r.version}; scripts {shown(m.lua_dir)}")
    if r.updated:
        lines.append(f"   baseline written: {shown(r.baseline)}")
    else:
        lines.append(f"   baseline {shown(r.baseline)} ({bver}, {when})")
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

