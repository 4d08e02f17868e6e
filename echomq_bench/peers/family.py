"""What a peers verdict counts: its rounds, its failed rounds, and the level of its family.

The unit of replication is a round (docs/design/peers.md): one run of each
queue in turn on the same server. A queue's round either drained clean or
failed (an error, or a run that left jobs, lost them or ran them twice);
a failed round is a failure of that queue, counted beside its verdict and
never silently left out: a queue that failed in most of its rounds gets
no ratio verdict, since the rounds it survived would flatter it.

A run prints many ratio verdicts per server (every queue, mode and figure
against the baseline). Each is judged at the Bonferroni level
1 - alpha / m of its family of m verdicts, so that all of the family's
intervals hold together at 1 - alpha and a family of queues no different
from the baseline is called different at most alpha of the time, not
once in every twenty verdicts. The headline's verdicts are a family of
their own: judged on rounds of their own, the question the run is sized for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from echomq_bench.measurement.verdicts import LEVEL
from echomq_bench.peers.result import INTERLEAVED, PeerRun

__all__ = ["ALPHA", "CORRECTION", "FAILED", "Tally", "family_level", "tally", "failure_kind"]

ALPHA = round(1 - LEVEL, 10)   # the family-wise error rate: the 5% each verdict had alone
CORRECTION = "Bonferroni"
FAILED = "failed"   # the verdict of a queue that failed in most of its rounds


def family_level(size: int, alpha: float = ALPHA) -> float:
    """The level of each verdict in a family of `size`, so that the family holds together at 1 - alpha."""
    if size < 1:
        raise ValueError(f"a family has at least one verdict, got {size}")
    return 1 - alpha / size


@dataclass(frozen=True)
class Tally:
    """One queue's rounds of one kind in one mode on one server: how many it had, and how many failed."""

    attempted: int
    failed: int

    @property
    def most_failed(self) -> bool:
        """More than half its rounds failed: what survived cannot stand for the queue."""
        return 2 * self.failed > self.attempted

    @property
    def text(self) -> str:
        return f"{self.failed} of {self.attempted} rounds failed"


def failure_kind(failure: dict[str, Any]) -> str:
    """The kind of round a failure happened in (a record without it ran interleaved rounds only)."""
    return str(failure.get("rounds", INTERLEAVED))


def tally(runs: Iterable[PeerRun], failures: Iterable[dict[str, Any]], where: tuple[str, str, str],
          kind: str) -> Tally:
    """The rounds of kind `kind` of (server, queue, mode): the runs measured and the runs that errored;
    a measured run that did not drain clean failed as much as one that errored."""
    mine = [r for r in runs if (r.server, r.queue, r.mode) == where and r.rounds == kind]
    errors = [f for f in failures if (f["server"], f["queue"], f["mode"]) == where and failure_kind(f) == kind]
    return Tally(attempted=len(mine) + len(errors), failed=sum(not r.clean for r in mine) + len(errors))
