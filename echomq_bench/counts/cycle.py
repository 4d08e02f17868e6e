"""Instructions per job cycle on each build, judged against nothing: the
main job's second lens beside its time ratios.

A time ratio mixes more work with the same work run slower (memory, the
allocator). A count is the work alone: one claim and one complete, counted
with the gate's machinery (counts.measure, the CYCLE populations and
warm-up) on a fresh server of each build under callgrind. It holds what
runs inside EVALSHA, the script and every command it calls; the main
thread's CPU that the time ratio reads also holds reading and parsing the
requests, writing the replies and the event loop, which a count does not
see.

The count is deterministic where the gate's page says it is, so a few calls
per verb are enough: two fresh servers of one binary agreed within 0.4% at
CALLS here, and the same binary under two names counts the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from echomq_bench.counts.callgrind import CallgrindError, valgrind_version
from echomq_bench.counts.gate import part_rows
from echomq_bench.counts.measure import CYCLE, CountRun, count_spec
from echomq_bench.progress import ProgressFn, silent
from echomq_bench.records.kinds.counts import CountsBuild, CountsRecord
from echomq_bench.records.record import Record
from echomq_bench.servers.spec import ServerSpec

__all__ = ["CALLS", "CycleCounts", "count_cycles", "cycle_record"]

CALLS = 100   # per verb and window; 50 reads up to 1% above it (a window's fixed cost spread over fewer calls)


@dataclass(frozen=True)
class CycleCounts:
    runs: tuple[CountRun, ...]
    skipped: str | None = None   # why some or all builds went uncounted


def count_cycles(specs: Sequence[ServerSpec], *, calls: int = CALLS, progress: ProgressFn = silent) -> CycleCounts:
    """Each build's claim and complete on a fresh server under callgrind, one build after another;
    none, with the reason, when valgrind cannot run here."""
    try:
        valgrind_version()
    except CallgrindError as exc:
        return CycleCounts((), str(exc))
    runs: list[CountRun] = []
    missed: list[str] = []
    for spec in specs:
        try:
            runs.append(count_spec(spec, calls=calls, counted=CYCLE, progress=progress))
        except CallgrindError as exc:
            missed.append(f"{spec.name}: {exc}")
    return CycleCounts(tuple(runs), "; ".join(missed) or None)


def cycle_record(found: CycleCounts, info: dict[str, Any]) -> Record:
    """The counts as written: per build its claim's and complete's figures, the parts in counts.csv."""
    builds = tuple(CountsBuild(build=r.build, version=r.binary.version, binary=r.binary.to_dict(), runs=1,
                               wall_s=round(r.wall_s, 1), valgrind=r.valgrind, settings=dict(r.settings),
                               figures={verb: vc.to_dict() for verb, vc in r.verbs.items()})
                   for r in found.runs)
    # The servers ran under callgrind and are gone: what the record needs of them is their binary.
    servers = [{"name": r.build, "spec": r.build, "version": r.binary.version, "binary": r.binary.path}
               for r in found.runs]
    return Record(kind="counts", meta={**info, "servers": servers},
                  tables={"counts": [row for r in found.runs for row in part_rows(r.build, r)]},
                  summary=CountsRecord(builds=builds, cycle=CYCLE.verbs, skipped=found.skipped).to_record())
