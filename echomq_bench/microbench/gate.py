"""The regression gate's comparison: one server measured and judged against its baseline.

Two checks per verb, both on the server's own clock (commandstats): the
verb's server time over the reference's against the same ratio in the
baseline, and, when a verb's script differs from the baseline's, the two
scripts interleaved call by call. The first is a cross-run figure: it counts
only when the baseline was measured on this machine fingerprint (CPU model
and flags, cores, server version, allocator); elsewhere it is shown as
advisory, and a failure rests on the same-run A/B alone. A check whose noise
(3 standard errors) exceeds its tolerance is measured again, the whole case
set at a time, up to NOISY_PASSES more passes pooled with the first; if it is
still noisy it cannot pass or fail: the verb is inconclusive. A verb missing
from the baseline fails. When any verb is flagged, the whole case set is
measured once more; only a verb flagged twice is a regression (the rule the
count gate shares, measurement.regression).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from echomq_bench.measurement.serverstats import bound
from echomq_bench.progress import Progress
from echomq_bench.microbench.benchmark_machine import differences
from echomq_bench.microbench.baseline import (UPDATE_PASSES, BaselineError, baseline_path, fingerprint,
                                              fingerprint_id, load_baseline, pass_drift, script_texts, shown,
                                              write_baseline, write_scripts)
from echomq_bench.microbench.history_baseline import HISTORY, UPDATE_WITH_HISTORY, history_baseline
from echomq_bench.microbench.cases import CASES, VERB_CASES
from echomq_bench.records.kinds.gate import MIN_JUDGED_US, BaselineFrom, GateEntry, GateVerdictEntry

if TYPE_CHECKING:
    from echomq_bench.microbench.figures import Figure, Measurement
    from echomq_bench.microbench.settings import Settings

# numpy (microbench.runner) loads when a gate runs, not when the CLI builds
# its parser for another command.

__all__ = ["GateOptions", "GateResult", "gate_one", "verdicts", "DEFAULT_TOLERANCE",
           "DEFAULT_AB_TOLERANCE"]

DEFAULT_TOLERANCE = 0.20
DEFAULT_AB_TOLERANCE = 0.10
Z = 3.0
NOISY_PASSES = 2    # more passes a noisy verb may get: the sample grows, the allowance never does


@dataclass(frozen=True)
class GateOptions:
    """How one gate run judges a server: baseline, measurement settings, allowances."""

    baseline: Path | str | None = None      # a folder of gate-<build>.json, one .json for every build, or HISTORY
    settings: Settings | None = None        # microbench settings; None: microbench.runner.FULL
    tolerance: float = DEFAULT_TOLERANCE
    ab_tolerance: float = DEFAULT_AB_TOLERANCE
    update: bool = False                    # measure and write the baseline instead of judging
    cases: Sequence[str] | None = None      # None: every verb
    confirm: bool = True                    # re-measure flagged verbs before calling them regressions
    quiet: bool = False


def _noise(*errors: float) -> float:
    """Z combined relative errors: the smallest change this measurement can tell from none."""
    return Z * math.sqrt(sum(x * x for x in errors if x == x))  # nan-safe


def verdicts(m: Measurement, base: dict[str, Any] | None, tolerance: float, ab_tolerance: float,
             same_machine: bool = True) -> list[GateVerdictEntry]:
    """One verdict per case. The tolerances are the allowances; a larger noise
    does not widen them (a noisier run would get a more lenient gate) but makes
    the verb inconclusive."""
    figures = m.figures()
    comparisons = m.comparisons()
    out = []
    for case in m.cases:
        f: Figure = figures[case]
        b = (base or {}).get("figures", {}).get(case)
        if b and b.get("reference", "noop_script") != f.reference:
            b = None  # measured against another reference: no figure to compare with
        change = None
        noisy = False
        coarse = f.server_us < MIN_JUDGED_US
        if b:
            change = f.server_ratio / float(b["server_ratio"]) - 1
            noise = _noise(f.server_ratio_se, float(b.get("server_ratio_se", 0.0)), float(b.get("drift", 0.0)))
            noisy = same_machine and not coarse and noise > tolerance
        ab = comparisons.get(case)
        noisy |= ab is not None and _noise(ab.se) > ab_tolerance
        out.append(GateVerdictEntry(
            case=case, reference=f.reference, server_us=f.server_us, client_us=f.client_us,
            base_ratio=float(b["server_ratio"]) if b else None, now_ratio=f.server_ratio, change=change,
            allowed=tolerance if b else None, ab_change=ab.ratio - 1 if ab else None,
            ab_allowed=ab_tolerance if ab else None, advisory=not same_machine,
            missing=base is not None and b is None, noisy=noisy, below_resolution=coarse))
    return out


@dataclass(frozen=True)
class GateResult:
    build: str
    version: str
    baseline: Path
    baseline_info: dict[str, Any] | None
    measurement: Measurement
    verdicts: list[GateVerdictEntry]
    changed_scripts: list[str] = field(default_factory=list)
    updated: bool = False
    run_dir: Path | None = None       # the results folder the run was written to
    same_machine: bool = True         # the baseline's machine fingerprint is this one's
    differences: list[str] = field(default_factory=list)  # else how it differs: `cores 2 here, 64 saved`

    @property
    def regressions(self) -> list[str]:
        return [v.case for v in self.verdicts if v.regressed]

    @property
    def inconclusive(self) -> list[str]:
        return [v.case for v in self.verdicts if v.inconclusive]

    def entry(self) -> GateEntry:
        """The build's summary.json entry."""
        m = self.measurement
        return GateEntry(
            build=self.build, version=self.version, baseline=str(self.baseline), updated=self.updated,
            changed_scripts=tuple(self.changed_scripts), regressions=tuple(self.regressions),
            inconclusive=tuple(self.inconclusive), same_machine=self.same_machine, lua_dir=m.lua_dir,
            lua_shown=shown(m.lua_dir), server_main_thread_busy=round(m.server_utilization, 3),
            client_busy=round(m.client_utilization, 3), bound=bound(m.server_utilization, m.client_utilization),
            rounds=m.settings.rounds, calls=m.settings.calls, baseline_from=self.baseline_from(),
            verdicts=tuple(self.verdicts),
            # What a later gate needs to judge against this run (`--baseline history`).
            figures={name: f.to_dict() for name, f in m.figures().items()})

    def baseline_from(self) -> BaselineFrom:
        """Where the baseline came from, as the record shows it: its file or history run, the build and time
        it was measured, its revision when it is a history run, and how its machine fingerprint differs."""
        info = self.baseline_info or {}
        git = info.get("git") or {}
        return BaselineFrom(path=shown(self.baseline), history_run=bool(info.get("history_run")),
                            revision=git.get("label") or (git.get("commit") or "")[:10],
                            version=info.get("version", ""), created_utc=info.get("created_utc", ""),
                            fingerprint_differences=tuple(self.differences))

    def script_rows(self) -> list[dict[str, Any]]:
        """The scripts this run measured, one row per verb: the other half of what a later gate judges against."""
        return [{"build": self.build, "verb": verb, **s} for verb, s in script_texts(self.measurement.lua_dir).items()]



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
    client = server.client()
    version = server.version()
    here = fingerprint(client)
    path, base = _baseline(o, server.name, here)
    same = base is not None and base.get("fingerprint") == here
    changed = _changed(script_texts(), base)
    names = list(o.cases) if o.cases else [c.name for c in VERB_CASES]
    ab_cases = [] if o.update else [c for c in names if CASES[c].script in changed]
    progress = None if o.quiet else Progress(label=f"gate {server.name}")
    with tempfile.TemporaryDirectory(prefix="echomq-gate-") as tmp:
        ab_dir = write_scripts(base["scripts"], Path(tmp)) if ab_cases and base else None
        if o.update:
            m, drift = _measure_passes(client, server.name, version, settings, names, progress)
            found = verdicts(m, base, o.tolerance, o.ab_tolerance, same)
        else:
            mo = MeasureOptions(server=server.name, version=version, settings=settings, cases=names,
                                ab_lua_dir=ab_dir, ab_cases=ab_cases if ab_dir else (), progress=progress)
            m = _until_clear(client, mo, measure(client, mo), base, o, same)
            found = _confirmed(client, mo, verdicts(m, base, o.tolerance, o.ab_tolerance, same), base, o, same)
    if progress:
        progress.done()
    result = GateResult(server.name, version, path, base, m, found, changed, same_machine=same,
                        differences=differences(here, base.get("fingerprint") or {}) if base and not same else [])
    if o.update:
        write_baseline(path, m, None, drift, lua_dir=shown(m.lua_dir), passes=UPDATE_PASSES, fingerprint=here)
        result = replace(result, updated=True)
    client.close()
    return result


def _baseline(o: GateOptions, build: str, here: dict[str, Any]) -> tuple[Path, dict[str, Any] | None]:
    """Where the baseline is (or is to be written) and what it holds: None
    when --update writes the first one."""
    if o.baseline == HISTORY:
        if o.update:
            raise BaselineError(UPDATE_WITH_HISTORY)
        return history_baseline(build, here)
    path = baseline_path(o.baseline, build, fingerprint_id(here), writing=o.update)
    return path, load_baseline(path) if path.is_file() or not o.update else None


def _until_clear(client: Any, mo: Any, m: Measurement, base: dict[str, Any] | None, o: GateOptions,
                 same: bool) -> Measurement:
    """While a verb's noise is above its tolerance, the whole case set once
    more, pooled with what came before. A 4 µs verb read in whole µs needs
    about three passes to resolve 10%; a quiet run pays for one."""
    from echomq_bench.microbench.runner import measure

    for n in range(NOISY_PASSES):
        noisy = [v.case for v in verdicts(m, base, o.tolerance, o.ab_tolerance, same) if v.inconclusive]
        if not noisy:
            break
        if mo.progress:
            mo.progress(f"noise above tolerance on {', '.join(noisy)}: pass {n + 2}/{NOISY_PASSES + 1}")
        m = m.merge(measure(client, mo))
    return m


def _confirmed(client: Any, first: Any, found: list[GateVerdictEntry], base: dict[str, Any] | None,
               o: GateOptions, same: bool) -> list[GateVerdictEntry]:
    """With any verb flagged, the whole case set measured once more, so the
    second pass runs under the same mix as the first; a flagged verb not
    flagged again is marked unconfirmed."""
    from echomq_bench.microbench.runner import measure

    flagged = [v.case for v in found if v.flagged]
    if not flagged or not o.confirm:
        return found
    if first.progress:
        first.progress(f"confirming {', '.join(flagged)}: every verb once more")
    again = measure(client, first)
    second = {v.case: v for v in verdicts(again, base, o.tolerance, o.ab_tolerance, same)}
    return [v.confirm(second[v.case]) if v.case in second else v for v in found]
