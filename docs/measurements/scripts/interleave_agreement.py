"""Do compare's three ways of sharing a trial agree? Redis against Valkey in together, slot and trial modes.

    python docs/measurements/scripts/interleave_agreement.py [--trials 10] [--duration 3] [--out DIR]

Each mode runs one compare of the two builds (fresh servers per trial) and
gives the server µs per cycle ratio valkey/redis with its 95% t-interval.
The modes agree when every pair of intervals overlaps
(`echomq_bench.measurement.agreement`). Together mode is compare's default;
if it disagrees with both others, the default is the thing to change. With
--out, each mode's compare record is written to DIR/<mode>/, and
`echomq-bench report DIR` renders the same agreement table from them. Run it
on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.capacity.compare import run_compare
from echomq_bench.capacity.compare_files import write_compare
from echomq_bench.measurement.agreement import estimate_of, text_table
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
    print("\nserver µs/cycle, valkey / redis")
    print(text_table([estimate_of(mode, v) for mode, v in found.items()]))
    if args.out:
        print(f"records: {args.out}/{{{','.join(MODES)}}}; `echomq-bench report {args.out}` renders the table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
