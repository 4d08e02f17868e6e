"""The regression gate's comparison: one server measured and judged against its baseline.

Two checks per verb, both on the server's own clock (commandstats): the
verb's server time over the reference's against the same ratio in the
baseline, and, when a verb's script differs from the baseline's, the two
scripts interleaved call by call. The first is a cross-run figure: it counts
only when the baseline was measured on this machine fingerprint (CPU model
and flags, cores, server version, allocator); elsewhere it is shown as
advisory, and a failure rests on the same-run A/B alone. A check whose noise
(3 standard errors) exceeds its tolerance is measured again, the whole case
set at a time, up to NOISY_PASSES more passes pooled with the first (on the
same server process: more data of one draw); if it is still noisy it cannot
pass or fail: the verb is inconclusive. A verb missing from the baseline
fails. When any verb is flagged, the whole case set is measured once more,
on a fresh server process (microbench.fresh: the gate's unit of
replication); only a verb flagged twice is a regression (the rule the count
gate shares, measurement.regression). A baseline pools `passes` passes,
each on a fresh server process.
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
from echomq_bench.microbench.fresh import (CONFIRMATION, JUDGED, UNSTARTABLE, can_start_again, distinct_processes,
                                           on_fresh_server, process_of)
from echomq_bench.microbench.history_baseline import HISTORY, UPDATE_WITH_HISTORY, history_baseline
from echomq_bench.microbench.cases import CASES, VERB_CASES
from echomq_bench.records.kinds.gate import MIN_JUDGED_US, BaselineFrom, GateEntry, GateVerdictEntry, ServerProcess

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
    passes: int = UPDATE_PASSES             # with update: fresh server processes the baseline pools, a pass each


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
    servers: tuple[ServerProcess, ...] = ()   # the processes measured: judged, confirmation; or each pass

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
            figures={name: f.to_dict() for name, f in m.figures().items()}, servers=self.servers)

    def baseline_from(self) -> BaselineFrom:
        """Where the baseline came from, as the record shows it: its file or history run, the build and time
        it was measured, its revision when it is a history run, how its machine fingerprint differs, and the
        passes and server processes it pools (None where the baseline does not say)."""
        info = self.baseline_info or {}
        git = info.get("git") or {}
        passes = info.get("passes")
        return BaselineFrom(path=shown(self.baseline), history_run=bool(info.get("history_run")),
                            revision=git.get("label") or (git.get("commit") or "")[:10],
                            version=info.get("version", ""), created_utc=info.get("created_utc", ""),
                            fingerprint_differences=tuple(self.differences),
                            passes=int(passes) if passes is not None else None,
                            processes=distinct_processes(info["servers"]) if info.get("servers") else None)

    def script_rows(self) -> list[dict[str, Any]]:
        """The scripts this run measured, one row per verb: the other half of what a later gate judges against."""
        return [{"build": self.build, "verb": verb, **s} for verb, s in script_texts(self.measurement.lua_dir).items()]



def _changed(current: dict[str, dict[str, Any]], base: dict[str, Any] | None) -> list[str]:
    if not base:
        return []
    old = base.get("scripts", {})
    return sorted(v for v in current if v in old and old[v].get("text") != current[v]["text"])


def _measure_passes(server: Any, client: Any, mo: Any, passes: int,
                    progress: Any) -> tuple[Measurement, dict[str, float], tuple[ServerProcess, ...]]:
    """`passes` measurements pooled into one, the first on `server`, each other on a fresh process of its spec;
    each figure's drift between them, and the processes they ran on."""
    from echomq_bench.microbench.runner import measure

    quiet = replace(mo, progress=None)
    runs: list[Measurement] = []
    servers: list[ServerProcess] = []
    for n in range(1, passes + 1):
        if progress:
            progress(f"baseline pass {n}/{passes}" + (" on a fresh server" if n > 1 else ""))
        role = f"pass {n} of {passes}"
        if n == 1:
            run, process = measure(client, quiet), process_of(client, role)
        else:
            run, process = on_fresh_server(server, role, lambda fresh: measure(fresh, quiet))
        runs.append(run)
        servers.append(process)
    pooled = runs[0]
    for more in runs[1:]:
        pooled = pooled.merge(more)
    return pooled, pass_drift(runs), tuple(servers)


def gate_one(server: Any, options: GateOptions = GateOptions()) -> GateResult:
    """Measure one server and judge it against its baseline (or write it)."""
    from echomq_bench.microbench.runner import FULL, MeasureOptions, measure

    o = options
    if o.update and not can_start_again(server):
        raise BaselineError(UNSTARTABLE.format(name=server.name))
    if o.update and o.passes < 2:
        raise ValueError(f"a baseline's drift needs at least 2 passes, got {o.passes}")
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
        mo = MeasureOptions(server=server.name, version=version, settings=o.settings or FULL, cases=names,
                            ab_lua_dir=ab_dir, ab_cases=ab_cases if ab_dir else (), progress=progress)
        if o.update:
            m, drift, servers = _measure_passes(server, client, mo, o.passes, progress)
            found = verdicts(m, base, o.tolerance, o.ab_tolerance, same)
        else:
            m = _until_clear(client, mo, measure(client, mo), base, o, same)
            found, again = _confirmed(server, mo, verdicts(m, base, o.tolerance, o.ab_tolerance, same), base, o,
                                      same)
            servers = (process_of(client, JUDGED), *again)
    if progress:
        progress.done()
    result = GateResult(server.name, version, path, base, m, found, changed, same_machine=same, servers=servers,
                        differences=differences(here, base.get("fingerprint") or {}) if base and not same else [])
    if o.update:
        write_baseline(path, m, None, drift, lua_dir=shown(m.lua_dir), passes=o.passes, fingerprint=here,
                       servers=[s.to_record() for s in servers],
                       drift_degrees_of_freedom=distinct_processes(servers) - 1)
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


def _confirmed(server: Any, first: Any, found: list[GateVerdictEntry], base: dict[str, Any] | None,
               o: GateOptions, same: bool) -> tuple[list[GateVerdictEntry], tuple[ServerProcess, ...]]:
    """With any verb flagged, the whole case set measured once more on a fresh
    server process, so the second pass runs under the same mix as the first and
    is a draw of its own; a flagged verb not flagged again is marked
    unconfirmed. Returns the verdicts and the confirming process, if any."""
    from echomq_bench.microbench.runner import measure

    flagged = [v.case for v in found if v.flagged]
    if not flagged or not o.confirm:
        return found, ()
    if first.progress:
        first.progress(f"confirming {', '.join(flagged)}: every verb once more on a fresh server")
    again, process = on_fresh_server(server, CONFIRMATION, lambda fresh: measure(fresh, first))
    second = {v.case: v for v in verdicts(again, base, o.tolerance, o.ab_tolerance, same)}
    return [v.confirm(second[v.case]) if v.case in second else v for v in found], (process,)
