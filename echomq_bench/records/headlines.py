"""A record's headline figures, one per build and metric: what the results
history keeps of a run, read from the frozen record alone.

A metric is named `<kind>.<figure>` (with the verb, form, case or queue it
is of in between, e.g. `gate.claim.server_us`), and says which way is
better ("lower", "higher", or "" when neither is, such as a recommended
lease). Each kind's figures are its own: `headlines(record)` in
`echomq_bench.records.kinds.<kind>`, found here by the kind's name, as the
report finds its renderer. A key a record of an older schema lacks is
skipped, not guessed. This module imports no pandas: it runs each time a
record is written.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from echomq_bench.records.record import CONTAINER, KINDS, Record

__all__ = ["Headline", "headlines", "extractor_of", "each", "number", "Figures", "LOWER", "HIGHER", "NEITHER"]

LOWER, HIGHER, NEITHER = "lower", "higher", ""


@dataclass(frozen=True)
class Headline:
    build: str
    version: str | None
    metric: str
    value: float
    unit: str
    better: str


Extractor = Callable[[Record], Iterator[Headline]]
# (metric, value, unit, which way is better)
Figures = Iterable[tuple[str, Any, str, str]]


def number(value: Any) -> float | None:
    """A finite figure as a float; None for a flag, a missing value or NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def each(build: Any, version: Any, figures: Figures) -> Iterator[Headline]:
    """One headline per figure that is a number, of the build named."""
    for metric, value, unit, better in figures:
        figure = number(value)
        if figure is not None:
            yield Headline(str(build), str(version) if version else None, metric, figure, unit, better)


def extractor_of(kind: str) -> Extractor | None:
    """The kind's `headlines` (records.kinds.<kind>); None for the main job's folder, whose parts are
    records of their own, and for a kind this version does not write."""
    if kind not in KINDS or kind == CONTAINER:
        return None
    extractor: Extractor = importlib.import_module(f"echomq_bench.records.kinds.{kind}").headlines
    return extractor


def headlines(record: Record) -> list[Headline]:
    """The record's headline figures; none for a kind that has none."""
    extractor = extractor_of(record.kind)
    return list(extractor(record)) if extractor else []
