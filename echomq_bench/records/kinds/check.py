"""A `check` record: a row per story and server in its tidy table, `ok` or
not; summary.json says whether every story passed on every server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from echomq_bench.records.entries import Entry
from echomq_bench.records.headlines import LOWER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["RECORD", "CheckRecord", "headlines"]


@dataclass(frozen=True)
class CheckRecord(Entry):
    passed: bool


RECORD = CheckRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    failed: dict[tuple[Any, Any], int] = {}
    for row in r.tables.get("check", ()):
        key = (row.get("server"), row.get("version"))
        failed[key] = failed.get(key, 0) + (row.get("ok") is not True)
    for (server, version), count in failed.items():
        yield from each(server, version, [("check.failed_stories", count, "stories", LOWER)])
