"""How often the consumers answer covers the true growth, one trial a point against rounds with an interval.

    python docs/measurements/scripts/consumers_coverage.py [--reps 2000] [--seed 1]

Each simulated run draws every window's cycles/s as its build's true rate
at that count times two factors: the trial's own noise (lognormal, 10, 15
or 20% by row) and a slow-minute effect the machine shares, an
Ornstein-Uhlenbeck process in time (15% at rest, a 60 s memory) read at
each window's start; with `--stall`, a window now and then loses 40% (a
stall). The true growth from 1 to 16 consumers differs by build, 5.9x to
7.2x.

- old: every one of six builds, one 1.0 s window a point (2.2 s a window
  with its overhead), builds one after another and counts 1, 4, 16 in that
  order; its answer is the range of the six single-trial growths. It covers
  a build when that build's true growth is inside the range.
- new: the reference and one more build, six rounds of 0.4 s windows (0.85 s
  a window) in the order `capacity.consumers.schedule` draws, judged by
  `measurement.growth` (geometric mean of the rounds' ratios, 95%
  t-interval on their logs). It covers a build when the interval holds its
  true growth.

It prints, per trial noise, how often each answer covered a build's true
growth (and every build's at once), the answer's width as high/low, and for
the old, how often the reference's single figure was within 10% of its truth.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from echomq_bench.capacity.consumers import schedule
from echomq_bench.measurement.growth import WindowRate, growth

COUNTS = (1, 4, 16)
AT_ONE = 4_500.0
# The true growth from 1 to 16 consumers per build; at 4 consumers, half of it.
TRUE = {"redis7.0": 6.9, "redis6.2": 6.2, "redis8.2": 7.2, "valkey8.0": 7.0, "valkey8.1": 6.4, "valkey9.1": 5.9}
SLOW_SD, SLOW_MEMORY_S = 0.15, 60.0
OLD_STEP_S, NEW_STEP_S = 2.2, 0.85     # a window and its overhead, each way
NEW_BUILDS, NEW_ROUNDS = ("redis7.0", "redis6.2"), 6
STALL_LOSS = 0.4


def true_rate(build: str, consumers: int) -> float:
    return AT_ONE * {1: 1.0, 4: TRUE[build] / 2, 16: TRUE[build]}[consumers]


def slow_minutes(rng: np.random.Generator, times: np.ndarray) -> np.ndarray:
    """The shared slow-minute effect (log scale) at each time, an Ornstein-Uhlenbeck process at rest."""
    out = np.empty(len(times))
    level, last = rng.normal(0.0, SLOW_SD), 0.0
    for i, t in enumerate(times):
        keep = math.exp(-(t - last) / SLOW_MEMORY_S)
        level = level * keep + rng.normal(0.0, SLOW_SD * math.sqrt(1 - keep * keep))
        out[i], last = level, t
    return out


def rates(rng: np.random.Generator, plan: list[tuple[str, int]], step_s: float, noise: float,
          stall: float) -> np.ndarray:
    """Each planned window's cycles/s, in the order run."""
    shared = slow_minutes(rng, np.arange(len(plan)) * step_s)
    own = rng.normal(0.0, noise, len(plan))
    stalls = np.where(rng.random(len(plan)) < stall, math.log(1 - STALL_LOSS), 0.0)
    truth = np.array([true_rate(b, c) for b, c in plan])
    out: np.ndarray = truth * np.exp(shared + own + stalls)
    return out


def old_run(rng: np.random.Generator, noise: float, stall: float) -> dict[str, float]:
    """Each build's single-trial growth, builds one after another."""
    plan = [(b, c) for b in TRUE for c in COUNTS]
    got = dict(zip(plan, rates(rng, plan, OLD_STEP_S, noise, stall)))
    return {b: got[b, 16] / got[b, 1] for b in TRUE}


def new_run(rng: np.random.Generator, noise: float, stall: float, seed: int) -> dict[str, tuple[float, float]]:
    """Each build's 95% interval of its growth over the rounds."""
    slots = schedule(len(NEW_BUILDS), COUNTS, NEW_ROUNDS, seed)
    plan = [(NEW_BUILDS[s.build], s.consumers) for s in slots]
    values = rates(rng, plan, NEW_STEP_S, noise, stall)
    windows = [WindowRate(b, s.trial, c, v, "server") for s, (b, c), v in zip(slots, plan, values)]
    out = {}
    for g in growth(windows):
        assert g.verdict.ci is not None and g.verdict.n == NEW_ROUNDS
        out[g.build] = g.verdict.ci
    return out


def row(rng: np.random.Generator, noise: float, reps: int, stall: float) -> str:
    old_builds = old_all = old_ref = new_builds = new_all = 0
    old_width, new_width = [], []
    for rep in range(reps):
        old = old_run(rng, noise, stall)
        low, high = min(old.values()), max(old.values())
        inside = [low <= TRUE[b] <= high for b in TRUE]
        old_builds += sum(inside)
        old_all += all(inside)
        old_ref += abs(old["redis7.0"] / TRUE["redis7.0"] - 1) <= 0.10
        old_width.append(high / low)
        new = new_run(rng, noise, stall, seed=rep)
        held = [ci[0] <= TRUE[b] <= ci[1] for b, ci in new.items()]
        new_builds += sum(held)
        new_all += all(held)
        new_width += [ci[1] / ci[0] for ci in new.values()]
    return (f"{noise:>6.0%} {old_builds / (reps * len(TRUE)):>9.1%} {old_all / reps:>9.1%} "
            f"{float(np.median(old_width)):>9.2f} {old_ref / reps:>9.1%} {new_builds / (reps * len(NEW_BUILDS)):>9.1%} "
            f"{new_all / reps:>9.1%} {float(np.median(new_width)):>9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stall", type=float, default=0.03, help="share of windows a stall hits (default 0.03)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.reps} runs a row; slow minutes {SLOW_SD:.0%} with a {SLOW_MEMORY_S:g} s memory; "
          f"stalls of {STALL_LOSS:.0%} in {args.stall:.0%} of windows")
    print(f"{'':>6} {'old: one trial a point, six builds':>39} {'new: six rounds, two builds':>29}")
    print(f"{'noise':>6} {'a build':>9} {'all six':>9} {'width':>9} {'ref ±10%':>9} {'a build':>9} {'both':>9} "
          f"{'width':>9}")
    for noise in (0.10, 0.15, 0.20):
        print(row(rng, noise, args.reps, args.stall))


if __name__ == "__main__":
    main()
