"""A `reapcost` record: per build and form, each verb's server time per call over the grid of M, cap, k."""

from __future__ import annotations

import re
from typing import Any, Iterator, Mapping

from echomq_bench.records.headlines import LOWER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["headlines", "DEFAULT_CAP"]

_POINT = re.compile(r"M=(\d+),cap=(\d+),k=(\d+)")
DEFAULT_CAP = 100


def _full_call_at_default_cap(table: Mapping[str, Any]) -> Any:
    """One full call (k = cap) at the default cap and the largest M measured: the report's headline."""
    full = [(int(m.group(1)), us) for key, us in table.items()
            if (m := _POINT.fullmatch(key)) and int(m.group(2)) == int(m.group(3)) == DEFAULT_CAP]
    return max(full)[1] if full else None


def headlines(r: Record) -> Iterator[Headline]:
    for b in r.summary.get("builds") or ():
        form = b["form"]
        for verb, v in (b.get("verbs") or {}).items():
            fit = v.get("fit") or {}
            yield from each(b.get("build"), b.get("version"), [
                (f"reapcost.{verb}.{form}.call_us_cap{DEFAULT_CAP}", _full_call_at_default_cap(
                    v.get("median_server_us") or {}), "us", LOWER),
                (f"reapcost.{verb}.{form}.us_per_job", fit.get("us_per_job"), "us", LOWER),
                (f"reapcost.{verb}.{form}.base_us", fit.get("base_us"), "us", LOWER),
                (f"reapcost.{verb}.{form}.ratio_largest_to_smallest_M", v.get("ratio_largest_to_smallest_M"),
                 "ratio", LOWER)])
