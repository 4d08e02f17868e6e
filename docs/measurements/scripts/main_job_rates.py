"""How often the main job decides: its build verdicts and its lease, over repeated default runs.

    python docs/measurements/scripts/main_job_rates.py [--runs 10] [--out DIR] [--read DIR]

Runs `echomq-bench run` (the default plan, every installed build) RUNS times
one after another, each into OUT/run-NN, then reads each run's records:

- a build's verdict against the baseline is decided when it is faster,
  slower or equivalent (not inconclusive);
- the lease is decided when the sweep confirmed one;
- the run's wall time, against the 5-minute budget.

It prints a line per run and the two rates, each with its Wilson 95%
interval. `--read DIR` reads runs already made, without running. Run it on
an otherwise idle machine: the compare shares one core between the builds.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

Z = 1.959964
BUDGET_S = 300.0


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def read(run: Path) -> dict[str, object]:
    compare = json.loads((run / "compare" / "summary.json").read_text())
    lease = json.loads((run / "lease" / "summary.json").read_text())
    whole = json.loads((run / "summary.json").read_text())
    verdicts = {name: e.get("verdict") for name, e in compare["builds"].items() if name != compare["baseline"]}
    trials = compare["trials"]
    return {"run": run.name, "verdicts": verdicts, "trials": trials, "lease_ms": lease.get("recommended_lease_ms"),
            "confirmed": bool(lease.get("confirmed")), "elapsed_s": float(whole.get("elapsed_s", math.nan))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("results/main-job-rates"))
    parser.add_argument("--read", type=Path, default=None, help="read the runs in this folder; run nothing")
    args = parser.parse_args()
    folder = args.read or args.out
    if args.read is None:
        for i in range(1, args.runs + 1):
            target = folder / f"run-{i:02d}"
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "echomq_bench", "run", "--out", str(target)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(f"run {i}: exit {done.returncode} in {time.monotonic() - started:.0f} s", file=sys.stderr,
                  flush=True)
    runs = [read(p) for p in sorted(folder.glob("run-*")) if (p / "summary.json").is_file()]
    decided = total = confirmed = 0
    for r in runs:
        verdicts = r["verdicts"]
        assert isinstance(verdicts, dict)
        ok = sum(v != "inconclusive" and not str(v).startswith("inconclusive") for v in verdicts.values())
        decided += ok
        total += len(verdicts)
        confirmed += bool(r["confirmed"])
        shown = ", ".join(f"{b} {v}" for b, v in verdicts.items())
        print(f"{r['run']}: {r['elapsed_s']:.0f} s, {r['trials']} trials: {shown}; lease "
              f"{r['lease_ms'] if r['confirmed'] else 'none confirmed'}")
    if not runs:
        print(f"no runs in {folder}", file=sys.stderr)
        return 1
    n = len(runs)
    all_decided = sum(all(not str(v).startswith("inconclusive") for v in dict(r["verdicts"]).values())  # type: ignore[arg-type]
                      for r in runs)
    lo, hi = wilson(all_decided, n)
    print(f"runs with every build's verdict decided: {all_decided} of {n} (Wilson 95% {lo:.0%}-{hi:.0%}); "
          f"build verdicts decided: {decided} of {total}")
    lo, hi = wilson(confirmed, n)
    print(f"runs with a confirmed lease: {confirmed} of {n} (Wilson 95% {lo:.0%}-{hi:.0%})")
    slowest = max(float(str(r["elapsed_s"])) for r in runs)
    print(f"slowest run: {slowest:.0f} s against the {BUDGET_S:.0f} s budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
