"""A ratio's verdict as every record that judges a ratio keeps it: a build
against its baseline (compare), a rate at a target against the baseline's
(compare --slo), a queue against the baseline queue (peers), throughput at
the most consumers against the fewest (consumers).

`RatioVerdictEntry` is measurement.verdicts.RatioVerdict itself, written as
its `to_dict()` and read back by its `from_dict()`: the type the run judged
is the type the report reads, with no copy of its fields between them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from echomq_bench.measurement.verdicts import RatioVerdict
from echomq_bench.records.entries import Entry

__all__ = ["RatioVerdictEntry"]


@dataclass(frozen=True, kw_only=True)
class RatioVerdictEntry(RatioVerdict, Entry):
    """The ratio to the baseline and what it says; a metric not judged holds its `text` alone (why), or
    nothing."""

    @classmethod
    def of(cls, verdict: RatioVerdict) -> RatioVerdictEntry:
        """The verdict as judged, to keep in a record."""
        return cls(**{f.name: getattr(verdict, f.name) for f in fields(verdict)})

    def to_record(self) -> dict[str, Any]:
        return self.to_dict()

    @classmethod
    def from_record(cls, entry: Mapping[str, Any]) -> RatioVerdictEntry:
        return cls.from_dict(entry)
