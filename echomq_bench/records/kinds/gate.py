"""A `gate` record: per build, each verb's server time over a reference
script's against the same ratio in the baseline, the script A/B where a
script changed, where the baseline came from, and the verdict.

summary.json is `{"passed": ..., "builds": [<GateEntry>, ...]}`. A gate run
in the results history can serve as a later gate's baseline: its entry's
`figures`, and the scripts table (microbench.history_baseline reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Mapping, Sequence

from echomq_bench.measurement.regression import AllowedChange, RegressionVerdict
from echomq_bench.records.entries import Entry, many, one
from echomq_bench.records.headlines import LOWER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["RECORD", "GateVerdictEntry", "ServerProcess", "BaselineFrom", "GateEntry", "GateRecord", "headlines",
           "MIN_JUDGED_US"]

# commandstats reads each call in whole µs: a verb under 2 µs moves by a whole
# tick when the machine's speed shifts, so its cross-run figure is shown, not judged.
MIN_JUDGED_US = 2.0


@dataclass(frozen=True, kw_only=True)
class GateVerdictEntry(RegressionVerdict, Entry):
    """One verb's server time over its reference's against the baseline's (the normalised check, a
    cross-run figure), and the script A/B where the script changed: the timing gate's verdict, judged by
    measurement.regression's rule and written with its status as said."""

    case: str
    reference: str | None = None            # the reference script its time is over
    server_us: float | None = None
    client_us: float | None = None
    base_ratio: float | None = None         # None: the baseline has no figure for it
    now_ratio: float | None = None
    ab_change: float | None = None          # current script / baseline script - 1, interleaved
    ab_allowed: float | None = None
    advisory: bool = False          # the baseline is of another machine: the normalised check is shown, not judged
    noisy: bool = False             # a check that counts has 3 standard errors above its tolerance
    below_resolution: bool = False  # under MIN_JUDGED_US: the normalised check is shown, not judged

    WORSE: ClassVar[str] = "SLOWER"
    BETTER: ClassVar[str] = "faster"

    def checks(self) -> Sequence[AllowedChange]:
        ab = (self.ab_change, self.ab_allowed)
        return (ab,) if self.advisory or self.below_resolution else ((self.change, self.allowed), ab)

    @property
    def inconclusive(self) -> bool:
        return self.noisy and not self.regressed

    @property
    def note(self) -> str:
        if self.base_ratio is None:   # nothing compared across runs: nothing to qualify
            return ""
        if self.advisory:
            return "cross-run figure advisory: another machine"
        if self.below_resolution:
            return f"cross-run figure advisory: under {MIN_JUDGED_US:g} µs"
        return ""


@dataclass(frozen=True)
class ServerProcess(Entry):
    """One server process a gate run measured, as INFO server names it: the gate's unit of replication."""

    role: str                  # `judged`, `confirmation`, `pass 2 of 10`
    run_id: str = ""           # new with every start of a server process
    pid: int | None = None
    port: int | None = None


@dataclass(frozen=True)
class BaselineFrom(Entry):
    """Where the baseline came from: its file or history run, the build and time it was measured, and how many
    passes it pools on how many server processes (its drift between them has processes - 1 degrees of freedom;
    None: the baseline does not say)."""

    path: str | None = None
    history_run: bool = False
    revision: str = ""
    version: str = ""
    created_utc: str = ""
    fingerprint_differences: tuple[str, ...] = ()
    passes: int | None = None
    processes: int | None = None


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
    # The server processes measured: the judged one, then a confirmation's; with --update, one per pass.
    servers: tuple[ServerProcess, ...] = many(ServerProcess)


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
