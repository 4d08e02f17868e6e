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

The verdicts and the summary are `echomq_bench.capacity.compare_result`:
the headline is the ratio of server µs per cycle, judged by a t-interval on
the log ratios of the trials that were server-bound
(`echomq_bench.measurement.verdicts`). Absolute cycles/s under `together`
are each build's share of one core, about half its capacity. With
`precision` the run is adaptive: it stops once the headline's interval is
within ±precision for every build, or at `trials`. The rule looks at how
wide the intervals are, never at where they lie, so the verdicts keep the
error rates of a fixed number of trials (docs/design/compare.md).

Builds that share the server core each need enough calls in flight to
outlast the scheduler's slice: a server that answers everything it holds
before its slice ends sleeps until its driver sends more, and that idle
time makes a trial read as not server-bound. `SHARED_CORE_PIPELINE` is
sized for it.

A build is any server spec (`NAME=BINARY ARGS...`) and may carry its own
copy of the scripts: `--scripts NAME=DIR` runs build NAME with the Lua in
DIR, so a change to a script is judged the same way as a change of server.
"""

from __future__ import annotations

import random
from contextlib import ExitStack
from dataclasses import replace
from typing import Sequence

from echomq_bench.capacity.compare_result import (HEADLINE, INTERLEAVE_TEXT, METRICS, PAIR_BY, Build,
                                                  CompareResult, Judging, Trial)
from echomq_bench.capacity.result import CapacityResult
from echomq_bench.capacity.runner import SLOT_S, measure_server, run_alternating
from echomq_bench.capacity.settings import CapacityError, CapacitySettings, refuse_clusters
from echomq_bench.measurement.verdicts import precision_reached
from echomq_bench.progress import ProgressFn, prefixed, silent
from echomq_bench.servers import ServerSpec, parse_server_spec

__all__ = ["Build", "Judging", "Trial", "CompareResult", "run_compare", "unique_builds", "as_build", "METRICS",
           "INTERLEAVE", "PAIR_BY", "INTERLEAVE_TEXT", "DEFAULT_TRIALS", "PRECISION_CAP", "SHARED_CORE_PIPELINE",
           "trial_order"]

DEFAULT_TRIALS = 10
PRECISION_CAP = 30   # the most trials an adaptive run takes when --trials is not given
INTERLEAVE = ("together", "slot", "trial")
# Jobs in flight per connection when builds share the server core. With
# capacity's 4 x 64, about 1.7 ms of server work at 6.5 µs per call, a
# server ran dry inside its scheduler slice: four builds together on a 6.18
# kernel read 96-99% busy+wait against the 97% rule, and on another VM half
# the trials were left out. 4 x 256 (about 7 ms queued) read 99.4-100.3%.
SHARED_CORE_PIPELINE = 256
COMPARE_SETTINGS = CapacitySettings(duration_s=5.0, pipeline=SHARED_CORE_PIPELINE)


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
        out.append(spec if name == spec.name else replace(spec, name=name))
    return out


def run_compare(builds: Sequence[Build | ServerSpec | str],
                settings: CapacitySettings = COMPARE_SETTINGS, trials: int = DEFAULT_TRIALS, *,
                interleave: str = "together", slot_s: float = SLOT_S, progress: ProgressFn | None = None,
                judging: Judging | None = None, seed: int | None = None) -> CompareResult:
    """Every build `trials` times, each trial on fresh servers; with
    `judging.precision`, fewer once the headline's interval is that tight.

    interleave="together": each trial starts every build's server and loads
    them all at once on one core; "slot": in turns of `slot_s` seconds;
    "trial": one whole run per build, A B A B (see the module's docstring).
    `judging.pair_by` says which build each ratio is against (compare_result.PAIR_BY).
    A build may be a Build, a ServerSpec or SPEC text ("valkey"); a name
    given twice becomes NAME, NAME-2, ... (an A/A check).

    Each trial starts and fills the builds in an order drawn from `seed`
    (a fresh one when None), so no build is always first to take memory or
    the core. With `judging.between_runs`, each headline interval adds the
    spread of this machine's earlier runs of the same pair
    (capacity.compare_history).
    """
    judging = judging or Judging()
    runs = _checked(builds, trials, interleave, judging)
    settings.check()
    settings = replace(settings, queues=settings.queues or 1)
    if interleave == "slot" and settings.rate is not None:
        raise CapacityError("turns in slots need a closed loop: leave out --rate, or run the builds together")
    progress = progress or silent
    seed = random.SystemRandom().randrange(2 ** 31) if seed is None else seed
    done: list[Trial] = []
    for i in range(trials):
        # The C client's ceiling once per build, when asked.
        run_settings = settings if i == 0 else replace(settings, ceiling=False)
        if interleave in ("together", "slot"):
            done += _shared_trial(runs, (i, seed), trials, run_settings, slot_s if interleave == "slot" else None,
                                  progress)
        else:
            for build in trial_order(runs, seed, i):
                prefix = f"[{len(done) + 1}/{trials * len(runs)}] trial {i + 1}"
                result = measure_server(build.spec, run_settings, lua_dir=build.lua_dir,
                                        progress=prefixed(progress, prefix))
                done.append(Trial(build.name, i + 1, len(done) + 1, result))
                progress(f"{prefix} {_line(build.name, result)}")
        out = CompareResult(tuple(runs), settings, tuple(done), margin=judging.margin, interleave=interleave,
                            precision=judging.precision, pair_by=judging.pair_by, order_seed=seed)
        precision = judging.precision
        if precision is not None and _precise(out, precision):
            progress(f"stopped after {i + 1} trials: every build's {METRICS[HEADLINE][2]} interval is within "
                f"±{precision:.1%}")
            break
    if not judging.between_runs:
        return out
    from echomq_bench.capacity.compare_history import spreads_for

    return replace(out, spreads=spreads_for(out))


def _checked(builds: Sequence[Build | ServerSpec | str], trials: int, interleave: str,
             judging: Judging) -> list[Build]:
    """The builds as the run names them, once the arguments are known to be usable."""
    given = [as_build(b) for b in builds]
    refuse_clusters(b.spec for b in given)
    runs = [Build(spec, b.lua_dir) for spec, b in zip(unique_builds([b.spec for b in given]), given)]
    if len(runs) < 2:
        raise CapacityError("compare needs at least two builds (repeat one for an A/A check)")
    if trials < 2:
        raise CapacityError(f"compare needs at least 2 trials, got {trials}")
    if interleave not in INTERLEAVE:
        raise CapacityError(f"interleave must be one of {', '.join(INTERLEAVE)}, got {interleave!r}")
    if judging.pair_by not in PAIR_BY:
        raise CapacityError(f"pair_by must be one of {', '.join(PAIR_BY)}, got {judging.pair_by!r}")
    return runs


def trial_order(builds: Sequence[Build], seed: int, trial: int) -> list[Build]:
    """The order trial `trial` starts, fills and lists its builds in: drawn, not rotated, so that
    no build keeps a place (first to take memory, last to start) across a run or from run to run."""
    return random.Random(f"{seed}:{trial}").sample(list(builds), len(builds))


def _precise(out: CompareResult, precision: float) -> bool:
    """Every build's headline ratios, over the trials that count, give an interval within ±precision."""
    for build in out.builds:
        if out.baseline_of(build.name) == build.name:
            continue
        ratios = [r for r, ok in zip(out.trial_ratios(build.name, HEADLINE), out.saturated(build.name)) if ok]
        if not precision_reached(ratios, precision):
            return False
    return True


def _shared_trial(builds: list[Build], at: tuple[int, int], trials: int, settings: CapacitySettings,
                  slot_s: float | None, progress: ProgressFn) -> list[Trial]:
    """One trial (`at`: its index and the run's order seed) of every build on fresh servers that
    share the server core (at once, or in slots)."""
    from echomq_bench.servers import start

    i, seed = at
    n = len(builds)
    order = trial_order(builds, seed, i)
    prefix = f"[trial {i + 1}/{trials}]"
    with ExitStack() as stack:
        servers = []
        for build in order:
            server = start(build.spec)
            stack.callback(server.stop)
            servers.append(server)
        results = run_alternating(servers, settings, lua_dirs=[b.lua_dir for b in order], slot_s=slot_s,
                                  progress=prefixed(progress, prefix),
                                  cleanup=any(b.spec.kind == "url" for b in order), seed=i)
    by_name = {b.name: (pos, r) for pos, (b, r) in enumerate(zip(order, results))}
    done = []
    for build in builds:
        pos, result = by_name[build.name]
        # Timeline entries are this build's slots; slot k belongs to round k // n.
        rounds = ({round((t + result.settings.warmup_s) / slot_s) // n: rate for t, rate in result.timeline}
                  if slot_s else {})
        done.append(Trial(build.name, i + 1, i * n + pos + 1, result, rounds))
        progress(f"{prefix} {_line(build.name, result)}")
    return done


def _line(name: str, result: CapacityResult) -> str:
    return (f"{name}: {result.cycles_per_s:,.0f} cycles/s, server {result.server_utilization:.0%} busy, "
            f"{result.server_us_per_cycle:.2f} µs/cycle, bound {result.bound}")
