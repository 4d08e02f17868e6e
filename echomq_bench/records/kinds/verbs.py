"""A `verbs` record: per build, each verb's server time from its prepared
state, one call per round trip, and its ratio to the reference script of
its weight.

summary.json is a `VerbsRecord`: the verb cases measured, their labels, and
`builds`, a `VerbsBuild` per build with a `VerbFigures` per case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

from echomq_bench.records.entries import Entry, by_name, many
from echomq_bench.records.headlines import LOWER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["RECORD", "VerbFigures", "VerbsBuild", "VerbsRecord", "headlines"]


@dataclass(frozen=True)
class VerbFigures(Entry):
    server_us: float
    calls: int | None = None
    reference: str | None = None        # the reference script of the verb's weight
    server_ratio: float | None = None   # server µs over the reference's, in the same batches
    server_ratio_se: float | None = None


@dataclass(frozen=True)
class VerbsBuild(Entry):
    build: str
    version: str | None = None
    server_utilization: float = 0.0
    client_utilization: float = 0.0
    verbs: Mapping[str, VerbFigures] = by_name(VerbFigures)


@dataclass(frozen=True)
class VerbsRecord(Entry):
    cases: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)   # case -> how the report names it
    builds: tuple[VerbsBuild, ...] = many(VerbsBuild)


RECORD = VerbsRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    for b in VerbsRecord.from_record(r.summary).builds:
        yield from each(b.build, b.version, [
            (f"verbs.{case}.{name}", value, unit, LOWER) for case, f in b.verbs.items()
            for name, value, unit in (("server_us", f.server_us, "us"), ("ratio", f.server_ratio, "ratio"))])
