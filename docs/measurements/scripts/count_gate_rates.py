"""Does the instruction-count gate hold? Run it repeatedly, unchanged and with a costlier claim.

    python docs/measurements/scripts/count_gate_rates.py --server SPEC [--unchanged 20]
        [--planted 10] [--costlier 0.02] [--detect 0.01] [--baseline DIR] [--as-another-machine]
        [--skip-unchanged] [--skip-planted]

1. Calibrate a busy loop in claim by instructions: count claim on a fresh
   server with a copy of lua/ whose claim spins CALIBRATION iterations, and
   take (that count - the baseline's mean) / CALIBRATION per iteration.
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
from echomq_bench.lease.stats import wilson
from echomq_bench.microbench.baseline import default_baseline_dir, slowed_copy
from echomq_bench.servers import parse_server_spec
from echomq_bench.servers.embedded import spec_binary

CALIBRATION = 2000


def gate(spec: str, baseline: Path, lua: Path | None) -> tuple[int, list[str], float, int]:
    """One gate process: its exit code, the verbs it names as costlier, its wall time, its servers."""
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
    if done.returncode not in (0, 1):
        print(done.stderr[-2000:], file=sys.stderr)
    return done.returncode, named, wall, servers


def per_iteration(spec_text: str, baseline: Path, tmp: Path) -> tuple[float, float]:
    """Instructions per busy-loop iteration in claim, and claim's baseline mean."""
    spec = parse_server_spec(spec_text)
    binary = binary_identity(spec_binary(spec))
    base = load_count_baseline(count_baseline_path(baseline, spec.name, binary), binary)
    mean = float(base["figures"]["claim"]["instructions"])
    run = count_spec(spec, lua_dir=slowed_copy(tmp / "calibration", "claim", CALIBRATION))
    return (run.verbs["claim"].instructions - mean) / CALIBRATION, mean


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
            passed = sum(code == 0 for code, _, _, _ in results)
            walls = sorted(w for _, _, w, _ in results)
            confirmed = sum(servers > 1 for _, _, _, servers in results)
            print(f"{a.server} unchanged: passed {rate(passed, len(results))}; a first count over its allowance, "
                  f"cleared by the confirming server, in {confirmed}; wall s min {walls[0]:.1f} "
                  f"median {walls[len(walls) // 2]:.1f} max {walls[-1]:.1f}; named: "
                  f"{sorted({v for _, named, _, _ in results for v in named}) or 'nothing'}", flush=True)
        if a.skip_planted:
            return 0
        per_iter, mean = per_iteration(a.server, baseline, tmp)
        print(f"{a.server} calibration: claim {mean:,.0f} instructions per call, the loop {per_iter:.1f} per "
              f"iteration", flush=True)
        for label, fraction in (("costlier", a.costlier), ("detect", a.detect)):
            iterations = round(fraction * mean / per_iter)
            lua = slowed_copy(tmp / label, "claim", iterations)
            results = [gate(a.server, baseline, lua) for _ in range(a.planted)]
            alone = sum(code == 1 and named == ["claim"] for code, named, _, _ in results)
            print(f"{a.server} claim +{fraction:.0%} ({iterations} iterations): failed naming claim alone "
                  f"{rate(alone, len(results))}; exits {[code for code, _, _, _ in results]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
