"""A `peers` record: per queue library and server, jobs/s, server time and commands per job."""

from __future__ import annotations

from typing import Iterator

from echomq_bench.records.headlines import HIGHER, LOWER, Headline, each
from echomq_bench.records.record import Record

__all__ = ["headlines"]


def headlines(r: Record) -> Iterator[Headline]:
    for q in r.summary.get("queues") or ():
        name = q.get("queue")
        yield from each(q.get("server"), q.get("server_version"), [
            (f"peers.{name}.jobs_per_s", q.get("jobs_per_s"), "1/s", HIGHER),
            (f"peers.{name}.server_us_per_job", q.get("server_us_per_job"), "us", LOWER),
            (f"peers.{name}.commands_per_job", q.get("commands_per_job"), "commands", LOWER)])
