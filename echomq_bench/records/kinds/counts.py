"""A `counts` record: per build, each verb's instructions per call, counted
under callgrind on a fresh server, against the baseline of the same server
binary, and the verbs that came out costlier.

summary.json is `{"passed": ..., "builds": [<CountsBuild>, ...]}`. A gate
run's build may hold `seed_price`: enqueue, claim and complete counted with
the seed's scripts beside the project's (counts.seed_price), judged against
nothing. The main job writes one too, judged against no baseline: with `cycle`, the verbs of
one job's cycle whose instructions per call add up to the build's
instructions per cycle, and `skipped` when some or all builds went uncounted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Iterator, Mapping, Self

from echomq_bench.measurement.regression import RegressionVerdict
from echomq_bench.records.entries import Entry, many, one, optional
from echomq_bench.records.headlines import LOWER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["RECORD", "CountVerdictEntry", "CountsBaselineFrom", "SeedVerbPrice", "SeedPrice", "CountsBuild",
           "CountsRecord", "headlines"]


@dataclass(frozen=True, kw_only=True)
class CountVerdictEntry(RegressionVerdict, Entry):
    """One verb's instructions per call against the baseline's, and what grew when it is flagged: the count
    gate's verdict (counts.verdict.judge), judged by measurement.regression's rule and written with its
    status as said."""

    verb: str
    base: float | None = None                  # mean instructions per call in the baseline
    now: float | None = None
    grew: str = ""                             # the part that grew most, when the verb is flagged
    grew_by: float = 0.0                       # ... in instructions per call
    more_calls: Mapping[str, float] | None = None   # commands now called more often, calls per call added
    again: float | None = None                 # the confirming run's change
    script_changed: bool = False               # the script's text differs from the baseline's

    WORSE: ClassVar[str] = "COSTLIER"
    BETTER: ClassVar[str] = "cheaper"
    DIGITS: ClassVar[int] = 5

    def confirm(self, again: Self) -> Self:
        return replace(super().confirm(again), again=again.change) if self.flagged else self

    def named(self) -> str:
        """What grew, as a failure line says it: `lua +7,092 per call; calls ZINTERCARD +1 per call`."""
        text = f"{self.grew} +{self.grew_by:,.0f} per call" if self.grew else ""
        if self.more_calls:
            text += "; calls " + ", ".join(f"{k} +{n:g} per call" for k, n in self.more_calls.items())
        return text


@dataclass(frozen=True)
class CountsBaselineFrom(Entry):
    created_utc: str = ""
    passes: int | None = None
    revision: str = ""
    recorded_on: str = ""


@dataclass(frozen=True)
class SeedVerbPrice(Entry):
    """One verb's instructions per call with the project's scripts and with the seed's, and project over seed."""

    verb: str
    project: float
    seed: float
    ratio: float


@dataclass(frozen=True)
class SeedPrice(Entry):
    """What the queue's checks cost against the seed's bare state machine on one build (counts.seed_price): a
    lens beside the gate's verdicts, never one of them. The cycle is its verbs summed, per call."""

    verbs: tuple[SeedVerbPrice, ...] = many(SeedVerbPrice)
    project: float | None = None               # the cycle's instructions per call, the project's scripts
    seed: float | None = None                  # ... the seed's
    ratio: float | None = None                 # project over seed
    scripts: Mapping[str, str] = field(default_factory=dict)   # verb -> SHA-1 of the seed's script counted
    wall_s: float | None = None
    skipped: str | None = optional()           # why the seed's scripts went uncounted

    @property
    def cycle(self) -> tuple[str, ...]:
        return tuple(v.verb for v in self.verbs)


@dataclass(frozen=True)
class CountsBuild(Entry):
    build: str
    version: str | None = None
    binary: Mapping[str, Any] = field(default_factory=dict)     # path, version, sha256, build_id, libc
    baseline: str | None = None
    updated: bool = False
    regressions: tuple[str, ...] = ()
    runs: int | None = None
    wall_s: float | None = None
    valgrind: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)   # calls, heavy_calls, warmup, sizes
    baseline_from: CountsBaselineFrom = one(CountsBaselineFrom, CountsBaselineFrom())
    verdicts: tuple[CountVerdictEntry, ...] = many(CountVerdictEntry)
    # Per verb: instructions per call, and per server command its calls and instructions.
    figures: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    seed_price: SeedPrice | None = one(SeedPrice, written_when_none=False)


@dataclass(frozen=True)
class CountsRecord(Entry):
    passed: bool = True
    builds: tuple[CountsBuild, ...] = many(CountsBuild)
    cycle: tuple[str, ...] | None = optional()    # the verbs of one cycle, when the record counts cycles
    skipped: str | None = optional()              # why a build, or every build, went uncounted

    def per_cycle(self) -> dict[str, float]:
        """Each build's instructions per cycle: the sum of its cycle's verbs, per call (builds missing one: none)."""
        verbs = self.cycle or ()
        return {b.build: sum(float(b.figures[v]["instructions"]) for v in verbs) for b in self.builds
                if verbs and all(v in b.figures for v in verbs)}


RECORD = CountsRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    record = CountsRecord.from_record(r.summary)
    if record.cycle:
        # A cycle's counts are judged against nothing and drawn on other populations than the gate's: their
        # own name, so the history never sets them beside the gate's per-verb figures.
        cycles = record.per_cycle()
        for b in record.builds:
            yield from each(b.build, b.version, [("counts.cycle.instructions", cycles.get(b.build), "instructions",
                                                  LOWER)])
        return
    for b in record.builds:
        figures: list[tuple[str, Any, str, str]] = [("counts.regressions", len(b.regressions), "verbs", LOWER)]
        figures += [(f"counts.{verb}.instructions", f.get("instructions"), "instructions", LOWER)
                    for verb, f in b.figures.items()]
        yield from each(b.build, b.version, figures)
