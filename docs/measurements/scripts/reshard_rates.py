"""How often `echomq-bench reshard` catches scripts that half-move a job while
a slot moves, and how often it passes the shipped ones.

    python docs/measurements/scripts/reshard_rates.py [--runs 10] [--moving 10] [--planted REV]

The planted defect is the scripts of an earlier revision (--planted, a git
revision of this repository; by default the last one before the scripts
read every row before their first write and treated a row missing while a
slot moves as the server's refusal). Their promote drops due ids before it
reads the rows, and on an importing node their claim, reap and promote
bury a job whose row has not arrived yet, writing a second row there.

Each run is one `run_reshard` per cluster build, the command's own load and
moves for --moving seconds; the two script sets alternate run by run. A
run fails when the command would exit 1: a MIGRATE refused, a job lost or
stranded, a call-log check that fails. Printed per build and script set: the
runs, the failures and why, and the failure rate with its exact
(Clopper-Pearson) 95% interval: sensitivity for the planted scripts, one
minus specificity for the shipped ones.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from scipy.stats import binomtest

from echomq_bench.faults.reshard import run_reshard
from echomq_bench.records.kinds.faults import AuditEntry
from echomq_bench.records.kinds.reshard import ReshardRun
from echomq_bench.servers import parse_server_spec

ROOT = Path(__file__).resolve().parents[3]
PLANTED = "5fa7e13"
BUILDS = ("redis-cluster", "valkey-cluster")


def why(result: ReshardRun) -> str:
    if result.passed:
        return "pass"
    if result.move_refused:
        return "MIGRATE refused"
    if AuditEntry.from_record(result.audit).lost or result.in_no_set or result.without_row:
        return "lost or stranded"
    return "audit or call log"


def planted_scripts(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "lua"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "lua"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per build and script set (default 10)")
    parser.add_argument("--moving", type=float, default=10.0, help="seconds of moves per run (default 10)")
    parser.add_argument("--planted", default=PLANTED, help=f"git revision of the planted scripts (default {PLANTED})")
    args = parser.parse_args()
    outcomes: dict[tuple[str, str], Counter[str]] = {}
    with tempfile.TemporaryDirectory(prefix="reshard-planted-") as tmp:
        arms = {"planted": str(planted_scripts(args.planted, Path(tmp))), "shipped": str(ROOT / "lua")}
        for run in range(args.runs):
            for arm, folder in arms.items():
                os.environ["ECHOMQ_LUA_DIR"] = folder
                for build in BUILDS:
                    result = run_reshard(parse_server_spec(build), moving_s=args.moving)
                    outcomes.setdefault((build, arm), Counter())[why(result)] += 1
                    print(f"run {run + 1}/{args.runs} {arm:7} {build:14} {why(result)}"
                          + (f" ({result.move_refused})" if result.move_refused else ""), flush=True)
    print(f"\n{'build':14} {'scripts':8} {'runs':>4} {'failed':>6}  rate [95% CI]   why")
    for (build, arm), counts in sorted(outcomes.items()):
        n, failed = sum(counts.values()), n_failed(counts)
        ci = binomtest(failed, n).proportion_ci(confidence_level=0.95, method="exact")
        reasons = ", ".join(f"{k} {v}" for k, v in counts.items() if k != "pass") or "-"
        print(f"{build:14} {arm:8} {n:>4} {failed:>6}  {failed / n:.2f} [{ci.low:.2f}, {ci.high:.2f}]   {reasons}")


def n_failed(counts: Counter[str]) -> int:
    return sum(v for k, v in counts.items() if k != "pass")


if __name__ == "__main__":
    main()
