"""Does the gate hold on this machine? Run it repeatedly, unchanged and with a slowed claim.

    python docs/measurements/scripts/gate_sensitivity.py [--server SPEC]... [--unchanged 20]
        [--slowed 10] [--slowdown 0.20] [--detect 0.10] [--detect-runs 10]
        [--baseline DIR] [--as-another-machine] [--quick]

1. Calibrate busy loops so that claim costs --slowdown (and --detect) more
   server time: claim's typical server time in the gate's own state, the
   loop's cost per iteration, and the result checked A/B (interleaved, same
   server).
2. Run `echomq-bench gate` --unchanged times on unchanged code: each must
   exit 0 (exit 3, inconclusive, counts as not passed).
3. Run it --slowed times with ECHOMQ_LUA_DIR at a copy of lua/ whose claim
   carries the --slowdown loop: each must exit 1 naming claim and nothing else.
4. Run it --detect-runs times at --detect: the detection rate is printed,
   with no target.

Every gate is a fresh `python -m echomq_bench gate` process against the
baselines (default results/baselines), exactly as CI would run it.
--as-another-machine gives the gate copies of those baselines without their
machine fingerprint, which is what a machine with a differing fingerprint
sees: the cross-run figure is advisory and only a script A/B can fail. Run
it on an otherwise idle machine: it is a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from echomq_bench.microbench.baseline import slowed_copy
from echomq_bench.measurement.intervals import wilson
from echomq_bench.measurement.serverstats import command_stats
from echomq_bench.microbench.baseline import default_baseline_dir
from echomq_bench.microbench.runner import FULL, MeasureOptions, measure, typical
from echomq._instrument import lua_dir
from echomq_bench.servers import DEFAULT_SPECS, running

LOOP_LUA = "local burn = 0 for i = 1, tonumber(ARGV[1]) do burn = burn + i end return 0"


def loop_ns_per_iteration(client: object, n: int = 200_000, tries: int = 7) -> float:
    """Server ns per iteration of the busy loop (EVAL usec delta, median of tries)."""
    out = []
    for _ in range(tries):
        before = command_stats(client, "eval")[1]
        client.eval(LOOP_LUA, 0, n)  # type: ignore[attr-defined]
        after = command_stats(client, "eval")[1]
        out.append((after - before) * 1000 / n)
    return statistics.median(out)


def calibrate(server: object, slowdown: float, work: Path) -> tuple[Path, int, float, float]:
    """A slowed copy whose claim is `slowdown` slower; returns its folder,
    the loop's iterations, claim's µs and the slowdown measured A/B (the
    full settings whatever the gate's mode: this figure is the one reported)."""
    client = server.client()  # type: ignore[attr-defined]
    m = measure(client, MeasureOptions(settings=FULL, cases=["claim"]))
    claim_us = typical([us for b in m.batches("claim") for us in b.server_us])
    per_iter_us = loop_ns_per_iteration(client) / 1000
    iterations = max(1, round(slowdown * claim_us / per_iter_us))
    tries = []
    for _ in range(4):  # the loop inside claim costs a little more or less than alone: adjust
        # A fresh folder each try: scripts are cached by folder.
        folder = slowed_copy(work / f"lua-slow-claim-{iterations}", "claim", iterations)
        ab = measure(client, MeasureOptions(settings=FULL, cases=["claim"], ab_lua_dir=str(lua_dir()),
                                            lua_dir=folder, ab_cases=["claim"]))
        measured = ab.comparisons()["claim"].ratio - 1
        tries.append((abs(measured - slowdown), iterations, folder, measured))
        if abs(measured - slowdown) <= 0.02:
            break
        iterations = max(1, round(iterations * slowdown / measured)) if measured > 0 else iterations * 2
    _, iterations, folder, measured = min(tries, key=lambda t: t[0])
    client.close()
    return folder, iterations, claim_us, measured


def without_fingerprint(baseline: Path, work: Path) -> Path:
    """Copies of the baselines as a machine with another fingerprint finds them."""
    out = work / "baselines-elsewhere"
    out.mkdir()
    for path in sorted(baseline.glob("gate-*.json")):
        data = json.loads(path.read_text())
        data.pop("fingerprint", None)
        (out / path.name).write_text(json.dumps(data, indent=2))
    if not any(out.iterdir()):
        raise SystemExit(f"no gate-<build>.json in {baseline}")
    return out


def one_gate(specs: list[str], baseline: str | None, quick: bool, out: Path, lua: Path | None) -> dict[str, object]:
    cmd = [sys.executable, "-m", "echomq_bench", "gate", "--count", "time", "--out", str(out)]
    for spec in specs:
        cmd += ["--server", spec]
    if baseline:
        cmd += ["--baseline", baseline]
    if quick:
        cmd.append("--quick")
    env = dict(os.environ)
    if lua is not None:
        env["ECHOMQ_LUA_DIR"] = str(lua)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"gate failed to run (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    named = {b["build"]: b["regressions"] for b in summary["builds"]}
    noisy = {b["build"]: b["inconclusive"] for b in summary["builds"]}
    claim = {}
    for b in summary["builds"]:
        v = next(v for v in b["verdicts"] if v["case"] == "claim")
        claim[b["build"]] = (v["change"], v["ab_change"])
    flagged = {b["build"]: [v["case"] for v in b["verdicts"] if v["status"] == "ok (not confirmed)"]
               for b in summary["builds"]}
    return {"exit": proc.returncode, "named": named, "noisy": noisy, "claim": claim, "unconfirmed": flagged,
            "took": took, "stdout": proc.stdout}


def _pct(x: float | None) -> str:
    return "   -   " if x is None else f"{x * 100:+6.1f}%"


def _joined(per_build: dict[str, list[str]]) -> str:
    return ", ".join(f"{b}:{'+'.join(v)}" for b, v in per_build.items() if v) or "-"


def series(label: str, runs: int, lua: Path | None, want_fail: bool, args: argparse.Namespace,
           specs: list[str], baseline: str, work: Path) -> tuple[int, dict[str, int]]:
    """`runs` gates; how many came out as wanted (a pass, or a failure naming
    claim alone on every build), and per build how many named claim alone."""
    good = 0
    per_build: dict[str, int] = {}
    for n in range(runs):
        r = one_gate(specs, baseline, args.quick, work / f"{label.replace(' ', '-')}-{n}", lua)
        named = r["named"]
        if want_fail:
            ok = r["exit"] == 1 and all(v == ["claim"] for v in named.values())
        else:
            ok = r["exit"] == 0
        good += ok
        for build, verbs in named.items():
            per_build[build] = per_build.get(build, 0) + (verbs == ["claim"])
        claims = " ".join(f"{_pct(c[0]):>11} /{_pct(c[1]):>10}" for c in r["claim"].values())
        print(f"{label + ' ' + str(n + 1):<16} {r['exit']:>4}  {_joined(named):<24} {_joined(r['noisy']):<22} "
              f"{claims}  {_joined(r['unconfirmed']):<20} {r['took']:>5.0f}", flush=True)
        if args.show:
            print(r["stdout"])
    return good, per_build


def _rate(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} (Wilson 95% {lo * 100:.0f}-{hi * 100:.0f}%)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", default=None)
    parser.add_argument("--unchanged", type=int, default=20)
    parser.add_argument("--slowed", type=int, default=10)
    parser.add_argument("--slowdown", type=float, default=0.20)
    parser.add_argument("--detect", type=float, default=0.10, help="a smaller slowdown whose detection rate is printed")
    parser.add_argument("--detect-runs", type=int, default=10)
    parser.add_argument("--baseline", default=None, help="a folder of gate-<build>.json (default results/baselines)")
    parser.add_argument("--as-another-machine", action="store_true",
                        help="give the gate the baselines without their machine fingerprint")
    parser.add_argument("--quick", action="store_true", help="run the quick gate")
    parser.add_argument("--show", action="store_true", help="print each gate's table")
    args = parser.parse_args()
    specs = args.server or list(DEFAULT_SPECS)
    work = Path(tempfile.mkdtemp(prefix="echomq-sensitivity-"))
    baseline = Path(args.baseline) if args.baseline else default_baseline_dir()
    if args.as_another_machine:
        baseline = without_fingerprint(baseline, work)
    with running(specs[0]) as (server,):
        slow = calibrate(server, args.slowdown, work / "slowdown") if args.slowed else (lua_dir(), 0, 0.0, 0.0)
        small = calibrate(server, args.detect, work / "detect") if args.detect_runs else None
        version = server.version()
    none = (lua_dir(), 0, 0.0, 0.0)
    for name, (folder, iterations, claim_us, measured) in (("slowed", slow), ("detect", small or none)):
        if not iterations:
            continue
        print(f"calibration ({name}) on {version}: claim {claim_us:.1f} µs typical server time; busy loop of "
              f"{iterations} iterations -> claim {measured * 100:+.1f}% server time, measured A/B against the "
              f"original; scripts at {folder}")
    seen = " (fingerprint removed: as another machine sees them)" if args.as_another_machine else ""
    print(f"baselines: {baseline}{seen}")
    print(f"{'run':<16} {'exit':>4}  {'regressed':<24} {'inconclusive':<22} "
          + " ".join(f"{s + ' claim norm/AB':>24}" for s in specs) + f"  {'unconfirmed flags':<20} {'s':>5}")
    passed, _ = series("unchanged", args.unchanged, None, False, args, specs, str(baseline), work)
    caught, _ = series("slowed claim", args.slowed, slow[0], True, args, specs, str(baseline), work)
    detected, by_build = series("smaller slowdown", args.detect_runs, small[0], True, args, specs, str(baseline),
                                work) if small else (0, {})
    if args.unchanged:
        print(f"unchanged code: {_rate(passed, args.unchanged)} passed (target all)")
    if args.slowed:
        print(f"claim {slow[3] * 100:+.1f}% slower: {_rate(caught, args.slowed)} failed naming claim alone "
              "(target all)")
    if small:
        print(f"claim {small[3] * 100:+.1f}% slower: detected on every build in {_rate(detected, args.detect_runs)}; "
              + ", ".join(f"{b} alone {_rate(k, args.detect_runs)}" for b, k in by_build.items()))
    shutil.rmtree(work, ignore_errors=True)
    return 0 if passed == args.unchanged and caught == args.slowed else 1


if __name__ == "__main__":
    sys.exit(main())
