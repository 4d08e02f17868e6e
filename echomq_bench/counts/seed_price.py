"""The seed's price: what the queue's checks cost in instructions against the
bare state machine they guard.

The seed's scripts (echomq_bench/counts/seed/: its claim verbatim, a
minimal fenced complete and a minimal enqueue) move a job through the same
keys with no check beyond the fence and the id's kind. Counted with the
gate's machinery (counts.measure) on a fresh server of a build, from the
prepared states, populations, warm-up and calls per window the gate's own
run of that build used, each verb's instructions per call set against the
project's from that run give project over seed: what the checks, the
damage handling and the argument validation add to the same transition.
The cycle is enqueue, claim and complete summed, per call.

A lens, not a verdict: the ratio fails nothing, and what stops the seed's
count is written in the record rather than raised, so the gate's own
verdict stands whatever happens here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis

from echomq import EchoMQError
from echomq_bench.counts.measure import Counted, CountRun, count_spec
from echomq_bench.errors import BenchError
from echomq_bench.microbench.cases import Sizes
from echomq_bench.progress import ProgressFn, silent
from echomq_bench.records.kinds.counts import SeedPrice, SeedVerbPrice

__all__ = ["SEED_SCRIPTS", "VERBS", "count_seed", "seed_price", "count_seed_price"]

# Beside this module, so an installed wheel carries the scripts where a checkout keeps them.
SEED_SCRIPTS = Path(__file__).with_name("seed")
# The verbs the seed has scripts for, in the order the gate counts them.
VERBS = ("enqueue", "claim", "complete")
# What can stop a count: the instrument's failures (valgrind, a reply other than the state's), the client's and
# the server connection's. Anything else is a bug and surfaces.
_STOPS = (BenchError, EchoMQError, redis.RedisError)


def count_seed(spec: Any, like: CountRun, progress: ProgressFn = silent) -> CountRun:
    """The seed's scripts on a fresh server of `spec`, counted from the prepared states, populations, warm-up and
    calls per window that `like`, the project's run, was counted with. Raises as count_spec does: a verb that
    replied other than its state must (MicrobenchError), a server that could not be counted (CallgrindError)."""
    settings = like.settings
    counted = Counted(verbs=VERBS, warmup=int(settings["warmup"]), sizes=Sizes(**settings["sizes"]))
    return count_spec(spec, lua_dir=SEED_SCRIPTS, calls=int(settings["calls"]),
                      heavy_calls=int(settings["heavy_calls"]), counted=counted, progress=progress)


def seed_price(project: CountRun, seed: CountRun) -> SeedPrice:
    """Per verb and for the cycle, the project's instructions per call, the seed's, and project over seed."""
    missing = [v for v in VERBS if v not in project.verbs or v not in seed.verbs]
    if missing:
        raise ValueError(f"the seed's price needs {', '.join(VERBS)} in both runs; missing: {', '.join(missing)}")
    ours = {v: project.verbs[v].instructions for v in VERBS}
    theirs = {v: seed.verbs[v].instructions for v in VERBS}
    cycle_ours, cycle_theirs = sum(ours.values()), sum(theirs.values())
    return SeedPrice(verbs=tuple(SeedVerbPrice(verb=v, project=round(ours[v], 1), seed=round(theirs[v], 1),
                                               ratio=round(ours[v] / theirs[v], 4)) for v in VERBS),
                     project=round(cycle_ours, 1), seed=round(cycle_theirs, 1),
                     ratio=round(cycle_ours / cycle_theirs, 4), scripts=dict(seed.scripts),
                     wall_s=round(seed.wall_s, 1))


def count_seed_price(spec: Any, project: CountRun, progress: ProgressFn = silent) -> SeedPrice:
    """The seed's price on a fresh server of `spec` beside `project`, the gate's run of that build; when the
    seed's count cannot be taken, an entry that says why instead."""
    try:
        return seed_price(project, count_seed(spec, project, progress))
    except _STOPS as exc:
        return SeedPrice(skipped=f"{type(exc).__name__}: {exc}")
