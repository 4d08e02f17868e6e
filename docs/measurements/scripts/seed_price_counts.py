"""The seed's price in instructions with its spread: the project's committed count baseline (the mean of its fresh
servers) against the seed's scripts counted on N fresh servers of the same build, from the gate's states.

    python docs/measurements/scripts/seed_price_counts.py [--server redis|valkey]... [--servers 5]

`echomq-bench gate` prints the same ratio from one fresh server per side; the seed's enqueue moves by about 1%
between servers (the hash seed is pinned, but a window's Lua GC steps are not), so a figure to quote pools several.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from echomq_bench.counts.baseline import count_baseline_path, load_count_baseline
from echomq_bench.counts.identity import binary_identity
from echomq_bench.counts.measure import Counted, count_spec
from echomq_bench.counts.seed_price import SEED_SCRIPTS, VERBS
from echomq_bench.servers import parse_server_spec
from echomq_bench.servers.embedded import spec_binary


def price(server: str, servers: int) -> list[str]:
    spec = parse_server_spec(server)
    base = load_count_baseline(count_baseline_path(None, binary_identity(spec_binary(spec))),
                               binary_identity(spec_binary(spec)))
    project = {v: float(base["figures"][v]["instructions"]) for v in VERBS}
    runs = [count_spec(spec, lua_dir=SEED_SCRIPTS, counted=Counted(verbs=VERBS)) for _ in range(servers)]
    lines = []
    for name, ours, theirs in [*((v, project[v], [r.verbs[v].instructions for r in runs]) for v in VERBS),
                               ("cycle", sum(project.values()),
                                [sum(r.verbs[v].instructions for v in VERBS) for r in runs])]:
        mean, sd = statistics.mean(theirs), statistics.stdev(theirs)
        lines.append(f"{server:8s} {name:9s} {ours:10,.0f} {mean:10,.0f} {sd:6,.0f}   {ours / mean:.3f} "
                     f"({ours / max(theirs):.3f}-{ours / min(theirs):.3f})")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", help="redis | valkey (default both)")
    parser.add_argument("--servers", type=int, default=5, help="fresh servers for the seed's count (default 5)")
    args = parser.parse_args()
    if args.servers < 2:
        parser.error("--servers needs at least 2 for a spread")
    print(f"{'build':8s} {'verb':9s} {'project':>10s} {'seed':>10s} {'sd':>6s}   ratio (range over the seed's servers)")
    for server in args.server or ["redis", "valkey"]:
        print("\n".join(price(server, args.servers)), flush=True)
    print(f"project: the committed count baseline's mean; seed: {args.servers} fresh servers, mean and sd; "
          "instructions per call inside EVALSHA")
    return 0


if __name__ == "__main__":
    sys.exit(main())
