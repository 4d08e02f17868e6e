"""The count gate: each verb's instructions per call on a fresh server under
callgrind, judged against the baseline of the same binary (counts.verdict),
or PASSES fresh servers pooled into that baseline with `update`.

The gate runs one server per build; a verb over its allowance is counted
again on another fresh server, and fails only when that run is over it too.
The record it leaves is of kind "counts": per build, the verdicts and each
verb's instructions per server command (the report draws them as bars).
After the project's run, judged or pooled, the seed's scripts are counted
on one more fresh server of the build (counts.seed_price): a lens beside the
verdicts that never changes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from echomq_bench.counts.baseline import (PASSES, baseline_data, count_baseline_path, load_count_baseline,
                                          write_count_baseline)
from echomq_bench.counts.identity import BinaryIdentity, binary_identity
from echomq_bench.counts.measure import CountRun, count_spec
from echomq_bench.counts.seed_price import count_seed_price
from echomq_bench.counts.verdict import judge
from echomq_bench.progress import ProgressFn, prefixed, silent
from echomq_bench.records.kinds.counts import (CountsBaselineFrom, CountsBuild, CountVerdictEntry, CountsRecord,
                                               SeedPrice)
from echomq_bench.records.record import Record

__all__ = ["CountGateOptions", "CountGateResult", "count_gate", "counts_record", "part_rows"]


@dataclass(frozen=True)
class CountGateOptions:
    baseline: Path | str | None = None   # a folder of counts/count-<product>-<key>.json, or one .json
    update: bool = False                 # count PASSES fresh servers and write the baseline instead of judging
    passes: int = PASSES
    verbs: Sequence[str] | None = None   # judge only these (every verb is counted: the sequence is fixed)
    confirm: bool = True
    lua_dir: Path | str | None = None
    seed_price: bool = True              # count the seed's scripts beside the project's run


@dataclass(frozen=True)
class CountGateResult:
    build: str
    binary: BinaryIdentity
    baseline: Path
    runs: tuple[CountRun, ...]           # the judged run first, then a confirming one if any
    verdicts: tuple[CountVerdictEntry, ...] = ()
    baseline_info: dict[str, Any] = field(default_factory=dict)
    updated: bool = False
    seed_price: SeedPrice | None = None  # the seed's scripts against the first run's, when counted

    @property
    def regressions(self) -> list[str]:
        return [v.verb for v in self.verdicts if v.regressed]

    def figures(self) -> dict[str, dict[str, Any]]:
        return {verb: vc.to_dict() for verb, vc in self.runs[0].verbs.items()}

    def entry(self) -> CountsBuild:
        """The build's summary.json entry."""
        from echomq_bench.microbench.baseline import shown

        info = self.baseline_info
        git = info.get("git") or {}
        return CountsBuild(
            build=self.build, version=self.binary.version, binary=self.binary.to_dict(), baseline=shown(self.baseline),
            updated=self.updated, regressions=tuple(self.regressions), runs=len(self.runs),
            wall_s=round(sum(r.wall_s for r in self.runs), 1), valgrind=self.runs[0].valgrind,
            settings=dict(self.runs[0].settings),
            baseline_from=CountsBaselineFrom(created_utc=info.get("created_utc", ""), passes=info.get("passes"),
                                             revision=git.get("label") or str(git.get("commit") or "")[:10],
                                             recorded_on=(info.get("recorded_on") or {}).get("cpu_model", "")),
            verdicts=self.verdicts,
            figures=self.figures(), seed_price=self.seed_price)

    def rows(self) -> list[dict[str, Any]]:
        """Instructions per call by part, one row per (verb, part): the bars of the report."""
        return part_rows(self.build, self.runs[0])


def part_rows(build: str, run: CountRun) -> list[dict[str, Any]]:
    """A run's instructions per call by part, one row per (verb, part): each command a script called, and lua."""
    out = []
    for verb, vc in run.verbs.items():
        parts = {**{name: cost for name, (_, cost) in vc.commands.items()}, "lua": vc.lua}
        calls = {name: n for name, (n, _) in vc.commands.items()}
        for part, cost in parts.items():
            out.append({"build": build, "verb": verb, "part": part, "calls_per_call": calls.get(part, ""),
                        "instructions": round(cost, 1), "share": round(cost / vc.instructions, 4)})
    return out


def _verdicts(run: CountRun, base: dict[str, Any], verbs: Sequence[str]) -> list[CountVerdictEntry]:
    from echomq_bench.microbench.cases import CASES

    figures = base.get("figures") or {}
    scripts = base.get("scripts") or {}
    out = []
    for verb in verbs:
        script = CASES[verb].script or ""
        out.append(judge(verb, run.verbs[verb].to_dict(), figures.get(verb), int(base.get("passes") or 0),
                         script_changed=scripts.get(script) != run.scripts.get(script)))
    return out


def _confirmed(found: list[CountVerdictEntry], again: CountRun, base: dict[str, Any],
               verbs: Sequence[str]) -> list[CountVerdictEntry]:
    second = {v.verb: v for v in _verdicts(again, base, verbs)}
    return [v.confirm(second[v.verb]) for v in found]


def count_gate(spec: Any, options: CountGateOptions = CountGateOptions(),
               progress: ProgressFn = silent) -> CountGateResult:
    """Count one build's verbs and judge them (or write its baseline)."""
    from echomq_bench.counts.measure import COUNTED
    from echomq_bench.records import meta
    from echomq_bench.records.fingerprint import cpu_flags_sha256, cpu_model
    from echomq_bench.servers.embedded import spec_binary

    o = options
    binary = binary_identity(spec_binary(spec))
    path = count_baseline_path(o.baseline, binary)
    base = None if o.update else load_count_baseline(path, binary)   # before any server starts

    def count(label: str) -> CountRun:
        return count_spec(spec, lua_dir=o.lua_dir, progress=prefixed(progress, f"{label}:"))

    def price(project: CountRun) -> SeedPrice | None:
        return count_seed_price(spec, project, prefixed(progress, "seed's scripts:")) if o.seed_price else None

    if o.update:
        passes = tuple(count(f"pass {n + 1}/{o.passes}") for n in range(o.passes))
        data = baseline_data(passes, {"cpu_model": cpu_model(), "cpu_flags_sha256": cpu_flags_sha256()},
                             meta.git_commit())
        write_count_baseline(path, data)
        return CountGateResult(spec.name, binary, path, passes, baseline_info=data, updated=True,
                               seed_price=price(passes[0]))
    assert base is not None
    verbs = list(o.verbs or COUNTED)
    first = count("count")
    found = _verdicts(first, base, verbs)
    runs: tuple[CountRun, ...] = (first,)
    if o.confirm and any(v.flagged for v in found):
        progress(f"confirming {', '.join(v.verb for v in found if v.flagged)} on a fresh server")
        again = count("confirm")
        runs += (again,)
        found = _confirmed(found, again, base, verbs)
    return CountGateResult(spec.name, binary, path, runs, tuple(found), baseline_info=base, seed_price=price(first))


def counts_record(found: Sequence[CountGateResult], info: dict[str, Any]) -> Record:
    """The gate run as written: each build's verdicts and figures in summary.json, the parts in counts.csv."""
    return Record(kind="counts", meta=info, tables={"counts": [row for r in found for row in r.rows()]},
                  summary=CountsRecord(passed=not any(r.regressions for r in found),
                                       builds=tuple(r.entry() for r in found)).to_record())
