"""Do compare's three ways of sharing a trial agree? Redis against Valkey in together, slot and trial modes.

    python docs/measurements/scripts/interleave_agreement.py [--trials 10] [--duration 3] [--out DIR]

Each mode runs one compare of the two builds (fresh servers per trial) and
gives the server µs per cycle ratio valkey/redis with its 95% t-interval.
Two modes agree when their intervals overlap. Together mode is compare's
default; if it disagrees with both others, the default is the thing to
change. With --out, each mode's compare record is written to DIR/<mode>/,
readable by `echomq-bench report`. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.commands.compare import run_compare, write_compare
from echomq_bench.progress import Progress

MODES = ("together", "slot", "trial")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--duration", type=float, default=3.0, help="window per trial, s (default 3)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    progress = Progress()
    found = {}
    for mode in MODES:
        result = run_compare(["redis", "valkey"], CapacitySettings(duration_s=args.duration), args.trials,
                             interleave=mode, progress=progress)
        progress.done()
        v = result.verdict("valkey", "server_us")
        assert v is not None
        found[mode] = v
        shares = [r.server_utilization for r in result.of("valkey")]
        print(f"{mode:<9} server µs/cycle valkey/redis {v.label()}; valkey busy {min(shares):.0%}..{max(shares):.0%}",
              flush=True)
        if args.out:
            write_compare(args.out / mode, result, argv=sys.argv)
    print("\n| modes | intervals overlap |\n|---|---|")
    for a, b in itertools.combinations(MODES, 2):
        ca, cb = found[a].ci, found[b].ci
        overlap = ca is not None and cb is not None and ca[0] <= cb[1] and cb[0] <= ca[1]
        print(f"| {a} / {b} | {'yes' if overlap else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
