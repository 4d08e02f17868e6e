"""Does the gate hold on this machine? Run it repeatedly, both ways.

    python docs/measurements/scripts/gate_sensitivity.py [--server SPEC]... [--runs 10] [--slowdown 0.30] [--quick]

1. Calibrate a busy loop so that claim costs `--slowdown` more server time:
   measure claim's typical server time in the gate's own state, the loop's
   cost per iteration, and check the result A/B (interleaved, same server).
2. Run `echomq-bench gate` --runs times on unchanged code: each must pass.
3. Run it --runs times with ECHOMQ_LUA_DIR at a copy of lua/ whose claim
   carries the loop: each must fail, naming claim and nothing else.

Every gate is a fresh `python -m echomq_bench gate` process against the committed
baseline (results/baselines), exactly as CI would run it. Run it on an
otherwise idle machine: another load on the same cores widens the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from echomq_bench.commands.gate import slowed_copy
from echomq_bench.measurement.serverstats import command_stats
from echomq_bench.microbench.runner import FULL, MeasureOptions, measure, typical
from echomq.scripts import lua_dir
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


def one_gate(specs: list[str], baseline: str | None, quick: bool, out: Path, lua: Path | None) -> dict[str, object]:
    cmd = [sys.executable, "-m", "echomq_bench", "gate", "--out", str(out)]
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
    if proc.returncode not in (0, 1):
        raise SystemExit(f"gate failed to run (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    named = {b["build"]: b["regressions"] for b in summary["builds"]}
    claim = {}
    for b in summary["builds"]:
        v = next(v for v in b["verdicts"] if v["case"] == "claim")
        claim[b["build"]] = (v["change"], v["ab_change"])
    flagged = {b["build"]: [v["case"] for v in b["verdicts"] if v["status"] == "ok (not confirmed)"]
               for b in summary["builds"]}
    return {"exit": proc.returncode, "named": named, "claim": claim, "unconfirmed": flagged, "took": took,
            "stdout": proc.stdout}


def _pct(x: float | None) -> str:
    return "   -   " if x is None else f"{x * 100:+6.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", default=None)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--slowdown", type=float, default=0.30)
    parser.add_argument("--baseline", default=None, help="as for echomq-bench gate (default results/baselines)")
    parser.add_argument("--quick", action="store_true", help="run the quick gate")
    parser.add_argument("--show", action="store_true", help="print each gate's table")
    args = parser.parse_args()
    specs = args.server or list(DEFAULT_SPECS)

    work = Path(tempfile.mkdtemp(prefix="echomq-sensitivity-"))
    with running(specs[0]) as (server,):
        slow, iterations, claim_us, measured = calibrate(server, args.slowdown, work)
        version = server.version()
    print(f"calibration on {version}: claim {claim_us:.1f} µs typical server time; busy loop of {iterations} "
          f"iterations -> claim {measured * 100:+.1f}% server time, measured A/B against the original")
    print(f"slowed copy: {slow} (ECHOMQ_LUA_DIR for the second half)")
    print(f"{'run':<14} {'exit':>4}  {'regressed':<28} " + " ".join(
        f"{s + ' claim norm/AB':>24}" for s in specs) + f"  {'unconfirmed flags':<24} {'s':>5}")

    tallies = {}
    for label, lua, want_fail in (("unchanged", None, False), ("slowed claim", slow, True)):
        good = 0
        for n in range(args.runs):
            r = one_gate(specs, args.baseline, args.quick, work / f"{label.replace(' ', '-')}-{n}", lua)
            named = r["named"]
            if want_fail:
                ok = r["exit"] == 1 and all(v == ["claim"] for v in named.values())
            else:
                ok = r["exit"] == 0
            good += ok
            regressed = ", ".join(f"{b}:{'+'.join(v)}" for b, v in named.items() if v) or "-"
            claims = " ".join(f"{_pct(c[0]):>11} /{_pct(c[1]):>10}" for c in r["claim"].values())
            unconf = ", ".join(f"{b}:{'+'.join(v)}" for b, v in r["unconfirmed"].items() if v) or "-"
            print(f"{label + ' ' + str(n + 1):<14} {r['exit']:>4}  {regressed:<28} {claims}  {unconf:<24} "
                  f"{r['took']:>5.0f}{'' if ok else '  <-- WRONG'}", flush=True)
            if args.show:
                print(r["stdout"])
        tallies[label] = good
    print(f"unchanged code: {tallies['unchanged']}/{args.runs} passed (target {args.runs}/{args.runs})")
    print(f"claim {measured * 100:+.1f}% slower: {tallies['slowed claim']}/{args.runs} failed naming claim alone "
          f"(target {args.runs}/{args.runs})")
    return 0 if tallies["unchanged"] == args.runs and tallies["slowed claim"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
