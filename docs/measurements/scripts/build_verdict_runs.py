"""Does a build verdict hold on the next run? The main job's build comparison, again and again.

    python docs/measurements/scripts/build_verdict_runs.py run DIR [--runs 3] [--config default|planted|both]
    python docs/measurements/scripts/build_verdict_runs.py summary DIR

`run` repeats the comparison exactly as `echomq-bench run` makes it
(`commands.run.build_comparison` with the default plan) and writes each run's
compare record into DIR/<config>/<utc time>/, so the results history
($ECHOMQ_HISTORY, else results/history.sqlite) gains each run as the main
job's does. Run it in groups at least 30 minutes apart, into the same DIR:

- `default`: every build setup installed, each against redis7.0;
- `pair`: redis7.0 and valkey8.1 alone, for what the company on the core
  does to a ratio (not one of the checks);
- `planted`: redis7.0, the same binary again under a second name (redis7.0-2,
  an A/A pair) and `slow`, the same binary with a claim script that burns
  about 5% of a cycle's server time more (kept in DIR/planted-lua so that
  every group judges the same scripts).

`summary` reads every record in DIR and prints, per build, each run's ratio,
95% interval and verdict, then the five checks:

1. at least 7 of 8 runs' intervals hold the pooled mean of the other runs
   (the geometric mean of their ratios), for every non-reference build;
2. no two runs reach opposite decided verdicts;
3. at least 80% of the build verdicts are decided;
4. the A/A pair is never decided different;
5. the planted build is called slower in at least 7 of 8 runs.

It is a measurement: run nothing else on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

from capacity_targets import MARK

from echomq_bench.capacity.compare import Build
from echomq_bench.capacity.compare_files import write_compare
from echomq_bench.commands.run import PLANS, baseline_first, build_comparison
from echomq_bench.measurement.intervals import wilson
from echomq_bench.progress import Progress
from echomq_bench.records.kinds.compare import CompareRecord
from echomq_bench.records.record import read_record
from echomq_bench.servers import installed_builds, parse_server_spec
from echomq._instrument import lua_dir

REFERENCE = "redis7.0"
BURN_LOOPS = 170
PAIRED = "valkey8.1"   # the `pair` config: one build alone with the reference, to see what company does
CONFIGS = ("default", "planted", "pair")
DECIDED = ("faster", "slower", "equivalent")


def planted_lua(top: Path) -> Path:
    """A copy of lua/ whose claim runs a Lua loop of BURN_LOOPS additions first, kept in DIR for
    every later group. The size it plants is read from the runs themselves (`summary` prints slow's
    pooled ratio); on a 2-core AMD EPYC VM 130 loops read +3.9% of a cycle, so 170 aim at about 5%."""
    keep = top / "planted-lua"
    if not (keep / "claim-3.lua").is_file():
        original = (lua_dir() / "claim-3.lua").read_text()
        assert MARK in original, f"claim-3.lua: cannot find where to add the burn ({MARK})"
        shutil.copytree(lua_dir(), keep)
        burn = f"local burn = 0\nfor i = 1, {BURN_LOOPS} do burn = burn + i end  -- bench: a slower claim\n"
        (keep / "claim-3.lua").write_text(original.replace(MARK, burn + MARK))
    return keep


def builds_of(config: str, top: Path) -> list[Build]:
    if config == "default":
        return [Build(s) for s in baseline_first([parse_server_spec(b.name) for b in installed_builds()])]
    if config == "pair":
        return [Build(parse_server_spec(REFERENCE)), Build(parse_server_spec(PAIRED))]
    spec = parse_server_spec(REFERENCE)
    slow = parse_server_spec(f"slow={spec.binary} {' '.join(spec.args)}".strip())
    return [Build(spec), Build(spec), Build(slow, planted_lua(top))]


def run(top: Path, runs: int, configs: list[str]) -> None:
    plan = PLANS["default"]
    progress = Progress()
    for i in range(runs):
        for config in configs:
            builds = builds_of(config, top)
            result = build_comparison(builds, plan, progress)
            progress.done()
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
            out = write_compare(top / config / stamp, result, argv=sys.argv)
            record = CompareRecord.from_record(read_record(out).summary)
            print(f"{config} {i + 1}/{runs} {stamp}: " + "; ".join(
                f"{n} {record.headline_of(e).ratio:.3f} {record.headline_of(e).text}"
                for n, e in record.builds.items() if n != record.base_of(n)), flush=True)


def _records(top: Path, config: str) -> list[tuple[str, CompareRecord]]:
    folders = sorted(p.parent for p in (top / config).glob("*/summary.json"))
    return [(f.name, CompareRecord.from_record(read_record(f).summary)) for f in folders]


def _check(name: str, hits: int, n: int, need: str, ok: bool) -> bool:
    lo, hi = wilson(hits, n) if n else (0.0, 1.0)
    print(f"- {name}: {hits} of {n} (Wilson 95% {lo:.0%}-{hi:.0%}); needs {need}: {'met' if ok else 'MISSED'}")
    return ok


def summary(top: Path) -> int:
    ok = True
    decided = total = 0
    for config in CONFIGS:
        rows = _records(top, config)
        if not rows:
            continue
        builds = [n for n in rows[0][1].builds if n != rows[0][1].base_of(n)]
        print(f"\n## {config}: {len(rows)} runs, each against {rows[0][1].baseline}\n")
        for build in builds:
            verdicts = [r.headline_of(r.builds[build]) for _, r in rows]
            logs = [math.log(v.ratio) for v in verdicts if v.ratio]
            print(f"{build}:")
            inside = 0
            for (stamp, _), v, own in zip(rows, verdicts, logs):
                others = math.exp((sum(logs) - own) / (len(logs) - 1)) if len(logs) > 1 else math.nan
                held = bool(v.ci) and v.ci[0] <= others <= v.ci[1]
                inside += held
                spread = v.spread.text if v.spread else "one level"
                print(f"  {stamp}  {v.ratio:.3f} [{v.ci[0]:.3f}, {v.ci[1]:.3f}] {v.text:<24} others {others:.3f} "
                      f"{'in' if held else 'OUT'}  ({spread})")
            texts = [v.verdict or "" for v in verdicts]
            opposite = len({t for t in texts if t in DECIDED}) > 1
            if config == "default" or build == "redis7.0-2":
                ok &= _check(f"{build}: intervals holding the others' pooled mean", inside, len(rows),
                             "at least 7 of 8", inside * 8 >= 7 * len(rows))
            ok &= _check(f"{build}: decided verdicts that agree", 0 if opposite else len(rows), len(rows),
                         "no opposite pair", not opposite)
            if config == "default":
                decided += sum(t in DECIDED for t in texts)
                total += len(texts)
            elif build == "redis7.0-2":
                wrong = sum(t in ("faster", "slower") for t in texts)
                ok &= _check("A/A decided different", wrong, len(texts), "none", wrong == 0)
            elif build == "slow":
                found = sum(t == "slower" for t in texts)
                ok &= _check("planted called slower", found, len(texts), "at least 7 of 8", found * 8 >= 7 * len(texts))
    if total:
        ok &= _check("default build verdicts decided", decided, total, "at least 80%", decided >= 0.8 * total)
    return 0 if ok else 1


def positions(top: Path) -> None:
    """Does going first cost a build? Per trial, each build's log ratio to the reference against how
    many places later than the reference it started and filled (least squares over every trial)."""
    import numpy as np
    import pandas as pd

    for config in CONFIGS:
        frames = [pd.read_csv(p) for p in sorted((top / config).glob("*/compare.csv"))]
        if not frames:
            continue
        print(f"\n## {config}: start position against the reference, over {len(frames)} runs\n")
        for b in sorted({str(x) for f in frames for x in f["build"]} - {REFERENCE}):
            steps, logs = [], []
            for f in frames:
                us = f[f["metric"] == "server_us_per_cycle"]
                n = us["build"].nunique()
                for _, trial in us.groupby("trial"):
                    mine, ref = trial[trial["build"] == b], trial[trial["build"] == REFERENCE]
                    if len(mine) == 1 and len(ref) == 1:
                        steps.append((int(mine["order"].iloc[0]) - int(ref["order"].iloc[0])) / max(1, n - 1))
                        logs.append(math.log(float(mine["value"].iloc[0]) / float(ref["value"].iloc[0])))
            x, y = np.asarray(steps), np.asarray(logs)
            slope, _ = np.polyfit(x, y, 1)
            resid = y - np.polyval(np.polyfit(x, y, 1), x)
            se = math.sqrt(float(resid @ resid) / (len(x) - 2) / float(((x - x.mean()) ** 2).sum()))
            print(f"- {b}: {len(x)} trials; starting last rather than first changes its ratio by "
                  f"{math.expm1(slope):+.2%} (±{1.96 * se:.2%})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    go = sub.add_parser("run", help="repeat the comparison into DIR")
    go.add_argument("dir", type=Path)
    go.add_argument("--runs", type=int, default=3, help="runs of each config in this group (default 3)")
    go.add_argument("--config", choices=(*CONFIGS, "both"), default="both",
                    help="both: default and planted, in turn; pair: the reference and valkey8.1 alone")
    read = sub.add_parser("summary", help="the runs in DIR and the five checks")
    read.add_argument("dir", type=Path)
    args = parser.parse_args()
    if args.what == "run":
        run(args.dir, args.runs, ["default", "planted"] if args.config == "both" else [args.config])
        return 0
    code = summary(args.dir)
    positions(args.dir)
    return code


if __name__ == "__main__":
    sys.exit(main())
