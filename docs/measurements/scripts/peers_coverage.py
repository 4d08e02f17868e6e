"""How often the peers verdicts hold, old method against new, by simulation with the package's own judge.

    python docs/measurements/scripts/peers_coverage.py [--families 400] [--reps 400] [--seed 5]

Part 1, a family of null peers. Each simulated run has 20 peers and the
baseline, no true difference between any of them, over the 6 rounds every
queue gets. Each queue's log server µs per job in round t is a round
effect shared by every queue (the machine's state that round) plus noise
of its own; each peer's ratio pairs round t with the baseline's round t,
so the round effect cancels and the baseline's noise ties the 20 ratios
together. Every ratio is judged by `verdicts.judge`: the old method at
95% each; the new at the Bonferroni level of its family
(`echomq_bench.peers.family`): m = 20 (these verdicts alone) and m as a
default run has it (every queue and mode but the baseline, four figures
each). It prints the share of runs in which any peer was called faster or
slower (the family-wise false-verdict rate) and the share in which every
interval held the true ratio 1 (family-wise coverage).

Part 2, the headline. The interleaved rounds run the pair minutes apart,
other queues between, so a drift between the pair's two runs stays in the
ratio (--drift), and their conditions may shift the ratio itself
(--shift); the headline rounds run the pair back to back. The old method
pools the 6 interleaved rounds with headline rounds until its 95% interval
is within ±5%, at most 40 rounds in all; the new judges the headline rounds
alone at 97.5% (both modes on a server: a family of two), stopping by the
same rule, at most 40 headline rounds. It prints how often each interval
holds the pair's ratio under each kind of round, beside the table's echomq
row (the interleaved rounds alone, at the level of a default run's
family). The noise figures are
parameters, not measurements: --noise is the run-to-run spread of one
queue's server µs per job.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from echomq_bench.measurement.verdicts import FASTER, SLOWER, judge, precision_reached
from echomq_bench.peers.family import family_level
from echomq_bench.peers.headline import headline_level
from echomq_bench.peers.registry import BASELINE, PEERS, modes_of
from echomq_bench.peers.summary import RATIO_FIGURES

PEERS_SIMULATED = 20
ROUNDS = 6            # the default --trials: the rounds every queue gets
PRECISION = 0.05      # the default --precision
MAX_ROUNDS = 40       # the default --max-trials


def default_family() -> int:
    """The verdicts on one server in a default run: every queue and mode but the baseline, each figure."""
    rows = sum(len(modes_of(name)) for name in PEERS if name != BASELINE)
    return rows * len(RATIO_FIGURES)


def one_family(rng: np.random.Generator, levels: list[float], noise: float, round_sd: float) -> list[tuple[bool, bool]]:
    """One simulated run: per level, (any false verdict, every interval covers 1)."""
    shared = rng.normal(0, round_sd, ROUNDS)
    base = shared + rng.normal(0, noise, ROUNDS)
    logs = shared + rng.normal(0, noise, (PEERS_SIMULATED, ROUNDS)) - base
    out = []
    for level in levels:
        wrong, covered = False, True
        for row in logs:
            v = judge(list(np.exp(row)), higher_is_better=False, level=level)
            assert v.ci is not None
            wrong |= v.verdict in (FASTER, SLOWER)
            covered &= v.ci[0] <= 1.0 <= v.ci[1]
        out.append((wrong, covered))
    return out


def part_family(args: argparse.Namespace, rng: np.random.Generator) -> None:
    m = default_family()
    methods = [("old: each at 95%", 0.95), (f"new: Bonferroni, m = {PEERS_SIMULATED}", family_level(PEERS_SIMULATED)),
               (f"new: Bonferroni, m = {m} (a default run)", family_level(m))]
    results = [one_family(rng, [lvl for _, lvl in methods], args.noise, args.round_sd) for _ in range(args.families)]
    print(f"Part 1: {args.families} runs of {PEERS_SIMULATED} null peers, {ROUNDS} rounds, noise {args.noise:.0%} "
          f"per run, round effect {args.round_sd:.0%} shared")
    print(f"{'method':<40} {'level':>7} {'any false verdict':>18} {'all 20 covered':>15}")
    for i, (name, level) in enumerate(methods):
        wrong = sum(r[i][0] for r in results) / args.families
        covered = sum(r[i][1] for r in results) / args.families
        print(f"{name:<40} {level:>7.2%} {wrong:>18.1%} {covered:>15.1%}")


METHODS = {"old": "old: pooled, 95%", "new": "new: headline rounds alone, 97.5%",
           "table": "new: table row, interleaved rounds alone"}


def headline_run(rng: np.random.Generator, args: argparse.Namespace, method: str) -> tuple[float, float, int]:
    """One interval of the pair's ratio (log scale) by `method`, and the rounds it pooled."""
    theta_alone, theta_inter = 0.0, math.log1p(args.shift)
    pair_sd = math.sqrt(2) * args.noise
    inter = theta_inter + rng.normal(0, math.hypot(pair_sd, args.drift), ROUNDS)
    alone = theta_alone + rng.normal(0, pair_sd, MAX_ROUNDS)
    if method == "table":   # the echomq row of the table: the interleaved rounds, at the family's level
        v = judge(list(np.exp(inter)), higher_is_better=False, level=family_level(default_family()))
        assert v.ci is not None
        return math.log(v.ci[0]), math.log(v.ci[1]), ROUNDS
    pooled = method == "old"
    level = 0.95 if pooled else headline_level(2)
    cap = MAX_ROUNDS - ROUNDS if pooled else MAX_ROUNDS
    for k in range(cap + 1):
        logs = np.concatenate([inter, alone[:k]]) if pooled else alone[:k]
        if len(logs) and precision_reached(list(np.exp(logs)), PRECISION, level):
            break
    v = judge(list(np.exp(logs)), higher_is_better=False, level=level)
    assert v.ci is not None
    return math.log(v.ci[0]), math.log(v.ci[1]), len(logs)


def part_headline(args: argparse.Namespace, rng: np.random.Generator) -> None:
    print(f"\nPart 2: {args.reps} headlines; pair noise {math.sqrt(2) * args.noise:.1%} per round, drift between "
          f"the pair's runs in an interleaved round {args.drift:.0%}")
    print(f"{'shift':>6} {'method':<42} {'mean rounds':>11} {'holds alone ratio':>18} {'holds interleaved':>18}")
    for shift in (0.0, args.shift):
        run_args = argparse.Namespace(**{**vars(args), "shift": shift})
        for method, name in METHODS.items():
            got = [headline_run(rng, run_args, method) for _ in range(args.reps)]
            alone = np.mean([lo <= 0.0 <= hi for lo, hi, _ in got])
            inter = np.mean([lo <= math.log1p(shift) <= hi for lo, hi, _ in got])
            rounds = np.mean([n for _, _, n in got])
            print(f"{shift:>6.0%} {name:<42} {rounds:>11.1f} {alone:>18.1%} {inter:>18.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=400, help="simulated runs of the null family (part 1)")
    parser.add_argument("--reps", type=int, default=400, help="simulated headlines per case (part 2)")
    parser.add_argument("--noise", type=float, default=0.04, help="run-to-run spread of one queue, log scale")
    parser.add_argument("--round-sd", type=float, default=0.05, help="round effect shared by every queue")
    parser.add_argument("--drift", type=float, default=0.03, help="drift between the pair's interleaved runs")
    parser.add_argument("--shift", type=float, default=0.05, help="the interleaved rounds' ratio over the alone's")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    part_family(args, rng)
    part_headline(args, rng)


if __name__ == "__main__":
    main()
