"""The headline: HEADLINE's server µs per job over BASELINE's, per server and mode, judged on rounds of one kind.

The headline rounds run the pair alone, back to back, on fresh servers;
the interleaved rounds run every queue in turn, so the pair's two runs
are minutes apart with other queues between them. The two kinds differ in
what drifts between the pair's runs, so the headline never pools them: it
is judged on the headline rounds alone, or, when none ran (`--quick`, no
precision, the budget spent first), on the interleaved rounds alone, and
says which. Its verdicts (one per mode on a server) are a Bonferroni
family of their own, and the stopping rule sizes the interval judged.
"""

from __future__ import annotations

from typing import Any

from echomq_bench.peers.family import family_level, tally
from echomq_bench.peers.intervals import ratio_verdict
from echomq_bench.peers.registry import BASELINE, HEADLINE
from echomq_bench.peers.result import HEADLINE_ROUNDS, INTERLEAVED, PeerRun
from echomq_bench.records.kinds.peers import HeadlineVerdictEntry
from echomq_bench.records.verdicts import RatioVerdictEntry

__all__ = ["headline_ratios", "headline_kind", "headline_level", "headline_verdicts", "FIGURE"]

FIGURE = "server_us_per_job"


def headline_level(modes: int) -> float:
    """Each headline verdict's level: the family is the pair's modes on one server."""
    return family_level(max(modes, 1))


def headline_ratios(runs: list[PeerRun], server: str, mode: str, kind: str = HEADLINE_ROUNDS) -> list[float]:
    """HEADLINE's server µs per job over BASELINE's, trial by trial, clean pairs of rounds of `kind` only."""
    base = {r.trial: r.server_us_per_job for r in runs
            if (r.server, r.queue, r.mode, r.rounds) == (server, BASELINE, mode, kind) and r.clean}
    return [r.server_us_per_job / base[r.trial] for r in runs
            if (r.server, r.queue, r.mode, r.rounds) == (server, HEADLINE, mode, kind) and r.clean
            and base.get(r.trial, 0) > 0 and r.server_us_per_job > 0]


def headline_kind(runs: list[PeerRun], failures: list[dict[str, Any]]) -> str:
    """The rounds the headline is judged on: the headline rounds when any ran, else the interleaved ones."""
    ran_alone = any(r.rounds == HEADLINE_ROUNDS for r in runs) or any(
        f.get("rounds") == HEADLINE_ROUNDS for f in failures)
    return HEADLINE_ROUNDS if ran_alone else INTERLEAVED


def headline_verdicts(runs: list[PeerRun], failures: list[dict[str, Any]], servers: list[str],
                      modes: list[str]) -> tuple[HeadlineVerdictEntry, ...]:
    """One verdict per server and mode in which both queues of the pair ran, on rounds of one kind."""
    kind = headline_kind(runs, failures)
    level = headline_level(len(modes))
    out = []
    for server in servers:
        for mode in modes:
            mine = [r for r in runs if (r.server, r.queue, r.mode, r.rounds) == (server, HEADLINE, mode, kind)]
            base = [r for r in runs if (r.server, r.queue, r.mode, r.rounds) == (server, BASELINE, mode, kind)]
            rounds = tally(runs, failures, (server, HEADLINE, mode), kind)
            if not rounds.attempted or not tally(runs, failures, (server, BASELINE, mode), kind).attempted:
                continue
            v = ratio_verdict(mine, base, FIGURE, level=level, rounds=rounds)
            out.append(HeadlineVerdictEntry(server=server, mode=mode, rounds=kind, attempted=rounds.attempted,
                                            failed=rounds.failed,
                                            verdict=RatioVerdictEntry() if v is None else RatioVerdictEntry.of(v)))
    return tuple(out)
