"""Does the instruction-count gate hold? Run it repeatedly, unchanged and with a costlier claim.

    python docs/measurements/scripts/count_gate_rates.py --server SPEC [--unchanged 20]
        [--planted 10] [--costlier 0.02] [--detect 0.01] [--baseline DIR] [--as-another-machine]
        [--skip-unchanged] [--skip-planted]

1. Calibrate a busy loop in claim by instructions: count claim on two fresh
   servers with copies of lua/ whose claim spins SHORT and LONG iterations;
   the slope between them is the cost per iteration, and what the short
   loop adds beyond SHORT iterations over the baseline's mean is the loop's
   fixed cost. Each planted run prints the change the gate measured.
2. Run `echomq-bench gate --count instructions` --unchanged times on
   unchanged code: each must exit 0.
3. Run it --planted times with ECHOMQ_LUA_DIR at a copy whose claim costs
   --costlier more instructions: each must exit 1 naming claim alone.
4. Run it --planted times at --detect: the detection rate is printed.

Every gate is a fresh `python -m echomq_bench gate` process against the
baselines (default results/baselines), as CI runs it. --as-another-machine
gives it copies of those baselines whose `recorded_on` names another CPU,
which is what a baseline recorded on another machine with the same binary
looks like. Counts do not depend on the machine's load, so this may run
beside other work; its wall times do.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from echomq_bench.counts.baseline import count_baseline_path, load_count_baseline
from echomq_bench.counts.identity import binary_identity
from echomq_bench.counts.measure import count_spec
from echomq_bench.measurement.intervals import wilson
from echomq_bench.microbench.baseline import default_baseline_dir, slowed_copy
from echomq_bench.servers import parse_server_spec
from echomq_bench.servers.embedded import spec_binary

SHORT, LONG = 200, 2000


def gate(spec: str, baseline: Path, lua: Path | None) -> tuple[int, list[str], float, int, float]:
    """One gate process: its exit code, the verbs it names as costlier, its wall time, its servers and
    the change it measured in claim."""
    env = dict(__import__("os").environ)
    if lua is not None:
        env["ECHOMQ_LUA_DIR"] = str(lua)
    with tempfile.TemporaryDirectory() as out:
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "echomq_bench", "gate", "--count", "instructions", "--server",
                               spec, "--baseline", str(baseline), "--out", out], capture_output=True, text=True,
                              env=env)
        wall = time.monotonic() - t0
        summary = json.loads((Path(out) / "summary.json").read_text()) if (Path(out) / "summary.json").exists() else {}
    named = [v for b in summary.get("builds", []) for v in b.get("regressions", [])]
    servers = sum(int(b.get("runs") or 0) for b in summary.get("builds", []))
    claim = [v.get("change") for b in summary.get("builds", []) for v in b.get("verdicts", []) if v["verb"] == "claim"]
    if done.returncode not in (0, 1):
        print(done.stderr[-2000:], file=sys.stderr)
    return done.returncode, named, wall, servers, float(claim[0]) if claim else float("nan")


def calibrate(spec_text: str, baseline: Path, tmp: Path) -> tuple[float, float, float]:
    """Instructions per busy-loop iteration in claim, the loop's fixed cost, and claim's baseline mean."""
    spec = parse_server_spec(spec_text)
    binary = binary_identity(spec_binary(spec))
    base = load_count_baseline(count_baseline_path(baseline, binary), binary)
    mean = float(base["figures"]["claim"]["instructions"])
    short, long = (count_spec(spec, lua_dir=slowed_copy(tmp / f"calibration-{n}", "claim", n)).verbs["claim"]
                   .instructions for n in (SHORT, LONG))
    slope = (long - short) / (LONG - SHORT)
    return slope, short - mean - SHORT * slope, mean


def another_machine(baseline: Path, tmp: Path) -> Path:
    copy = tmp / "another-machine"
    shutil.copytree(baseline, copy)
    for path in copy.rglob("count-*.json"):
        data = json.loads(path.read_text())
        data["recorded_on"] = {"cpu_model": "AMD EPYC 7B13 64-Core Processor", "cpu_flags_sha256": "0" * 64}
        path.write_text(json.dumps(data, indent=1))
    return copy


def rate(hits: int, n: int) -> str:
    low, high = wilson(hits, n)
    return f"{hits}/{n} (95% Wilson {low:.0%}-{high:.0%})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True)
    p.add_argument("--unchanged", type=int, default=20)
    p.add_argument("--planted", type=int, default=10)
    p.add_argument("--costlier", type=float, default=0.02)
    p.add_argument("--detect", type=float, default=0.01)
    p.add_argument("--baseline", type=Path, default=None)
    p.add_argument("--as-another-machine", action="store_true")
    p.add_argument("--skip-unchanged", action="store_true")
    p.add_argument("--skip-planted", action="store_true")
    a = p.parse_args()
    baseline = a.baseline or default_baseline_dir()
    with tempfile.TemporaryDirectory() as tmp_text:
        tmp = Path(tmp_text)
        if a.as_another_machine:
            baseline = another_machine(baseline, tmp)
        if not a.skip_unchanged:
            results = [gate(a.server, baseline, None) for _ in range(a.unchanged)]
            passed = sum(r[0] == 0 for r in results)
            walls = sorted(r[2] for r in results)
            confirmed = sum(r[3] > 1 for r in results)
            print(f"{a.server} unchanged: passed {rate(passed, len(results))}; a first count over its allowance, "
                  f"cleared by the confirming server, in {confirmed}; wall s min {walls[0]:.1f} "
                  f"median {walls[len(walls) // 2]:.1f} max {walls[-1]:.1f}; named: "
                  f"{sorted({v for r in results for v in r[1]}) or 'nothing'}", flush=True)
        if a.skip_planted:
            return 0
        per_iter, fixed, mean = calibrate(a.server, baseline, tmp)
        print(f"{a.server} calibration: claim {mean:,.0f} instructions per call, the loop {per_iter:.1f} per "
              f"iteration and {fixed:,.0f} fixed", flush=True)
        for label, fraction in (("costlier", a.costlier), ("detect", a.detect)):
            iterations = max(1, round((fraction * mean - fixed) / per_iter))
            lua = slowed_copy(tmp / label, "claim", iterations)
            results = [gate(a.server, baseline, lua) for _ in range(a.planted)]
            alone = sum(r[0] == 1 and r[1] == ["claim"] for r in results)
            changes = sorted(r[4] for r in results)
            print(f"{a.server} claim +{fraction:.0%} ({iterations} iterations; the gate measured "
                  f"{changes[0]:+.2%} to {changes[-1]:+.2%}, median {changes[len(changes) // 2]:+.2%}): failed "
                  f"naming claim alone {rate(alone, len(results))}; exits {[r[0] for r in results]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
