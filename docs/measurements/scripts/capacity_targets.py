"""The capacity driver's three targets, measured in one run and printed as ratios.

    python docs/measurements/scripts/capacity_targets.py [--server SPEC] [--duration 5] [--trials 5] [--repeats 3]

1. Capacity mode keeps the server at least 85% busy: main-thread CPU time
   over wall time (INFO cpu), on each build.
2. An A/A comparison (one build against itself, 10 trials) says neither
   faster nor slower.
3. A build made slower on purpose is reported `slower` every time: a copy
   of lua/ whose claim-3.lua burns about 20% more server time (a Lua loop
   calibrated on this server, claims to both copies in turn), passed as
   that build's own scripts folder.

Targets 2 and 3 use compare's default, `--interleave together`.

Run it on an otherwise idle machine. Each line also shows the server's CPU wait (schedstat): time it
was runnable but another process held its core. Exit 0 when all targets
hold.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from echomq_bench.capacity.compare import Build, run_compare, unique_builds
from echomq_bench.capacity.runner import measure
from echomq_bench.capacity.settings import CapacitySettings
from echomq import Queue
from echomq._instrument import lua_dir, verbs
from echomq_bench.servers import parse_server_spec, start
from echomq_bench.measurement.serverstats import command_stats
from echomq_bench.measurement.verdicts import FASTER, SLOWER
from echomq_bench.progress import Progress

MARK = "local popped = redis.pcall('ZPOPMIN', pendingKey)"
BUSY_TARGET = 0.85
SLOWDOWN = 0.20


def claim_costs(spec: str, folders: list[Path | None], rounds: int = 40, batch: int = 500) -> list[float]:
    """Server µs inside the claim script per call (commandstats), for each scripts folder.

    Each folder gets a fresh server of `spec`, all filled alike; then
    batches of claims go to each in turn, so a machine whose speed drifts
    by the second weighs on every folder alike.
    """
    from echomq_bench.load.bulk import fill_in_turn
    from echomq_bench.capacity.session import target_of

    n = rounds * batch
    with ExitStack() as stack:
        servers = [stack.enter_context(start(spec)) for _ in folders]
        clients = [server.client() for server in servers]
        queues = [Queue(c, f"calib-{secrets.token_hex(3)}", lua_dir=f) for c, f in zip(clients, folders)]
        fill_in_turn([(target_of(s), q.name, n) for s, q in zip(servers, queues)], b"x" * 64)
        for c in clients:
            c.config_resetstat()
        for _ in range(rounds):
            for q in queues:
                pipe = q.client.pipeline(transaction=False)
                claim = verbs.claim(q.keys, 60_000).evalsha(q.scripts.sha("claim"))
                for _ in range(batch):
                    pipe.execute_command(*claim)
                pipe.execute()
        stats = [command_stats(c, "evalsha") for c in clients]
    return [usec / calls for calls, usec in stats]


def slow_scripts(spec: str, tmp: Path, extra_us: float | None = None) -> tuple[Path, float, float]:
    """A copy of lua/ whose claim burns SLOWDOWN more server time, or `extra_us`
    more µs per call when given; returns it and the measured claim costs.

    The burn is a Lua loop, sized by measuring the claim with a first guess
    beside the original (`claim_costs`) and correcting.
    """
    original = (lua_dir() / "claim-3.lua").read_text()
    assert MARK in original, f"claim-3.lua: cannot find where to add the burn ({MARK})"

    def variant(loops: int) -> Path:
        # A new folder each time: the script loader caches by folder.
        out = tmp / f"lua-{loops}"
        if not out.exists():
            shutil.copytree(lua_dir(), out)
            burn = f"local burn = 0\nfor i = 1, {loops} do burn = burn + i end  -- bench: a slower claim\n"
            (out / "claim-3.lua").write_text(original.replace(MARK, burn + MARK))
        return out

    loops = 200
    for _ in range(4):
        base, slowed = claim_costs(spec, [None, variant(loops)])
        extra = slowed / base - 1.0
        want = extra_us / base if extra_us is not None else SLOWDOWN
        if abs(extra - want) < 0.15 * want or extra <= 0:
            break
        loops = max(1, round(loops * want / extra))
    return variant(loops), base, slowed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", default=None, help="builds for target 1 (default both)")
    parser.add_argument("--duration", type=float, default=5.0, help="capacity window, s (default 5)")
    parser.add_argument("--compare-duration", type=float, default=2.0, help="window per compare trial, s")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="slowed-build comparisons (default 3)")
    parser.add_argument("--build", default="redis", help="the build for targets 2 and 3 (default redis)")
    args = parser.parse_args()
    progress = Progress()
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
    print(f"\n2. A/A: {args.build} against itself, {args.trials} trials -> neither faster nor slower")
    aa = run_compare([Build(s) for s in unique_builds([a, a])], settings, args.trials, progress=progress)
    progress.done()
    c = aa.verdict(aa.builds[1].name, "server_us")
    hit = c is not None and c.verdict not in (FASTER, SLOWER)
    ok &= hit
    print(f"   server µs/cycle {c.label() if c else '-'}  {'ok' if hit else 'MISS'}")

    with tempfile.TemporaryDirectory(prefix="echomq-slow-lua-") as tmp:
        folder, base, slowed = slow_scripts(args.build, Path(tmp))
        print(f"\n3. slowed build: claim {base:.2f} -> {slowed:.2f} µs in the script "
              f"(+{slowed / base - 1:.0%}), {args.trials} trials, {args.repeats} comparisons -> '{SLOWER}' each time")
        slow = parse_server_spec(f"slow={a.binary} {' '.join(a.args)}".strip())
        hits = 0
        for i in range(args.repeats):
            cmp = run_compare([Build(a), Build(slow, folder)], settings, args.trials, progress=progress)
            progress.done()
            u = cmp.verdict("slow", "server_us")
            hits += u is not None and u.verdict == SLOWER
            print(f"   {i + 1}: server µs/cycle {u.label() if u else '-'}")
        hit = hits == args.repeats
        ok &= hit
        print(f"   slower {hits}/{args.repeats}  {'ok' if hit else 'MISS'}")
    print("\nall targets met" if ok else "\nsome targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
