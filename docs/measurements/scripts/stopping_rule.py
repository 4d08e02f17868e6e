"""How an adaptive compare's stopping rule changes its verdicts' error rates, by simulation.

    python docs/measurements/scripts/stopping_rule.py [--reps 3000] [--seed 2]

Each simulated compare draws one log ratio per trial from a normal law (the
true ratio, a noise per trial) and applies `judge` after each trial from the
sixth to the cap of 16, under three rules:

- fixed: the verdict at 10 trials, whatever came before;
- precision: stop at the first trial where the 95% interval is within ±1%
  (what `--precision 1%` and the main job do), else at the cap;
- decided: stop at the first trial that gives a verdict.

It prints, per true ratio and noise, how often each verdict came out and the
mean trials used. At a true ratio of 1.02, the edge of the 2% equivalence
margin, "equivalent" is an error: TOST promises it at most 5% of the time.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from echomq_bench.measurement.verdicts import INCONCLUSIVE, judge, precision_reached

RULES = ("fixed", "precision", "decided")
CAP = 16


def one(logs: np.ndarray, rule: str) -> tuple[str, int]:
    verdict = None
    for n in range(6, CAP + 1):
        ratios = list(np.exp(logs[:n]))
        verdict = judge(ratios, higher_is_better=False)
        if rule == "fixed" and n == 10:
            break
        if rule == "precision" and precision_reached(ratios, 0.01):
            break
        if rule == "decided" and verdict.verdict != INCONCLUSIVE:
            break
    assert verdict is not None
    return verdict.verdict, n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{'noise':>6} {'ratio':>6} {'rule':>10} {'equivalent':>11} {'slower':>7} {'faster':>7} "
          f"{'inconclusive':>12} {'trials':>7}")
    for noise in (0.007, 0.012, 0.02):
        for true in (1.0, 1.01, 1.02, 1.03):
            draws = rng.normal(math.log(true), noise, (args.reps, CAP))
            for rule in RULES:
                got = [one(row, rule) for row in draws]
                share = {v: sum(g == v for g, _ in got) / args.reps
                         for v in ("equivalent", "slower", "faster", INCONCLUSIVE)}
                print(f"{noise:>6.1%} {true:>6.2f} {rule:>10} {share['equivalent']:>11.1%} {share['slower']:>7.1%} "
                      f"{share['faster']:>7.1%} {share[INCONCLUSIVE]:>12.1%} {np.mean([n for _, n in got]):>7.1f}")


if __name__ == "__main__":
    main()
