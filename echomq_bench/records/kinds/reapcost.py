"""A `reapcost` record: per build and form, each verb's server time per call over the grid of M, cap, k.

summary.json is a `ReapcostRecord`: `forms` (each form of the live entries
named and explained), `builds` (a `BuildEntry` per server and form, a
`VerbEntry` per verb measured), `side_by_side` (one full call in both forms)
and `reap_ratio_target_met` per form. The grid and the drains row by row are
the tidy tables `reapcost` and `drain`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from echomq_bench.records.entries import Entry, by_name, many, one, optional
from echomq_bench.records.headlines import LOWER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["RECORD", "FormEntry", "FitEntry", "VerbEntry", "BuildEntry", "SideBySideEntry", "ReapcostRecord",
           "headlines", "DEFAULT_CAP", "RATIO_TARGET"]

_POINT = re.compile(r"M=(\d+),cap=(\d+),k=(\d+)")
DEFAULT_CAP = 100
RATIO_TARGET = 2.0   # one call at the largest M over the same at the smallest: at most this


@dataclass(frozen=True)
class FormEntry(Entry):
    """A form of the live entries beside the expired ones: bare members, or members with their job rows."""

    label: str = ""
    meaning: str = "?"


@dataclass(frozen=True)
class FitEntry(Entry):
    """Least squares of server µs = base + µs/job x moved + µs/2xM x log2(M); empty below two sizes of M."""

    base_us: float | None = optional()
    us_per_job: float | None = optional()
    us_per_doubling_of_M: float | None = optional()


@dataclass(frozen=True)
class VerbEntry(Entry):
    """One verb's curve in one form: the grid's medians, the check of its cost against M, the fit, the drains."""

    median_server_us: Mapping[str, float] = field(default_factory=dict)   # "M=..,cap=..,k=.." -> µs
    ratio_largest_to_smallest_M: float | None = None
    ratio_pairs: int = 0
    ratio_per_pair_median_q1_q3: tuple[float, float, float] | None = None
    ratio_k0: float | None = None
    ratio_target: float = RATIO_TARGET
    fit: FitEntry = one(FitEntry, FitEntry())
    # A mass crash drained per cap: calls, back to back and at each cadence (`at_<c>ms_cadence_s`).
    drain: tuple[Mapping[str, Any], ...] = ()

    @property
    def full_call_at_default_cap(self) -> float | None:
        """One full call (k = cap) at the default cap and the largest M measured."""
        full = [(int(m.group(1)), us) for key, us in self.median_server_us.items()
                if (m := _POINT.fullmatch(key)) and int(m.group(2)) == int(m.group(3)) == DEFAULT_CAP]
        return max(full)[1] if full else None


@dataclass(frozen=True)
class BuildEntry(Entry):
    """One server in one form: its verbs' curves and how busy each side was while they were taken."""

    build: str
    version: str | None = None
    form: str = "bare"
    form_label: str = "bare"
    verbs: Mapping[str, VerbEntry] = by_name(VerbEntry)
    server_main_thread_busy: float | None = None
    client_busy: float | None = None


@dataclass(frozen=True)
class SideBySideEntry(Entry):
    """One full call (k = cap) in both forms at one verb, M and cap."""

    build: str
    verb: str = "reap"
    M: int = 0
    cap: int = 0
    k: int = 0
    bare_us: float | None = None
    rows_us: float | None = None
    rows_over_bare: float | None = None


@dataclass(frozen=True)
class ReapcostRecord(Entry):
    forms: Mapping[str, FormEntry] = by_name(FormEntry)
    builds: tuple[BuildEntry, ...] = many(BuildEntry)
    side_by_side: tuple[SideBySideEntry, ...] = many(SideBySideEntry)
    reap_ratio_target_met: Mapping[str, bool | None] = field(default_factory=dict)   # per form

    def version_of(self, build: str) -> str:
        """The server version a build ran, as its entries say."""
        return next((b.version for b in self.builds if b.build == build and b.version), build)

    def label_of(self, form: str) -> str:
        f = self.forms.get(form)
        return f.label if f is not None and f.label else form


RECORD = ReapcostRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    for b in ReapcostRecord.from_record(r.summary).builds:
        for verb, v in b.verbs.items():
            yield from each(b.build, b.version, [
                (f"reapcost.{verb}.{b.form}.call_us_cap{DEFAULT_CAP}", v.full_call_at_default_cap, "us", LOWER),
                (f"reapcost.{verb}.{b.form}.us_per_job", v.fit.us_per_job, "us", LOWER),
                (f"reapcost.{verb}.{b.form}.base_us", v.fit.base_us, "us", LOWER),
                (f"reapcost.{verb}.{b.form}.ratio_largest_to_smallest_M", v.ratio_largest_to_smallest_M,
                 "ratio", LOWER)])
