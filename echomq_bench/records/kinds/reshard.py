"""A `reshard` record: per cluster, a queue's slot moved between two masters
under load, the calls refused meanwhile, where every job went (the audit,
the rows in no set, the members without a row) and the call-log check (under
the key `history`, as older records have it).

summary.json holds `{"runs": [<ReshardRun>, ...]}`; the tidy table `reshard`
a row per cluster and figure, which the headlines read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from echomq_bench.records.entries import Entry, many
from echomq_bench.records.headlines import LOWER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["RECORD", "ReshardRun", "ReshardRecord", "headlines", "FIGURES", "lower_figures"]


@dataclass(frozen=True)
class ReshardRun(Entry):
    """One cluster's moves and what they left."""

    name: str
    version: str | None = None
    queues: tuple[str, ...] = ()
    slot: int | None = None
    moves: int | None = None            # whole moves of the slot, each to the other master
    keys_moved: int | None = None
    moving_s: float | None = None       # how long the slot was moving, all moves together
    move_refused: str | None = None     # a MIGRATE the target refused, which failed the run
    load_s: float | None = None
    errors: Mapping[str, int] = field(default_factory=dict)
    ops: int | None = None
    in_no_set: int | None = None        # job rows whose id no set of their queue holds
    without_row: int | None = None      # set members with no row
    doubt_enqueue: int | None = None
    doubt_enqueue_found: int | None = None
    doubt_complete: int | None = None
    doubt_complete_gone: int | None = None
    history: Mapping[str, Any] = field(default_factory=dict)   # the call-log check (measurement.calllog_check)
    audit: Mapping[str, Any] = field(default_factory=dict)     # load.audit.AuditReport.to_dict()
    passed: bool = False


@dataclass(frozen=True)
class ReshardRecord(Entry):
    runs: tuple[ReshardRun, ...] = many(ReshardRun)


RECORD = ReshardRecord   # what summary.json holds, typed

FIGURES = ("failed_calls", "lost", "in_no_set", "without_row", "in_two_places")


def lower_figures(r: Record, figures: tuple[str, ...]) -> Iterator[Headline]:
    """The figures named, from the tidy table named as the record's kind: a cluster
    audit's, where each is a count or a time and lower is better."""
    for row in r.tables.get(r.kind, ()):
        if row.get("metric") in figures:
            yield from each(row.get("server"), row.get("version"),
                            [(f"{r.kind}.{row['metric']}", row.get("value"), str(row.get("unit", "")), LOWER)])


def headlines(r: Record) -> Iterator[Headline]:
    return lower_figures(r, FIGURES)
