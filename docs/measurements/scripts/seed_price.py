"""The seed's price in server time: µs inside scripts per job cycle, the project's scripts against the seed's.

    python docs/measurements/scripts/seed_price.py [--server SPEC]... [--cycles 500] [--blocks 12] [--jobs 12000]

The count gate prices the project's checks in instructions against the seed's
bare state machine (echomq_bench/counts/seed/); this is the same question in
time. Per build, one fresh embedded server holds two queues with the same
backlog (`--jobs` pending jobs each, 64-byte payloads, written by the bulk
loader the microbenchmarks use): one run by lua/, one by the seed's folder,
both through `Queue`, so the client path is the same. After a warm-up block
on each side, blocks alternate project, seed, project, seed ...; a block is
`--cycles` claim + complete cycles, one call at a time, no pipeline, the way
a worker calls. Its figure is cmdstat_evalsha usec per cycle between two
INFO commandstats readings, whose call count must have grown by exactly two
per cycle. Both queues drain alike, so each pair of blocks meets the same
backlog size.

Per build: each side's mean µs per cycle, and project/seed over the pairs of
adjacent blocks (echomq_bench.measurement.pairedblocks: geometric mean, t
on log ratios). It asserts that every claim hands out a job and every
complete lands; the ratio is printed, never judged.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from echomq import Queue
from echomq_bench.counts.seed_price import SEED_SCRIPTS
from echomq_bench.errors import MeasurementError
from echomq_bench.load.bulk import BulkFill, id_block
from echomq_bench.measurement.pairedblocks import METHOD, PairedRatio, block_figure, paired_ratio
from echomq_bench.measurement.serverstats import command_stats
from echomq_bench.progress import Progress, ProgressFn
from echomq_bench.servers import ServerSpec, ServerSpecError, parse_server_spec, start

DEFAULT_SERVERS = ("redis7.0", "valkey8.0")
PAYLOAD = b"x" * 64
LEASE_MS = 60_000
FILL_CHUNK = 1_000   # the two backlogs are written a chunk each in turn, neither fresher in the caches


@dataclass(frozen=True)
class Settings:
    cycles: int = 500      # claim + complete cycles per block
    blocks: int = 12       # measured blocks per side, after one warm-up block each
    jobs: int = 12_000     # pending jobs per queue at the start

    def check(self) -> None:
        if self.cycles < 1 or self.blocks < 1:
            raise ValueError(f"--cycles and --blocks must be at least 1, got {self.cycles} and {self.blocks}")
        needed = (self.blocks + 1) * self.cycles
        if self.jobs < needed:
            raise ValueError(f"--jobs {self.jobs} runs dry: {self.blocks} blocks and a warm-up of {self.cycles} "
                             f"cycles need {needed} jobs per queue")


@dataclass(frozen=True)
class BuildPrice:
    build: str
    version: str
    price: PairedRatio


def fill_backlogs(queues: tuple[Queue, ...], jobs: int) -> None:
    bulk = BulkFill(queues[0].client)
    for start_at in range(0, jobs, FILL_CHUNK):
        for q in queues:
            bulk.fill(q.keys.pending, id_block(min(FILL_CHUNK, jobs - start_at)), row_prefix=q.keys.job_prefix,
                      payload=PAYLOAD)


def run_block(q: Queue, cycles: int) -> float:
    """Server µs per claim + complete cycle over `cycles` cycles, one call at a time."""
    before = command_stats(q.client, "evalsha")
    for _ in range(cycles):
        job = q.claim(LEASE_MS)
        if job is None:
            raise MeasurementError(f"{q.name}: pending ran dry inside a block")
        reply = q.complete(job.id, job.token)
        if reply != "ok":
            raise MeasurementError(f"{q.name}: complete of {job.id} answered {reply!r}, not 'ok'")
    return block_figure(before, command_stats(q.client, "evalsha"), cycles)


def check_drained(q: Queue, left: int) -> None:
    """Every cycle retired its job: `left` jobs pending and nothing leased or buried."""
    c, k = q.client, q.keys
    found = (int(c.zcard(k.pending)), int(c.zcard(k.active)), int(c.zcard(k.dead)))
    if found != (left, 0, 0):
        raise MeasurementError(f"{q.name}: pending, active and dead hold {found}, not ({left}, 0, 0)")


def measure_build(spec: ServerSpec, settings: Settings, progress: ProgressFn) -> BuildPrice:
    server = start(spec)
    client = server.client()
    try:
        version = server.version()
        project, seed = Queue(client, "price-project"), Queue(client, "price-seed", lua_dir=SEED_SCRIPTS)
        progress(f"{spec.name}: filling {settings.jobs:,} jobs per queue")
        fill_backlogs((project, seed), settings.jobs)
        run_block(project, settings.cycles)   # warm-up: the scripts' first runs, the allocator's growth
        run_block(seed, settings.cycles)
        figures: dict[str, list[float]] = {"project": [], "seed": []}
        for block in range(settings.blocks):
            for side, q in (("project", project), ("seed", seed)):
                figures[side].append(run_block(q, settings.cycles))
                progress(f"{spec.name}: block {block + 1}/{settings.blocks} {side} "
                         f"{figures[side][-1]:.2f} µs/cycle")
        left = settings.jobs - (settings.blocks + 1) * settings.cycles
        check_drained(project, left)
        check_drained(seed, left)
        return BuildPrice(spec.name, version, paired_ratio(figures["project"], figures["seed"]))
    finally:
        client.close()
        server.stop()


def table(rows: list[BuildPrice], settings: Settings) -> str:
    lines = [f"{'build':<28} {'project µs/cycle':>16} {'seed µs/cycle':>13}  ratio [95% CI] (n pairs)"]
    for r in rows:
        lines.append(f"{f'{r.build} ({r.version})':<28} {r.price.a_mean:>16.2f} {r.price.b_mean:>13.2f}  "
                     f"{r.price.label()}")
    lines.append(f"cmdstat_evalsha usec per claim + complete cycle, unpipelined; {settings.blocks} blocks of "
                 f"{settings.cycles} cycles per side, interleaved, after a warm-up block each, from "
                 f"{settings.jobs:,} pending jobs per queue. Ratio project/seed over adjacent pairs: {METHOD}.")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> tuple[list[ServerSpec], Settings]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--server", action="append", default=None, metavar="SPEC",
                        help=f"an embedded server spec (repeatable; default {' and '.join(DEFAULT_SERVERS)})")
    parser.add_argument("--cycles", type=int, default=Settings.cycles, help="claim + complete cycles per block")
    parser.add_argument("--blocks", type=int, default=Settings.blocks, help="measured blocks per side")
    parser.add_argument("--jobs", type=int, default=Settings.jobs, help="pending jobs per queue at the start")
    args = parser.parse_args(argv)
    settings = Settings(cycles=args.cycles, blocks=args.blocks, jobs=args.jobs)
    try:
        settings.check()
        specs = [parse_server_spec(s) for s in args.server or DEFAULT_SERVERS]
    except (ValueError, ServerSpecError) as exc:
        parser.error(str(exc))
    for spec in specs:
        if spec.kind != "embedded":
            parser.error(f"--server {spec.name}: a fresh server is started per build, so the spec must be "
                         "an embedded one (a build or NAME=BINARY)")
    return specs, settings


def main(argv: list[str] | None = None) -> int:
    specs, settings = parse_args(argv)
    progress = Progress(label="seed_price", every_s=0.0)
    rows = []
    for spec in specs:
        rows.append(measure_build(spec, settings, progress))
        progress.end(f"{spec.name}: project/seed {rows[-1].price.label()}")
    print(table(rows, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
