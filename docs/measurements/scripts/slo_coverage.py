"""How often `--slo`'s interval covers the rate it names, and what a search that never held does to a verdict.

    python docs/measurements/scripts/slo_coverage.py [--runs 400] [--seed 1]

A simulated server: a probe at `rate` holds the target with probability
Phi((ln r50 - ln rate) / width), which falls smoothly from 1 to 0 around
r50; `width` is how gradual the fall is (0.05: a probe at 8% under r50
holds 95% of the time; the six searches per build on
2026-12-03-builds-and-peers.md spread about that much). A search is the
package's own: `slo_search.search_rate` from a closed-loop rate 12% above
r50, to 2%, each rate judged by `slo_search.all_of`; the interval is
`slo_stats.search_interval` (now) or `intervals.median_interval` of the
rates held (before), over 6 searches.

Part 1, per width, how often each rule's interval covers:
- before: one probe per rate, [min, max] of the rates held, printed as a
  "95% interval" of the rate and read, as the guide advised, as a rate to
  plan at: the rate a probe holds 95% of the time (r95);
- now, --slo-held 95% (the default): 14 probes in a row per rate, the
  interval to the rates that missed; it names the rate a probe holds 95.2%
  of the time (0.5^(1/14)), r95.2, and is printed as 96.9%;
- now, --slo-held 50%: one probe per rate, the same interval; it names
  the rate a probe holds half the time, r50.

Part 2, two builds, 8 repetitions: the build holds a rate 10% above the
baseline's (or 10% below it) but never holds in k of its searches (every
probe fails: a broken server in that search). Before, those repetitions
were dropped from the ratios; now they count (`SloResult.verdict`). It
prints how often each rule calls the build that failed faster, slower or
neither (inconclusive, or equivalent).
"""

from __future__ import annotations

import argparse
import math
import random

from scipy.stats import norm

from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.capacity.slo_result import Search, SloResult
from echomq_bench.capacity.slo_search import Found, all_of, held_share, in_a_row, search_rate
from echomq_bench.capacity.slo_spec import parse_slo
from echomq_bench.capacity.slo_stats import search_interval
from echomq_bench.measurement.intervals import median_interval
from echomq_bench.measurement.verdicts import judge

R50 = 50_000.0
SEARCHES = 6
START = 1.12   # the closed-loop rate over r50 (68,447/s held against 76,784/s closed loop on 2026-12-03)
START_SPREAD = 0.02   # the closed loop's own spread between searches (76,192/s and 75,072/s in the guide's sample)


def rate_held(share: float, width: float, r50: float = R50) -> float:
    """The rate at which one probe holds with probability `share`."""
    return r50 * math.exp(-width * float(norm.ppf(share)))


class Server:
    """Probes whose chance to hold falls smoothly with the rate; `broken` ones never hold."""

    def __init__(self, rng: random.Random, width: float, r50: float = R50) -> None:
        self.rng, self.width, self.r50 = rng, width, r50
        self.probes = 0

    def once(self, rate: float, phase: str, attempt: int) -> bool:
        self.probes += 1
        z = (math.log(rate) - math.log(self.r50)) / self.width
        return self.rng.random() < 0.5 * math.erfc(z / math.sqrt(2))

    def search(self, probes_in_a_row: int, broken: bool = False) -> Found:
        start = self.r50 * START * math.exp(self.rng.gauss(0.0, START_SPREAD))
        if broken:
            return search_rate(lambda rate, phase: False, start)
        return search_rate(all_of(self.once, probes_in_a_row), start)


def covers(interval: tuple[float, float] | None, value: float) -> bool:
    return interval is not None and interval[0] <= value <= interval[1]


def coverage_rows(runs: int, seed: int, widths: list[float]) -> None:
    print(f"Part 1: {runs} runs of {SEARCHES} searches per row; share of runs whose interval covers the rate")
    print(f"{'width':>6}  {'rule':<42} {'names':<7} {'covers it':>9} {'r50':>6} {'r95':>6} {'probes/search':>13}")
    strict = in_a_row(0.95)
    for width in widths:
        rng = random.Random(f"{seed}-{width}")
        r95, r95_2 = rate_held(0.95, width), rate_held(held_share(strict), width)
        for rule, m, names, truth in (("before: 1 probe, [min, max] of rates held", 1, "r95", r95),
                                      (f"now, --slo-held 95%: {strict} in a row", strict, "r95.2", r95_2),
                                      ("now, --slo-held 50%: 1 probe", 1, "r50", R50)):
            server = Server(rng, width)
            hit = {"it": 0, "r50": 0, "r95": 0}
            for _ in range(runs):
                found = [server.search(m) for _ in range(SEARCHES)]
                if rule.startswith("before"):
                    interval = median_interval([f.rate or 0.0 for f in found]).ci
                else:
                    interval = search_interval([(f.rate, f.failed_above) for f in found]).interval
                for key, value in (("it", truth), ("r50", R50), ("r95", r95)):
                    hit[key] += covers(interval, value)
            print(f"{width:>6.2f}  {rule:<42} {names:<7} {hit['it'] / runs:>9.1%} {hit['r50'] / runs:>6.1%} "
                  f"{hit['r95'] / runs:>6.1%} {server.probes / (runs * SEARCHES):>13.1f}")


def old_verdict(result: SloResult, build: str, baseline: str) -> str:
    """The verdict as it was made before: repetitions in which either side never held left out."""
    mine = {s.search: s.value for s in result.of(build)}
    theirs = {s.search: s.value for s in result.of(baseline)}
    pairs = [(mine[i], theirs[i]) for i in sorted(set(mine) & set(theirs))]
    kept = [a / b for a, b in pairs if a > 0 and b > 0]
    return judge(kept, higher_is_better=True, excluded=len(pairs) - len(kept)).verdict


def _search(build: str, i: int, found: Found) -> Search:
    return Search(build, build, i, 1, found.rate, found.failed_above, found.resolved, R50 * START, ())


def failed_rows(runs: int, seed: int, width: float, repetitions: int = 8) -> None:
    print(f"\nPart 2: {runs} compares of {repetitions} repetitions per row, width {width}, 1 probe per rate (the "
          "ratio's rule does not depend on it);\nthe build holds 10% more (or less) than the baseline but never "
          "holds in k of its searches")
    print(f"{'build':>11} {'k':>2}  {'before: faster':>14} {'slower':>7} {'neither':>8}  {'now: faster':>11} "
          f"{'slower':>7} {'neither':>8}")
    slo, settings = parse_slo("claim p99 <= 5ms"), CapacitySettings(duration_s=2.0)
    for effect, name in ((1.10, "10% more"), (0.90, "10% less")):
        for k in (0, 1, 2):
            rng = random.Random(f"{seed}-failed-{effect}-{k}")
            base, build = Server(rng, width), Server(rng, width, R50 * effect)
            before, now = {"faster": 0, "slower": 0}, {"faster": 0, "slower": 0}
            for _ in range(runs):
                broken = set(rng.sample(range(1, repetitions + 1), k))
                searches = [_search("base", i, base.search(1)) for i in range(1, repetitions + 1)]
                searches += [_search("build", i, build.search(1, broken=i in broken))
                             for i in range(1, repetitions + 1)]
                result = SloResult(slo, settings, ("base", "build"), tuple(searches), 0.02, "simulated")
                for counts, verdict in ((before, old_verdict(result, "build", "base")),
                                        (now, result.verdict("build", "base").verdict)):
                    if verdict in counts:
                        counts[verdict] += 1
            print(f"{name:>11} {k:>2}  {before['faster'] / runs:>14.1%} {before['slower'] / runs:>7.1%} "
                  f"{1 - (before['faster'] + before['slower']) / runs:>8.1%}  {now['faster'] / runs:>11.1%} "
                  f"{now['slower'] / runs:>7.1%} {1 - (now['faster'] + now['slower']) / runs:>8.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400, help="simulated runs per row (default 400)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    coverage_rows(args.runs, args.seed, [0.01, 0.03, 0.05, 0.10])
    failed_rows(args.runs, args.seed, 0.05)


if __name__ == "__main__":
    main()
