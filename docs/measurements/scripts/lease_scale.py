"""Is a lease confirmed at a time scale a bound on the unscaled one? The same sweep at scale 1 and scale S.

    python docs/measurements/scripts/lease_scale.py [--server redis7.0] [--scale 10] [--window 12]
                                                   [--unscaled-window 120] [--out DIR] [--read]

Runs `echomq-bench lease` twice on the same build with the same leases, work
and seed: at time scale S for WINDOW seconds (what the main job does), then
in real time for UNSCALED_WINDOW seconds (S times as long at S = 10, so both
see about as many executions). For each lease it prints, from each run's
record: executions, the false-expiry rate (refused completes) with its 95%
interval, the overrun rate's 95% upper bound (what confirms a lease), the
p99 recovery, and the real client overhead D (claim sent to complete
answered beyond the work). docs/design/lease-model.md argues that the
scaled overrun bound is at least the unscaled false expiry, given that D at
scale S is no smaller than at scale 1: the line under each lease checks
that, and gives the p99 recoveries' difference. `--read` prints the folders
of an earlier run without running again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

LEASES = "480ms,1s,1.7s,2.6s,3.8s"


def sweep(server: str, scale: float, window: float, out: Path, run: bool = True) -> dict[str, dict[str, float]]:
    if run:
        subprocess.run([sys.executable, "-m", "echomq_bench", "lease", "--server", server, "--leases", LEASES,
                        "--time-scale", f"{scale:g}", "--duration", f"{window:g}s", "--mass-crash", "0",
                        "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    summary = json.loads((out / "summary.json").read_text())
    rows = {}
    for x in summary["servers"][0]["leases"]:
        overhead = x["overhead_ms"]
        rows[f"{x['lease_ms']:g}"] = {
            "n": x["live"], "fe": x["false_expiry"]["value"], "fe_lo": x["false_expiry"]["lo"],
            "fe_hi": x["false_expiry"]["hi"], "over_hi": x["overran_rate"]["hi"],
            "p99": x["recovery"]["p99"]["value"], "d_real_ms": overhead["median"] / scale,
            "d_p99_real_ms": overhead["p99"] / scale}
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="redis7.0")
    parser.add_argument("--scale", type=float, default=10.0)
    parser.add_argument("--window", type=float, default=12.0)
    parser.add_argument("--unscaled-window", type=float, default=120.0)
    parser.add_argument("--out", type=Path, default=Path("results/lease-scale"))
    parser.add_argument("--read", action="store_true", help="print the folders in --out; run nothing")
    args = parser.parse_args()
    scaled = sweep(args.server, args.scale, args.window, args.out / f"scale-{args.scale:g}", not args.read)
    real = sweep(args.server, 1.0, args.unscaled_window, args.out / "scale-1", not args.read)
    print(f"{'lease ms':>8} | {'scale':>5} {'n':>6} {'ran twice [95% CI]':>24} {'outlived hi':>11} {'p99 ms':>7} "
          f"{'D p50/p99 real ms':>17}")
    for lease, s in scaled.items():
        r = real[lease]
        for label, x in ((f"{args.scale:g}", s), ("1", r)):
            print(f"{lease:>8} | {label:>5} {x['n']:>6} {x['fe']:>8.3%} [{x['fe_lo']:.3%}, {x['fe_hi']:.3%}] "
                  f"{x['over_hi']:>11.3%} {x['p99']:>7.0f} {x['d_real_ms']:>8.2f}/{x['d_p99_real_ms']:<8.2f}")
        holds = r["fe"] <= s["over_hi"] and r["fe_hi"] <= s["over_hi"]
        print(f"{'':>8} | unscaled false expiry {r['fe']:.3%} (upper {r['fe_hi']:.3%}) within the scaled bound "
              f"{s['over_hi']:.3%}: {'yes' if holds else 'NO'}; p99 recovery scaled - unscaled "
              f"{s['p99'] - r['p99']:+.0f} ms ({(s['p99'] - r['p99']) / r['p99']:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
