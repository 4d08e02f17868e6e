"""How often does the history call a step in a flat series whose runs drift together, and what does a
real step cost in runs before it is called? asv's fit alone against the verdict that allows for it.

    python docs/measurements/scripts/history_correlated.py [--flat 1000] [--stepped 400] [--seed 1]

Simulated series, no server. The noise is relative and AR(1): each run's
deviation is rho times the one before plus a fresh gaussian part, scaled
so that its standard deviation (the spread) is 2% or 6% whatever rho is;
rho 0 is independent runs. Each series goes through exactly what
`echomq-bench history` does with one, at the default 5% threshold:

- old: asv's fit and flagging alone (echomq_bench.measurement.steps), a
  step for every flag;
- new: the same flags, each called only when its interval, which allows
  neighbouring runs a lag-1 correlation of 0.7, excludes no change
  (echomq_bench.measurement.stepverdict); the rest are inconclusive.

Printed:
1. flat series (8, 12 and 30 runs): the share with any step (old: flagged,
   new: called), with its 95% Wilson interval, and the mean lag-1
   correlation of the runs about their fitted levels, which is why the
   verdict does not estimate rho from a series;
2. a +15% step after 8 runs, by the runs after it: the share called at
   exactly its run, old and new (what allowing for correlation costs in
   runs before a step is called);
3. the same with 5% of the runs thrown 30% off (a busy neighbour).
"""

from __future__ import annotations

import argparse

import numpy as np

from echomq_bench.measurement.intervals import wilson
from echomq_bench.measurement.stepverdict import RUN_CORRELATION, judge_steps, within_correlation

RHOS = (0.0, 0.3, 0.5, 0.7)
SPREADS = (0.02, 0.06)
FLAT_RUNS = (8, 12, 30)
STEP = 0.15
BEFORE = 8
AFTER = (1, 2, 4, 6, 8, 12)


def series(rng: np.random.Generator, n: int, rho: float, spread: float, at: int | None = None,
           wild: bool = False) -> list[float]:
    """n runs of a 10 µs figure with AR(1) relative noise; +STEP from run `at` on; optionally wild runs."""
    noise = np.empty(n)
    noise[0] = rng.normal(0, spread)
    fresh = rng.normal(0, spread * np.sqrt(1 - rho * rho), n)
    for i in range(1, n):
        noise[i] = rho * noise[i - 1] + fresh[i]
    if wild:
        noise += (rng.random(n) < 0.05) * 0.3 * rng.choice((-1, 1), n)
    y = 10.0 * (1 + noise)
    if at is not None:
        y[at:] *= 1 + STEP
    return [float(v) for v in y]


def steps_at(y: list[float]) -> tuple[list[int], list[int], float | None]:
    """(where asv flags a step, where the verdict calls one, the runs' lag-1 correlation about the fit)."""
    segments, verdicts = judge_steps(y)
    return [v.index for v in verdicts], [v.index for v in verdicts if v.called], within_correlation(y, segments)


def rate(k: int, n: int) -> str:
    low, high = wilson(k, n)
    return f"{k / n:6.1%} ({low:.1%}-{high:.1%})"


def flat_table(rng: np.random.Generator, trials: int) -> None:
    print(f"1. flat series, {trials} per cell: share with a step (95% Wilson interval)")
    print(f"{'runs':>4} {'spread':>6} {'rho':>4}  {'old: flagged':>22}  {'new: called':>22}  {'lag-1 about fit':>15}")
    for n in FLAT_RUNS:
        for spread in SPREADS:
            for rho in RHOS:
                old = new = 0
                lags = []
                for _ in range(trials):
                    flags, called, lag = steps_at(series(rng, n, rho, spread))
                    old += bool(flags)
                    new += bool(called)
                    lags += [lag] if lag is not None else []
                print(f"{n:>4} {spread:>6.0%} {rho:>4}  {rate(old, trials):>22}  {rate(new, trials):>22}  "
                      f"{np.mean(lags):>15.2f}")


def step_table(rng: np.random.Generator, trials: int) -> None:
    print(f"\n2. +{STEP:.0%} step after {BEFORE} runs, {trials} per cell: share called at exactly its run, old / new, "
          "by runs after it")
    print(f"{'spread':>6} {'rho':>4}  " + "  ".join(f"{f'{a} after':>13}" for a in AFTER))
    for spread in SPREADS:
        for rho in RHOS:
            cells = []
            for after in AFTER:
                old = new = 0
                for _ in range(trials):
                    flags, called, _ = steps_at(series(rng, BEFORE + after, rho, spread, at=BEFORE))
                    old += BEFORE in flags
                    new += BEFORE in called
                cells.append(f"{old / trials:5.1%} /{new / trials:6.1%}")
            print(f"{spread:>6.0%} {rho:>4}  " + "  ".join(f"{c:>13}" for c in cells))


def wild_table(rng: np.random.Generator, trials: int) -> None:
    print(f"\n3. 2% spread, rho 0, 5% of runs 30% off, {trials} per cell: old / new")
    print(f"{'runs':>4} {'step at':>7}  {'flat: any step':>16}  {'step at its run':>16}")
    for n, at in ((12, 6), (30, 15)):
        false_old = false_new = found_old = found_new = 0
        for _ in range(trials):
            flags, called, _ = steps_at(series(rng, n, 0.0, 0.02, wild=True))
            false_old, false_new = false_old + bool(flags), false_new + bool(called)
            flags, called, _ = steps_at(series(rng, n, 0.0, 0.02, at=at, wild=True))
            found_old, found_new = found_old + (at in flags), found_new + (at in called)
        print(f"{n:>4} {at + 1:>7}  {false_old / trials:6.1%} /{false_new / trials:6.1%}  "
              f"{found_old / trials:6.1%} /{found_new / trials:6.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flat", type=int, default=1000, help="flat series per cell")
    parser.add_argument("--stepped", type=int, default=400, help="stepped series per cell")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"threshold 5%; the verdict allows a lag-1 correlation of {RUN_CORRELATION}; seed {args.seed}\n")
    flat_table(rng, args.flat)
    step_table(rng, args.stepped)
    wild_table(rng, args.stepped)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
