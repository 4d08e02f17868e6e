"""The capacity driver's three targets, measured in one run and printed as ratios.

    python bench/capacity_targets.py [--server SPEC] [--duration 5] [--trials 5] [--repeats 3]

1. Capacity mode keeps the server at least 85% busy: main-thread CPU time
   over wall time (INFO cpu), on each build.
2. An A/A comparison (one build against itself, 5 trials) reports no
   significant difference.
3. A build made slower on purpose is reported `slower` every time: a copy
   of lua/ whose claim-2.lua burns about 20% more server time (a Lua loop
   calibrated on this server), passed as that build's own scripts folder.

Run it under `flock /tmp/echomq-measure.lock` so no other measurement
overlaps. Each line also shows the server's CPU wait (schedstat): time it
was runnable but another process held its core. Exit 0 when all targets
hold.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from echomq.capacity import CapacitySettings, measure
from echomq.compare import Build, run_compare, unique_builds
from echomq.queue import Queue
from echomq.scripts import lua_dir
from echomq.servers import parse_server_spec, start
from echomq.stats import SAME, SLOWER
from echomq.workload import StderrProgress

MARK = "local popped = rcall('ZPOPMIN', pendingKey)"
BUSY_TARGET = 0.85
SLOWDOWN = 0.20


def claim_us(server: object, folder: Path | None, n: int = 20_000) -> float:
    """Server µs inside the claim script per call (commandstats), on a filled queue."""
    from echomq.backlog import fill
    from echomq.capacity import target_of

    client = server.client()  # type: ignore[attr-defined]
    q = Queue(client, f"calib-{secrets.token_hex(3)}", lua_dir=folder)
    fill(target_of(server), q.name, n, b"x" * 64)
    client.config_resetstat()
    sha, k = q.scripts.sha("claim"), q.keys
    for start_at in range(0, n, 1000):
        pipe = client.pipeline(transaction=False)
        for _ in range(min(1000, n - start_at)):
            pipe.evalsha(sha, 2, k.pending, k.active, k.job_prefix, 60_000)
        pipe.execute()
    stats = client.info("commandstats")["cmdstat_evalsha"]
    client.flushall()
    return stats["usec"] / stats["calls"]


def lua_ns_per_iteration(server: object, iterations: int = 2_000_000) -> float:
    client = server.client()  # type: ignore[attr-defined]
    client.config_resetstat()
    client.eval("local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return 0", 0, iterations)
    return client.info("commandstats")["cmdstat_eval"]["usec"] * 1000 / iterations


def slow_scripts(spec: str, tmp: Path) -> tuple[Path, float, float]:
    """A copy of lua/ whose claim burns SLOWDOWN more server time; returns it and the measured costs.

    The burn is a Lua loop sized from the server's own cost per iteration,
    then corrected once against the measured claim cost (median of three
    interleaved pairs, so a noisy neighbour moves both sides of a pair).
    """
    original = (lua_dir() / "claim-2.lua").read_text()
    assert MARK in original, f"claim-2.lua: cannot find where to add the burn ({MARK})"

    def variant(loops: int) -> Path:
        # A new folder each time: the script loader caches by folder.
        out = tmp / f"lua-{loops}"
        if not out.exists():
            shutil.copytree(lua_dir(), out)
            burn = f"local burn = 0\nfor i = 1, {loops} do burn = burn + i end  -- bench: a slower claim\n"
            (out / "claim-2.lua").write_text(original.replace(MARK, burn + MARK))
        return out

    with start(spec) as server:
        def costs(folder: Path) -> tuple[float, float]:
            pairs = [(claim_us(server, None), claim_us(server, folder)) for _ in range(3)]
            return statistics.median(b for b, _ in pairs), statistics.median(s / b for b, s in pairs)

        base = claim_us(server, None)
        loops = max(1, round(base * SLOWDOWN * 1000 / lua_ns_per_iteration(server)))
        base, ratio = costs(variant(loops))
        if ratio > 1.0:
            loops = max(1, round(loops * SLOWDOWN / (ratio - 1.0)))
            base, ratio = costs(variant(loops))
    return variant(loops), base, base * ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", default=None, help="builds for target 1 (default both)")
    parser.add_argument("--duration", type=float, default=5.0, help="capacity window, s (default 5)")
    parser.add_argument("--compare-duration", type=float, default=2.0, help="window per compare trial, s")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="slowed-build comparisons (default 3)")
    parser.add_argument("--build", default="redis", help="the build for targets 2 and 3 (default redis)")
    args = parser.parse_args()
    progress = StderrProgress()
    ok = True

    print(f"1. capacity: server main thread busy >= {BUSY_TARGET:.0%}")
    print(f"   {'server':<14} {'cycles/s':>9} {'busy':>6} {'cpu wait':>8} {'client':>7} {'bound':>6} "
          f"{'of ceiling':>10}  target")
    for spec in args.server or ["redis", "valkey"]:
        r = measure(spec, CapacitySettings(duration_s=args.duration), progress=progress)
        progress.done()
        hit = r.server_utilization >= BUSY_TARGET
        ok &= hit
        wait = f"{r.server_wait:.1%}" if r.server_wait is not None else "-"
        print(f"   {r.version:<14} {r.cycles_per_s:>9,.0f} {r.server_utilization:>6.1%} {wait:>8} "
              f"{r.client_utilization:>7.1%} {r.bound:>6} {r.of_ceiling or 0:>10.2f}  {'ok' if hit else 'MISS'}")

    settings = CapacitySettings(duration_s=args.compare_duration, warmup_s=0.5)
    a = parse_server_spec(args.build)
    print(f"\n2. A/A: {args.build} against itself, {args.trials} trials -> '{SAME}'")
    aa = run_compare([Build(s) for s in unique_builds([a, a])], settings, args.trials, progress=progress)
    progress.done()
    c = aa.comparisons[aa.builds[1].name]["throughput"]
    hit = c.verdict == SAME
    ok &= hit
    print(f"   throughput ratio {c.ratio:.3f} [{c.ci95[0]:.3f}, {c.ci95[1]:.3f}]  {c.verdict}  "
          f"{'ok' if hit else 'MISS'}")

    with tempfile.TemporaryDirectory(prefix="echomq-slow-lua-") as tmp:
        folder, base, slowed = slow_scripts(args.build, Path(tmp))
        print(f"\n3. slowed build: claim {base:.2f} -> {slowed:.2f} µs in the script "
              f"(+{slowed / base - 1:.0%}), {args.trials} trials, {args.repeats} comparisons -> '{SLOWER}' each time")
        slow = parse_server_spec(f"slow={a.binary} {' '.join(a.args)}".strip())
        hits = 0
        for i in range(args.repeats):
            cmp = run_compare([Build(a), Build(slow, folder)], settings, args.trials, progress=progress)
            progress.done()
            t = cmp.comparisons["slow"]["throughput"]
            u = cmp.comparisons["slow"]["server_us"]
            hits += t.verdict == SLOWER
            print(f"   {i + 1}: throughput {t.ratio:.3f} [{t.ci95[0]:.3f}, {t.ci95[1]:.3f}] {t.verdict}; "
                  f"server µs/cycle {u.ratio:.3f} [{u.ci95[0]:.3f}, {u.ci95[1]:.3f}] {u.verdict}")
        hit = hits == args.repeats
        ok &= hit
        print(f"   slower {hits}/{args.repeats}  {'ok' if hit else 'MISS'}")
    print("\nall targets met" if ok else "\nsome targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
