"""A `consumers` record: cycles/s per build at each number of consumers, one
row set per trial (a window at one count on one build, `trial` its round,
`order` its place in the run) in its tidy table; summary.json holds the
counts and rounds measured and each build's growth from the fewest
consumers to the most, judged over the rounds (measurement.growth), with
the side that bound it at the most.

A record written before trials were repeated has no `trial` column and no
growth: its rows read as one round, whose growth is inconclusive."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from echomq_bench.measurement.growth import Growth, WindowRate, growth
from echomq_bench.measurement.stats import median
from echomq_bench.records.entries import Entry, by_name, one, optional
from echomq_bench.records.headlines import HIGHER, Headline, each, number
from echomq_bench.records.record import Record
from echomq_bench.records.verdicts import RatioVerdictEntry

__all__ = ["RECORD", "ConsumersRecord", "GrowthEntry", "headlines", "windows", "growth_entries", "growth_of"]


@dataclass(frozen=True)
class GrowthEntry(Entry):
    """measurement.growth.Growth: one build's throughput at `high` consumers over `low`."""

    low: int | None = None
    high: int | None = None
    version: str | None = optional()
    ratio: RatioVerdictEntry = one(RatioVerdictEntry, RatioVerdictEntry())   # per round, judged
    low_cycles_per_s: float | None = None     # medians over the rounds
    high_cycles_per_s: float | None = None
    bound_at_high: Mapping[str, int] = field(default_factory=dict)   # server/client/neither -> trials


@dataclass(frozen=True)
class ConsumersRecord(Entry):
    consumers: tuple[int, ...] = ()
    trials: int | None = optional()        # rounds: every build at every count once in each
    window_s: float | None = optional()
    warmup_s: float | None = optional()
    order_seed: int | None = optional()    # each round's order was drawn from it
    builds_given: int | None = optional()  # builds the run had; the part measured those in `growth`
    growth: Mapping[str, GrowthEntry] = by_name(GrowthEntry, written_when_empty=False)


RECORD = ConsumersRecord   # what summary.json holds, typed


def _trial(value: Any) -> int:
    """A row's round; a row from before rounds (no trial, or an empty cell read as NaN) is round 1."""
    found = number(value)
    return 1 if found is None else int(found)


def windows(rows: Iterable[Mapping[str, Any]]) -> list[WindowRate]:
    """The trials in a consumers table: its cycles/s rows, each with its round and bound."""
    out = []
    for row in rows:
        rate = number(row.get("value"))
        if row.get("metric") == "cycles_per_s" and rate is not None:
            version = row.get("version")
            out.append(WindowRate(str(row.get("build")), _trial(row.get("trial")), int(row["consumers"]), rate,
                                  str(row.get("bound")), version if isinstance(version, str) else None))
    return out


def _entry(g: Growth) -> GrowthEntry:
    return GrowthEntry(g.low, g.high, g.version, RatioVerdictEntry.of(g.verdict),
                       g.low_cycles_per_s, g.high_cycles_per_s, dict(g.bound_at_high))


def growth_entries(rows: Iterable[Mapping[str, Any]], order: Sequence[str] = ()) -> dict[str, GrowthEntry]:
    """Each build's growth from its table's rows, as summary.json holds it: the builds named in `order`
    first, in that order (the rows come in the drawn order of the trials), then any other as first seen."""
    found = {g.build: _entry(g) for g in growth(windows(rows))}
    return {b: found[b] for b in [*order, *found] if b in found}


def growth_of(record: ConsumersRecord, rows: Iterable[Mapping[str, Any]]) -> dict[str, GrowthEntry]:
    """The growth the record holds; for a record from before it held one, the same figures from its rows."""
    return dict(record.growth) if record.growth else growth_entries(rows)


def headlines(r: Record) -> Iterator[Headline]:
    """The median cycles/s per build at each number of consumers, and each build's growth."""
    points: dict[tuple[Any, Any, Any], list[float]] = {}
    for row in r.tables.get("consumers", ()):
        if row.get("metric") == "cycles_per_s" and number(row.get("value")) is not None:
            points.setdefault((row.get("build"), row.get("version"), row.get("consumers")), []).append(row["value"])
    for (build, version, consumers), values in points.items():
        yield from each(build, version, [(f"consumers.cycles_per_s_at_{consumers}", median(values),
                                          "1/s", HIGHER)])
    for build, g in ConsumersRecord.from_record(r.summary).growth.items():
        yield from each(build, g.version, [(f"consumers.growth_{g.low}_to_{g.high}", g.ratio.ratio, "x", HIGHER)])
