"""How often compare's verdict is wrong on this machine: A/A compares, and compares of a planted cost.

    python docs/measurements/scripts/compare_calibration.py [--build redis] [--aa 20] [--planted 10]
        [--effect 0.05] [--trials 10] [--duration 5] [--out FILE.csv]

1. Specificity: --aa compares of one build against itself, at compare's
   defaults (10 trials of 5 s, together on one core). `faster` or `slower`
   is a false alarm; the target is at most 1 in 20.
2. Sensitivity: --planted compares of the build against a copy of its
   scripts whose claim burns extra server time, sized on this server so
   that one claim+complete cycle costs --effect more server time: the
   claim's extra µs is effect x the cycle's server µs, measured first. The
   target is `slower` in at least 9 of 10.

Every compare prints its label (ratio, interval, method, n, exclusions,
verdict); the end prints both rates with Wilson 95% intervals. Run it on an
otherwise idle machine: it is a measurement.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

from capacity_targets import slow_scripts

from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.capacity.runner import measure
from echomq_bench.capacity.compare import Build, run_compare, unique_builds
from echomq_bench.measurement.intervals import wilson
from echomq_bench.measurement.verdicts import FASTER, SLOWER
from echomq_bench.progress import Progress
from echomq_bench.servers import ServerSpec, parse_server_spec


def one(builds: list[Build], settings: CapacitySettings, trials: int, name: str, progress: Progress) -> dict[str, str]:
    result = run_compare(builds, settings, trials, progress=progress)
    progress.done()
    v = result.verdict(name, "server_us")
    assert v is not None
    return {"verdict": v.verdict, "label": v.label(), "n": str(v.n), "excluded": str(v.excluded)}


def rate_line(what: str, hits: int, n: int) -> str:
    lo, hi = wilson(hits, n)
    return f"{what}: {hits}/{n} = {hits / n:.0%} (Wilson 95% CI {lo:.0%}-{hi:.0%})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="redis", help="the build every compare runs (default redis)")
    parser.add_argument("--aa", type=int, default=20, help="A/A compares (default 20)")
    parser.add_argument("--planted", type=int, default=10, help="compares against the planted cost (default 10)")
    parser.add_argument("--effect", type=float, default=0.05, help="planted server cost per cycle (default 0.05)")
    parser.add_argument("--trials", type=int, default=10, help="trials per compare (compare's default, 10)")
    parser.add_argument("--duration", type=float, default=5.0, help="window per trial, s (compare's default, 5)")
    parser.add_argument("--out", type=Path, default=None, help="CSV of every compare")
    args = parser.parse_args()
    progress = Progress()
    settings = CapacitySettings(duration_s=args.duration)
    spec = parse_server_spec(args.build)
    rows = []

    print(f"1. A/A: {args.build} against itself, {args.aa} compares of {args.trials} trials of {args.duration:g}s")
    for i in range(args.aa):
        row = one([Build(s) for s in unique_builds([spec, spec])], settings, args.trials, f"{spec.name}-2", progress)
        rows.append({"kind": "aa", "i": str(i + 1), **row})
        print(f"   {i + 1:>2}: {row['label']}", flush=True)

    if args.planted:
        rows += planted(args, spec, settings, progress)
    _report(rows, args)
    return 0


def planted(args: argparse.Namespace, spec: ServerSpec, settings: CapacitySettings,
            progress: Progress) -> list[dict[str, str]]:
    rows = []
    cycle_us = measure(spec, CapacitySettings(duration_s=3.0), progress=progress).server_us_per_cycle
    progress.done()
    with tempfile.TemporaryDirectory(prefix="echomq-planted-") as tmp:
        folder, base, slowed = slow_scripts(args.build, Path(tmp), extra_us=args.effect * cycle_us)
        print(f"\n2. planted: claim {base:.2f} -> {slowed:.2f} µs in the script, +{slowed - base:.2f} µs on a "
              f"{cycle_us:.2f} µs cycle (+{(slowed - base) / cycle_us:.1%}); {args.planted} compares")
        slow = parse_server_spec(f"slow={spec.binary} {' '.join(spec.args)}".strip())
        for i in range(args.planted):
            row = one([Build(spec), Build(slow, folder)], settings, args.trials, "slow", progress)
            rows.append({"kind": "planted", "i": str(i + 1), **row})
            print(f"   {i + 1:>2}: {row['label']}", flush=True)
    return rows


def _report(rows: list[dict[str, str]], args: argparse.Namespace) -> None:
    aa = [r for r in rows if r["kind"] == "aa"]
    slowed = [r for r in rows if r["kind"] == "planted"]
    false_alarms = sum(r["verdict"] in (FASTER, SLOWER) for r in aa)
    found = sum(r["verdict"] == SLOWER for r in slowed)
    print()
    if aa:
        print(rate_line("A/A called faster or slower (target at most 1 in 20)", false_alarms, len(aa)))
    if slowed:
        print(rate_line(f"planted +{args.effect:.0%} called slower (target at least 9 in 10)", found, len(slowed)))
    if args.out:
        with args.out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
