"""How far does each measure bring the spread of instruction counts between fresh servers down?

    python docs/measurements/scripts/count_floor.py [--server valkey] [--servers 5]

Counts every verb on --servers fresh servers under each of four conditions,
each adding one measure to the one before:

    as first tried    a random tag in every key, ids minted from the clock, the
                      process's own environment, 300 counted calls per verb
    fixed keyspace    a fixed tag and ids counted up from a fixed value
    CPU and clock     glibc's string functions pinned to the SSE2 ones and
                      jemalloc's clock-driven purging off
    hash seed         every server draws the same hash seed (/dev/urandom bound
                      to a file of fixed bytes in the server's own namespaces)
    1,200 calls       the gate's default window

and prints each verb's relative standard deviation between the servers.
Counts do not depend on the machine's load; this may run beside other work.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import echomq_bench.counts.measure as measure
import echomq_bench.load.bulk as bulk
from echomq_bench.counts.callgrind import CountingServer
from echomq_bench.servers import parse_server_spec

CONDITIONS = (("as first tried", False, False, False, 300), ("fixed keyspace", True, False, False, 300),
              ("CPU and clock", True, True, False, 300), ("hash seed", True, True, True, 300),
              ("1,200 calls", True, True, True, 1200))


def run(spec: Any, fixed: bool, pinned: bool, seed: bool, calls: int) -> dict[str, float]:
    saved = (measure.TAG, bulk.FixedIds, CountingServer._environment, CountingServer._command)
    if not fixed:
        measure.TAG = None  # type: ignore[assignment]   # Env then draws a random tag
        bulk.FixedIds = lambda: bulk.id_block  # type: ignore[assignment,misc]
    if not pinned:
        CountingServer._environment = lambda self: None  # type: ignore[method-assign]
    if not seed:  # drop the namespace prefix and its seed file: valgrind first
        command = saved[3]
        CountingServer._command = lambda self, port: (  # type: ignore[method-assign]
            lambda argv: argv[argv.index("valgrind"):])(command(self, port))
    try:
        found = measure.count_spec(spec, calls=calls)
    finally:
        measure.TAG, bulk.FixedIds, CountingServer._environment, CountingServer._command = saved  # type: ignore
    return {verb: vc.instructions for verb, vc in found.verbs.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default="valkey")
    p.add_argument("--servers", type=int, default=5)
    a = p.parse_args()
    spec = parse_server_spec(a.server)
    print(f"| condition | {' | '.join(measure.COUNTED)} | median |")
    print(f"|---|{'---:|' * (len(measure.COUNTED) + 1)}")
    for label, fixed, pinned, seed, calls in CONDITIONS:
        runs = [run(spec, fixed, pinned, seed, calls) for _ in range(a.servers)]
        rsd = {v: statistics.stdev(r[v] for r in runs) / statistics.fmean(r[v] for r in runs)
               for v in measure.COUNTED}
        cells = " | ".join(f"{rsd[v]:.2%}" for v in measure.COUNTED)
        print(f"| {label} | {cells} | {statistics.median(rsd.values()):.2%} |", flush=True)


if __name__ == "__main__":
    main()
