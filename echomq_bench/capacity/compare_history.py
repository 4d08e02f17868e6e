"""The between-run part of a comparison's intervals, from this machine's earlier runs.

A compare's trials share what its run never repeats: the machine's state
during those minutes, the parent process, the company on the core. So each
judged pair (a build against its baseline, and against the first build of
its own allocator) looks up its series in the results history: the same
build, on a machine with the same fingerprint, against the same baseline,
among the same builds. Its last `EARLIER_RUNS` runs and this one give the
between-run spread (measurement.runspread); with fewer than
`runspread.MIN_RUNS`, the prior, said to be assumed.

Only the spread is carried over, never a mean: a run whose scripts or
server changed the ratio still judges its own trials, and a changed ratio
widens the spread rather than pulling the centre.
"""

from __future__ import annotations

import math
from pathlib import Path

from echomq_bench.capacity.compare_result import HEADLINE, CompareResult
from echomq_bench.measurement.runspread import RunSpread, estimate
from echomq_bench.records.history import ratio_runs, server_fingerprint_id
from echomq_bench.records.kinds.compare import series

__all__ = ["spreads_for", "EARLIER_RUNS"]

# How many earlier runs of a series to weigh: enough for tau's degrees of
# freedom, recent enough that a machine that changed is soon seen as it is.
EARLIER_RUNS = 10


def spreads_for(result: CompareResult, path: Path | None = None) -> dict[tuple[str, str], RunSpread]:
    """(build, against) -> its between-run spread, for every pair the run judges."""
    at = "" if result.interleave == "together" else f"[{result.interleave}]"
    out: dict[tuple[str, str], RunSpread] = {}
    for build, against in result.pairs_judged():
        mine = result.verdict(build, HEADLINE, against)
        if mine is None or mine.within_se is None or mine.ratio is None or not math.isfinite(mine.ratio):
            continue
        runs = result.of(build)
        fingerprint = server_fingerprint_id(runs[0].server) if runs else None
        earlier = [] if fingerprint is None else ratio_runs(
            series("server_us_ratio", against, result.company, at), series("server_us_log_se", against,
                                                                           result.company, at),
            build, fingerprint, path=path, limit=EARLIER_RUNS)
        out[(build, against)] = estimate([*earlier, (math.log(mine.ratio), mine.within_se)])
    return out
