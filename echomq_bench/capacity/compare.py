"""Is build B faster than build A? Trials on fresh servers, with confidence intervals:
the machinery under `echomq-bench compare`.

`echomq-bench compare --server A --server B ... --trials N` runs the same
capacity workload on every build, each trial on servers started fresh for
it, so no build inherits another's memory layout or warm cache. How the
builds share a trial is `--interleave`:

- `together` (the default): every build's server runs at once, their main
  threads pinned to the same core, each driven by its own worker at full
  load, so the kernel shares that core between them millisecond by
  millisecond. Whatever the machine does (other processes, a busy
  neighbour on the host, a clock that drifts) it does to all of them at
  the same moment; the ratio of their rates is the ratio of their
  efficiency. On this project's shared two-core VM an A/A trial stays
  within about 3%, where whole runs back to back scatter by 20%.
- `slot`: the servers take turns, `--slot` seconds each, in rounds whose
  order is drawn at random (randomised multiple interleaved trials); each
  has the core to itself in its turn.
- `trial`: each trial is one whole run per build, A B A B.

For throughput, server µs per cycle and claim p99 the summary gives the
median over trials of the ratio to the first build, its 95% bootstrap
interval and a verdict (`echomq_bench.measurement.stats`). Absolute cycles/s under
`together` are each build's share of one core, about half its capacity.

A build is any server spec (`NAME=BINARY ARGS...`) and may carry its own
copy of the scripts: `--scripts NAME=DIR` runs build NAME with the Lua in
DIR, so a change to a script is judged the same way as a change of server.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from echomq_bench.capacity.result import CapacityResult
from echomq_bench.capacity.runner import SLOT_S, measure, run_alternating
from echomq_bench.capacity.settings import CapacityError, CapacitySettings, refuse_clusters
from echomq_bench.measurement.latency import Latency
from echomq_bench.measurement.stats import Comparison, compare_ratios, round_ratio
from echomq_bench.servers import ServerSpec, parse_server_spec

__all__ = ["Build", "Trial", "CompareResult", "run_compare", "unique_builds", "as_build", "METRICS", "INTERLEAVE",
           "INTERLEAVE_TEXT", "DEFAULT_TRIALS"]

Say = Callable[[str], None]
DEFAULT_TRIALS = 5
COMPARE_SETTINGS = CapacitySettings(duration_s=5.0)
INTERLEAVE = ("together", "slot", "trial")
INTERLEAVE_TEXT = {
    "together": "all builds at once, main threads sharing one core, fresh servers per trial",
    "slot": "builds take turns in slots, random order per round, fresh servers per trial",
    "trial": "one whole run per build, A B A B, a fresh server per run",
}

# summary name -> (how to read it from a result, higher is better, unit)
METRICS: dict[str, tuple[Callable[[CapacityResult], float], bool, str]] = {
    "throughput": (lambda r: r.cycles_per_s, True, "cycles/s"),
    "server_us": (lambda r: r.server_us_per_cycle, False, "us/cycle"),
    "p99": (lambda r: r.latency_ms("claim").get("p99", float("nan")), False, "ms"),
}


@dataclass(frozen=True)
class Build:
    spec: ServerSpec
    lua_dir: Path | None = None

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class Trial:
    build: str
    trial: int        # 1-based
    order: int        # position in the whole run, 1-based
    result: CapacityResult
    rounds: dict[int, float] = field(default_factory=dict)   # slot interleaving: round -> this build's cycles/s


@dataclass(frozen=True)
class CompareResult:
    builds: list[Build]
    settings: CapacitySettings
    trials: list[Trial]
    comparisons: dict[str, dict[str, Comparison]] = field(default_factory=dict)
    min_effect: float = 0.0
    interleave: str = "together"

    def of(self, build: str) -> list[CapacityResult]:
        return [t.result for t in self.trials if t.build == build]

    def values(self, build: str, metric: str) -> list[float]:
        read = METRICS[metric][0]
        return [read(r) for r in self.of(build)]

    def trial_ratios(self, build: str, metric: str) -> list[float]:
        """One ratio to the baseline per trial. Throughput under slot
        interleaving: the median over rounds (`stats.round_ratio`); else the
        ratio of the trial's totals."""
        base = self.builds[0].name
        mine = [t for t in self.trials if t.build == build]
        theirs = [t for t in self.trials if t.build == base]
        read = METRICS[metric][0]
        out = []
        for a, b in zip(theirs, mine):
            fine = round_ratio(a.rounds, b.rounds) if metric == "throughput" and a.rounds else None
            out.append(fine if fine is not None else read(b.result) / read(a.result))
        return out

    def summary(self) -> dict[str, Any]:
        base = self.builds[0].name
        out: dict[str, Any] = {"kind": "compare", "baseline": base, "trials": len(self.of(base)),
                               "interleave": self.interleave, "order": INTERLEAVE_TEXT[self.interleave],
                               "min_effect": self.min_effect, "builds": {}}
        if self.interleave == "together":
            out["rates_note"] = (f"the {len(self.builds)} builds shared one core: cycles/s and server busy are "
                                 "each build's share of it; the ratios and server µs/cycle are what compare")
        for build in self.builds:
            runs = self.of(build.name)
            entry: dict[str, Any] = {}
            for metric in METRICS:
                c = self.comparisons[build.name][metric]
                key = "" if metric == "throughput" else metric + "_"
                if metric == "throughput":
                    entry.update(throughput_ratio=c.ratio, throughput_ci95=list(c.ci95), verdict=c.verdict,
                                 throughput_trial_ratios=self.trial_ratios(build.name, metric))
                else:
                    entry.update({f"{key}ratio": c.ratio, f"{key}ci95": list(c.ci95), f"{key}verdict": c.verdict})
            entry.update(
                version=runs[0].version, spec=build.spec.describe(), scripts=runs[0].scripts,
                cycles_per_s=_spread(self.values(build.name, "throughput")),
                server_us_per_cycle=_spread(self.values(build.name, "server_us")),
                claim_p99_ms=_spread(self.values(build.name, "p99")),
                server_utilization=_spread([r.server_utilization for r in runs]),
                client_utilization=_spread([r.client_utilization for r in runs]),
                bound={b: sum(r.bound == b for r in runs) for b in ("server", "client")},
                ceiling_claims_per_s=next((r.ceiling_claims_per_s for r in runs if r.ceiling), None),
                pinning=runs[0].pinning,
                warnings=[f"trial {i + 1}: {w}" for i, r in enumerate(runs) for w in r.warnings])
            out["builds"][build.name] = entry
        return out

    def rows(self) -> list[dict[str, Any]]:
        rows = [row for t in self.trials for row in t.result.rows(trial=t.trial, order=t.order)]
        base = self.builds[0].name
        for b in self.builds[1:]:
            for metric in METRICS:
                for i, ratio in enumerate(self.trial_ratios(b.name, metric)):
                    rows.append({"build": b.name, "version": self.of(b.name)[i].version, "trial": i + 1,
                                 "baseline": base, "metric": f"{metric}_ratio", "value": ratio, "unit": "ratio"})
        return rows

    def merged_latency(self, build: str, verb: str) -> Latency:
        merged = Latency()
        for r in self.of(build):
            if verb in r.latency:
                merged.merge(r.latency[verb])
        return merged

    def table(self) -> str:
        lines = [f"{'build':<14} {'version':<14} {'cycles/s median':>15} {'(min..max)':>17} "
                 f"{'srv µs/cyc':>10} {'p99 ms':>7} {'srv busy':>8} {'bound':>9}   ratio to "
                 f"{self.builds[0].name} [95% CI]  verdict"]
        for b in self.builds:
            runs, thr = self.of(b.name), self.values(b.name, "throughput")
            s = sorted(thr)
            busy = sorted(r.server_utilization for r in runs)[len(runs) // 2]
            bounds = f"server {sum(r.bound == 'server' for r in runs)}/{len(runs)}"
            c = self.comparisons[b.name]["throughput"]
            verdict = ("baseline" if b is self.builds[0]
                       else f"{c.ratio:.3f} [{c.ci95[0]:.3f}, {c.ci95[1]:.3f}]  {c.verdict}")
            lines.append(
                f"{b.name[:14]:<14} {runs[0].version[:14]:<14} {_median(thr):>15,.0f} "
                f"{f'({s[0]:,.0f}..{s[-1]:,.0f})':>17} {_median(self.values(b.name, 'server_us')):>10.2f} "
                f"{_median(self.values(b.name, 'p99')):>7.2f} {busy * 100:>7.1f}% {bounds:>9}   {verdict}")
        if self.interleave == "together":
            lines.append(f"(together: the {len(self.builds)} builds shared one core, so cycles/s and busy % are "
                         f"each one's share; the ratios are what to read)")
        for metric in ("server_us", "p99"):
            parts = []
            for b in self.builds[1:]:
                c = self.comparisons[b.name][metric]
                parts.append(f"{b.name} {c.ratio:.3f} [{c.ci95[0]:.3f}, {c.ci95[1]:.3f}] {c.verdict}")
            label = "server µs/cycle" if metric == "server_us" else "claim p99"
            lines.append(f"{label} ratio to {self.builds[0].name}: " + "; ".join(parts))
        return "\n".join(lines)


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": _median(values), "min": min(values), "max": max(values)}


def as_build(build: Build | ServerSpec | str) -> Build:
    if isinstance(build, Build):
        return build
    return Build(parse_server_spec(build) if isinstance(build, str) else build)


def unique_builds(specs: Sequence[ServerSpec]) -> list[ServerSpec]:
    """Give a repeated build (A/A: --server redis --server redis) a distinct name: redis, redis-2."""
    seen: set[str] = set()
    out = []
    for spec in specs:
        name, n = spec.name, 1
        while name in seen:
            n += 1
            name = f"{spec.name}-{n}"
        seen.add(name)
        out.append(spec if name == spec.name else ServerSpec(name=name, kind=spec.kind, binary=spec.binary,
                                                             args=spec.args, url=spec.url))
    return out


def run_compare(builds: Sequence[Build | ServerSpec | str],
                settings: CapacitySettings = COMPARE_SETTINGS, trials: int = DEFAULT_TRIALS, *,
                interleave: str = "together", slot_s: float = SLOT_S, progress: Say | None = None,
                min_effect: float = 0.0, seed: int = 0) -> CompareResult:
    """Every build `trials` times, each trial on fresh servers.

    interleave="together": each trial starts every build's server and loads
    them all at once on one core; "slot": in turns of `slot_s` seconds;
    "trial": one whole run per build, A B A B (see the module's docstring).
    A build may be a Build, a ServerSpec or SPEC text ("valkey"); a name
    given twice becomes NAME, NAME-2, ... (an A/A check).
    """
    given = [as_build(b) for b in builds]
    refuse_clusters(b.spec for b in given)
    runs = [Build(spec, b.lua_dir) for spec, b in zip(unique_builds([b.spec for b in given]), given)]
    if len(runs) < 2:
        raise CapacityError("compare needs at least two builds (repeat one for an A/A check)")
    if trials < 2:
        raise CapacityError(f"compare needs at least 2 trials, got {trials}")
    if interleave not in INTERLEAVE:
        raise CapacityError(f"interleave must be one of {', '.join(INTERLEAVE)}, got {interleave!r}")
    settings.check()
    settings = replace(settings, queues=settings.queues or 1)
    if interleave == "slot" and settings.rate is not None:
        raise CapacityError("turns in slots need a closed loop: leave out --rate, or run the builds together")
    say: Say = progress or (lambda _: None)
    out = CompareResult(list(runs), settings, [], min_effect=min_effect, interleave=interleave)
    for i in range(trials):
        # The C client's ceiling once per build, when asked.
        run_settings = settings if i == 0 else replace(settings, ceiling=False)
        if interleave in ("together", "slot"):
            _shared_trial(out, i, trials, run_settings, slot_s if interleave == "slot" else None, say)
        else:
            for build in runs:
                prefix = f"[{len(out.trials) + 1}/{trials * len(runs)}] trial {i + 1}"
                result = measure(build.spec, run_settings, lua_dir=build.lua_dir, progress=_prefixed(say, prefix))
                out.trials.append(Trial(build.name, i + 1, len(out.trials) + 1, result))
                say(f"{prefix} {_line(build.name, result)}")
    for build in runs:
        out.comparisons[build.name] = {
            metric: compare_ratios(out.trial_ratios(build.name, metric), higher_is_better=better, seed=seed,
                                   min_effect=min_effect)
            for metric, (_, better, _) in METRICS.items()}
    return out


def _prefixed(say: Say, prefix: str) -> Say:
    return lambda text: say(f"{prefix} {text}")


def _shared_trial(out: CompareResult, i: int, trials: int, settings: CapacitySettings, slot_s: float | None,
                  say: Say) -> None:
    """One trial of every build on fresh servers that share the server core (at once, or in slots)."""
    from echomq_bench.servers import start

    n = len(out.builds)
    order = out.builds[i % n:] + out.builds[:i % n]   # who goes first rotates
    prefix = f"[trial {i + 1}/{trials}]"
    with ExitStack() as stack:
        servers = []
        for build in order:
            server = start(build.spec)
            stack.callback(server.stop)
            servers.append(server)
        results = run_alternating(servers, settings, lua_dirs=[b.lua_dir for b in order], slot_s=slot_s,
                                  progress=_prefixed(say, prefix),
                                  cleanup=any(b.spec.kind == "url" for b in order), seed=i)
    by_name = {b.name: (pos, r) for pos, (b, r) in enumerate(zip(order, results))}
    for build in out.builds:
        pos, result = by_name[build.name]
        # Timeline entries are this build's slots; slot k belongs to round k // n.
        rounds = ({round((t + result.settings.warmup_s) / slot_s) // n: rate for t, rate in result.timeline}
                  if slot_s else {})
        out.trials.append(Trial(build.name, i + 1, i * n + pos + 1, result, rounds))
        say(f"{prefix} {_line(build.name, result)}")


def _line(name: str, result: CapacityResult) -> str:
    return (f"{name}: {result.cycles_per_s:,.0f} cycles/s, server {result.server_utilization:.0%} busy, "
            f"{result.server_us_per_cycle:.2f} µs/cycle, bound {result.bound}")
