"""A `consumers` record: cycles/s per build at each number of consumers, in
its tidy table; summary.json names the numbers of consumers measured."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from echomq_bench.records.entries import Entry
from echomq_bench.measurement.stats import median
from echomq_bench.records.headlines import HIGHER, Headline, each, number
from echomq_bench.records.record import Record

__all__ = ["RECORD", "ConsumersRecord", "headlines"]


@dataclass(frozen=True)
class ConsumersRecord(Entry):
    consumers: tuple[int, ...] = ()


RECORD = ConsumersRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    """The median cycles/s per build at each number of consumers."""
    points: dict[tuple[Any, Any, Any], list[float]] = {}
    for row in r.tables.get("consumers", ()):
        if row.get("metric") == "cycles_per_s" and number(row.get("value")) is not None:
            points.setdefault((row.get("build"), row.get("version"), row.get("consumers")), []).append(row["value"])
    for (build, version, consumers), values in points.items():
        yield from each(build, version, [(f"consumers.cycles_per_s_at_{consumers}", median(values),
                                          "1/s", HIGHER)])
