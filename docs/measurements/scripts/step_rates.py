"""How often does the history's step detection flag noise, and how often does it find a real step?

    python docs/measurements/scripts/step_rates.py [--trials 500] [--seed 1]

Simulated series, no server: n runs of a figure with relative noise
(gaussian, or Laplace of the same standard deviation), optionally with 5%
of the runs thrown 30% off (a run that met a busy neighbour), and with or
without a step of +15% halfway. Each series goes through exactly what
`echomq-bench history` does with one (echomq_bench.measurement.steps:
fit_segments, then flag_steps at the default 5% threshold). Printed per
case: the share of flat series with any step flagged (false alarms), the
share of stepped series with the step flagged at exactly its run, and the
share with it flagged within one run. docs/guide/history.md quotes it.
"""

from __future__ import annotations

import argparse
import math
import random

from echomq_bench.measurement.steps import fit_segments, flag_steps

CASES = [  # (runs, noise, step at, outliers)
    (8, 0.02, 4, False), (12, 0.02, 6, False), (12, 0.02, 10, False), (16, 0.02, 8, False),
    (30, 0.02, 15, False), (12, 0.05, 6, False), (30, 0.05, 15, False),
    (12, 0.02, 6, True), (30, 0.02, 15, True), (60, 0.02, 30, True),
]
STEP = 0.15


def series(rng: random.Random, n: int, noise: float, at: int | None, outliers: bool, laplace: bool) -> list[float]:
    out = []
    for i in range(n):
        if laplace:
            e = rng.expovariate(math.sqrt(2) / noise) * rng.choice((-1, 1))  # Laplace with sd = noise
        else:
            e = rng.gauss(0, noise)
        if outliers and rng.random() < 0.05:
            e += 0.3 * rng.choice((-1, 1))
        out.append(10.0 * (1 + STEP if at is not None and i >= at else 1.0) * (1 + e))
    return out


def rates(rng: random.Random, trials: int, n: int, noise: float, at: int, outliers: bool,
          laplace: bool) -> tuple[float, float, float]:
    false = exact = near = 0
    for _ in range(trials):
        false += bool(flag_steps(fit_segments(series(rng, n, noise, None, outliers, laplace))))
        found = [s.index for s in flag_steps(fit_segments(series(rng, n, noise, at, outliers, laplace)))]
        exact += at in found
        near += any(abs(i - at) <= 1 for i in found)
    return false / trials, exact / trials, near / trials


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"{args.trials} series per cell; step +{STEP:.0%}; threshold 5%")
    print(f"{'runs':>4} {'noise':>5} {'step at':>7} {'outliers':>8} {'noise':>8}  {'false alarm':>11} "
          f"{'step exact':>10} {'within 1':>8}")
    for n, noise, at, outliers in CASES:
        for laplace in (False, True):
            false, exact, near = rates(rng, args.trials, n, noise, at, outliers, laplace)
            print(f"{n:>4} {noise:>5.0%} {at + 1:>7} {'5% @30%' if outliers else '-':>8} "
                  f"{'laplace' if laplace else 'gauss':>8}  {false:>11.1%} {exact:>10.1%} {near:>8.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
