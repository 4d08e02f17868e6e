"""A `gate` record: per build, each verb's server time over a reference
script's against the same ratio in the baseline, the script A/B where a
script changed, where the baseline came from, and the verdict.

summary.json is `{"passed": ..., "builds": [<GateEntry>, ...]}`. A gate run
in the results history can serve as a later gate's baseline: its entry's
`figures`, and the scripts table (microbench.history_baseline reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from echomq_bench.records.entries import Entry, many, one
from echomq_bench.records.headlines import LOWER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["RECORD", "GateVerdictEntry", "BaselineFrom", "GateEntry", "GateRecord", "headlines"]


@dataclass(frozen=True)
class GateVerdictEntry(Entry):
    """One verb against its baseline (microbench.gate.TimingVerdict, with its status as said)."""

    case: str
    reference: str | None = None            # the reference script its time is over
    server_us: float | None = None
    client_us: float | None = None
    base_ratio: float | None = None         # None: the baseline has no figure for it
    now_ratio: float | None = None
    change: float | None = None             # now/base - 1
    allowed: float | None = None
    ab_change: float | None = None          # current script over the baseline's, interleaved
    ab_allowed: float | None = None
    confirmed: bool | None = None
    advisory: bool = False
    missing: bool = False
    noisy: bool = False
    below_resolution: bool = False
    status: str = "?"


@dataclass(frozen=True)
class BaselineFrom(Entry):
    """Where the baseline came from: its file or history run, the build and time it was measured."""

    path: str | None = None
    history_run: bool = False
    revision: str = ""
    version: str = ""
    created_utc: str = ""
    fingerprint_differences: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateEntry(Entry):
    build: str
    version: str | None = None
    baseline: str | None = None
    updated: bool = False
    changed_scripts: tuple[str, ...] = ()
    regressions: tuple[str, ...] = ()
    inconclusive: tuple[str, ...] = ()
    same_machine: bool = True
    lua_dir: str | None = None
    lua_shown: str | None = None
    server_main_thread_busy: float | None = None
    client_busy: float | None = None
    bound: str | None = None
    rounds: int | None = None
    calls: int | None = None
    baseline_from: BaselineFrom = one(BaselineFrom, BaselineFrom())
    verdicts: tuple[GateVerdictEntry, ...] = many(GateVerdictEntry)
    # Per verb and reference script, microbench.figures' figures: what a later gate judges against.
    figures: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class GateRecord(Entry):
    passed: bool = True
    builds: tuple[GateEntry, ...] = many(GateEntry)

    def of(self, build: str) -> GateEntry | None:
        return next((b for b in self.builds if b.build == build), None)


RECORD = GateRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    for b in GateRecord.from_record(r.summary).builds:
        figures: list[tuple[str, Any, str, str]] = [
            ("gate.regressions", len(b.regressions), "verbs", LOWER),
            ("gate.inconclusive", len(b.inconclusive), "verbs", LOWER)]
        for v in b.verdicts:
            figures += [(f"gate.{v.case}.server_us", v.server_us, "us", LOWER),
                        (f"gate.{v.case}.ratio", v.now_ratio, "ratio", LOWER)]
        yield from each(b.build, b.version, figures)
