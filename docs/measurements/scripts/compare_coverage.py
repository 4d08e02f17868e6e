"""How often does a build verdict's interval cover the true ratio when whole runs shift?

    python docs/measurements/scripts/compare_coverage.py [--reps 4000] [--seed 1]

A build comparison's unit of replication is the run: each run carries a
shift of its own (the machine's minutes, the builds beside it on the core)
that its trials never see. This simulates runs of 16 trials whose log ratio
is the true one, plus a run shift drawn with SD `run_sd`, plus each trial's
noise (SD 1%), and judges each run two ways with the package's own code:

- one level: `judge(ratios)`, the t interval of the run's own trials;
- two levels: `judge(ratios, spread=estimate(...))`, with the between-run
  spread from the ten runs before it (or the declared prior below three).

It prints, per run shift, the share of runs whose 95% interval covers the
true ratio and the share given a wrong decided verdict (faster or slower
when the truth is 1.0). The run shifts span what the project measured: 0.5%
to 2% on its AMD EPYC VM, up to about 5% (7% between two runs) on an Intel VM.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from echomq_bench.measurement.runspread import estimate
from echomq_bench.measurement.verdicts import FASTER, SLOWER, judge

TRIALS, TRIAL_SD, HISTORY = 16, 0.01, 10


def _run(rng: np.random.Generator, true_log: float, run_sd: float) -> tuple[list[float], tuple[float, float]]:
    logs = true_log + rng.normal(0.0, run_sd) + rng.normal(0.0, TRIAL_SD, TRIALS)
    return list(np.exp(logs)), (float(np.mean(logs)), float(np.std(logs, ddof=1) / math.sqrt(TRIALS)))


def coverage(run_sd: float, reps: int, seed: int, history: int) -> dict[str, float]:
    """Coverage and wrong-verdict shares, one level and two, for a null (true ratio 1.0)."""
    rng = np.random.default_rng(seed)
    past = [_run(rng, 0.0, run_sd)[1] for _ in range(history)]
    cover = {"one": 0, "two": 0}
    wrong = {"one": 0, "two": 0}
    for _ in range(reps):
        ratios, summary = _run(rng, 0.0, run_sd)
        spread = estimate([*past[-HISTORY:], summary]) if history else estimate([])
        for level, verdict in (("one", judge(ratios, higher_is_better=False)),
                               ("two", judge(ratios, higher_is_better=False, spread=spread))):
            assert verdict.ci is not None
            cover[level] += verdict.ci[0] <= 1.0 <= verdict.ci[1]
            wrong[level] += verdict.verdict in (FASTER, SLOWER)
        if history:
            past.append(summary)
    return {f"cover_{k}": v / reps for k, v in cover.items()} | {f"wrong_{k}": v / reps for k, v in wrong.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"{TRIALS} trials a run, trial SD {TRIAL_SD:.0%}, true ratio 1.00, {args.reps} runs per row, "
          f"seed {args.seed}")
    print(f"{'run shift SD':>12} {'history':>8} {'covers: one level':>18} {'two levels':>11} "
          f"{'wrong verdict: one':>19} {'two':>6}")
    for run_sd in (0.005, 0.01, 0.02, 0.05):
        for history in (0, HISTORY):
            r = coverage(run_sd, args.reps, args.seed, history)
            label = "prior" if history == 0 else f"{history} runs"
            print(f"{run_sd:>12.1%} {label:>8} {r['cover_one']:>18.1%} {r['cover_two']:>11.1%} "
                  f"{r['wrong_one']:>19.1%} {r['wrong_two']:>6.1%}")


if __name__ == "__main__":
    main()
