"""How often the lease verdict's bounds cover the truth, old method against new, by simulation.

    python docs/measurements/scripts/lease_coverage.py [--reps 2000] [--seed 7]

1. The overrun rate's 95% upper bound (what confirms a lease). A sweep of five
   leases (490 ms to 3.8 s) side by side, 12,700 live executions each over a
   12 s window at time scale 10 (the main job's form), in blocks of twice the
   real lease, true overrun rates 10%, 1%, 0.1%, 0.03% and 0.01%. Overruns
   come independently, or in clusters of five (one stall stretching five
   executions at once, each cluster inside one block); each lease's 40
   longest executions come the same way as its overruns, or, in the last
   world, one at a time while the overruns come in fives (the case a lease
   with few overruns cannot see). Old: Wilson's interval over executions.
   New: the block interval of echomq_bench.lease.blocks (its own design
   effect, or with fewer than 20 overruns its longest executions'). Per lease
   it prints how often the upper bound covers the true rate, and how often it
   is within the 0.1% budget (confirms the lease).
2. The p99 recovery's 95% upper bound. Waits drawn as the model draws them at
   the 2.6 s lease (lease - crash point + tick phase + an exponential wait for a
   free consumer, default work), n crashes per lease: 270 (2% of the main job's
   executions), 400, 500 and 760 (6%). Old: the sample p99 itself, judged against
   the tolerance. New: the order-statistic upper bound (echomq_bench.measurement.intervals),
   none below 367 crashes. It prints how often each is at or above the true p99,
   and how often the new has no bound.

Deterministic for a given --reps and --seed; about ten seconds on one core.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from echomq_bench.lease.blocks import LONGEST, BlockCounts, block_length_s, block_rate, lent_design_effect, \
    wilson_bounds
from echomq_bench.measurement.intervals import quantile_ci

# The main job's leases (nominal ms, run at time scale 10 in a 12 s window) and true overrun rates.
LEASES_MS = (490, 1000, 1700, 2600, 3800)
RATES = (0.10, 0.01, 0.001, 0.0003, 0.0001)
EXECUTIONS = 12_700
WINDOW_S, SCALE = 12.0, 10.0
CLUSTER = 5
BUDGET = 0.001
WORLDS = ("independent", "clusters of 5", "clusters of 5, longest alone")
CRASHES = (270, 400, 500, 760)


def events(rng: np.random.Generator, executions: np.ndarray, expected: float, clustered: bool) -> np.ndarray:
    """Events per block: independent, or clusters of CLUSTER each inside one block."""
    if not clustered:
        return rng.binomial(executions, expected / executions.sum())
    clusters = rng.poisson(expected / CLUSTER)
    return np.minimum(np.bincount(rng.integers(0, executions.size, clusters), minlength=executions.size) * CLUSTER,
                      executions)


def lease_bounds(rng: np.random.Generator, lease_ms: float, rate: float, world: str) -> tuple[float, float]:
    """One lease: its old (Wilson) and new (block) upper bound."""
    blocks = max(1, int(WINDOW_S // block_length_s(lease_ms / SCALE)))
    executions = rng.multinomial(EXECUTIONS, [1 / blocks] * blocks)
    overruns = BlockCounts(executions, events(rng, executions, rate * EXECUTIONS, world != WORLDS[0]))
    longest = BlockCounts(executions, events(rng, executions, LONGEST, world == WORLDS[1]))
    return wilson_bounds(*map(float, overruns.total))[1], block_rate(overruns, lent_design_effect(longest)).hi


def sweep_bounds(rng: np.random.Generator, world: str) -> tuple[list[float], list[float]]:
    """One sweep: each lease's old (Wilson) and new (block) upper bound."""
    bounds = [lease_bounds(rng, lease, rate, world) for lease, rate in zip(LEASES_MS, RATES)]
    return [b[0] for b in bounds], [b[1] for b in bounds]


def overrun_part(reps: int, rng: np.random.Generator) -> None:
    print(f"1. Overrun rate's 95% upper bound: {EXECUTIONS:,} executions per lease, {reps} sweeps")
    print(f"{'world':>31} {'true rate':>9} | {'covers: old':>11} {'new':>6} | {'within 0.1%: old':>16} {'new':>6}")
    for world in WORLDS:
        bounds = [sweep_bounds(rng, world) for _ in range(reps)]
        old, new = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
        for i, rate in enumerate(RATES):
            covers, within = (np.mean(old[:, i] >= rate), np.mean(new[:, i] >= rate)), \
                (np.mean(old[:, i] <= BUDGET), np.mean(new[:, i] <= BUDGET))
            print(f"{world:>31} {rate:>9.2%} | {covers[0]:>11.1%} {covers[1]:>6.1%} | "
                  f"{within[0]:>16.1%} {within[1]:>6.1%}")


def waits(rng: np.random.Generator, n: int) -> np.ndarray:
    """Crash -> re-claim at a 2.6 s lease, ms: what the model draws (docs/design/lease-model.md)."""
    sigma = math.log(5) / 2.3263
    work = 200 * np.exp(sigma * rng.standard_normal(n))
    return 2600 - rng.random(n) * work + rng.random(n) * 250 + rng.exponential(8.0, n)


def p99_part(reps: int, rng: np.random.Generator) -> None:
    true_p99 = float(np.quantile(waits(np.random.default_rng(0), 4_000_000), 0.99))
    print(f"\n2. p99 recovery's 95% upper bound at a 2.6 s lease (true p99 {true_p99:.0f} ms), {reps} samples each")
    print(f"{'crashes':>7} | {'covers: old (the p99)':>21} {'new (upper bound)':>17} | {'new has no bound':>16}")
    for n in CRASHES:
        old, new, none = 0, 0, 0
        for _ in range(reps):
            xs = waits(rng, n)
            old += float(np.quantile(xs, 0.99)) >= true_p99
            hi = quantile_ci(xs, 0.99)[1]
            none += not math.isfinite(hi)
            new += math.isfinite(hi) and hi >= true_p99
        print(f"{n:>7} | {old / reps:>21.1%} {new / reps:>17.1%} | {none / reps:>16.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    overrun_part(args.reps, rng)
    p99_part(args.reps, rng)


if __name__ == "__main__":
    main()
