"""The check: every conformance story on every server, its verdict line and
its record (kind "check"). `echomq-bench check` and the main job's check
part both play and keep it here, so the two records are alike; records and
their writer load only when a record is kept, so a check that prints its
lines alone imports neither pandas nor matplotlib."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from echomq_bench.conformance.stories import Line, run_check

__all__ = ["Row", "ServerReport", "play", "keep", "verdict"]

Row = dict[str, Any]


# Told of each server before its stories (lines None) and after them: a report, not a progress line.
ServerReport = Callable[[str, str, "list[Line] | None"], None]


def play(servers: Iterable[Any], report: ServerReport, each_line: Callable[[Line], None] = lambda line: None,
         ) -> tuple[bool, list[Row]]:
    """Every story on every server: whether all passed, and one row per story and server.
    `report(name, version, lines)` is called before a server's stories (lines None) and after
    them; `each_line` as each story ends, so a long check shows its progress."""
    rows: list[Row] = []
    ok = True
    for server in servers:
        version = server.version()
        report(server.name, version, None)
        lines = []
        for line in run_check(server.client()):
            each_line(line)
            lines.append(line)
        report(server.name, version, lines)
        rows += [{"server": server.name, "version": version, "story": f"{line.tag} {line.name}",
                  "ok": line.ok, "text": line.text} for line in lines]
        ok &= all(line.ok for line in lines)
    return ok, rows


def keep(out: Path, servers: Sequence[Any], ok: bool, rows: list[Row], **settings: Any) -> Path:
    """The record of one check: kind "check", its verdict and the story table."""
    from echomq_bench.records import meta
    from echomq_bench.records.kinds.check import CheckRecord
    from echomq_bench.records.record import Record
    from echomq_bench.records.files import write_record

    info = meta.collect(servers, part="check", **settings)
    return write_record(out, Record(kind="check", summary=CheckRecord(passed=ok).to_record(), meta=info,
                                    tables={"check": tuple(rows)}))


def verdict(lines: list[Line]) -> str:
    passed = sum(line.ok for line in lines)
    return f"{'PASS' if passed == len(lines) else 'FAIL'} {passed}/{len(lines)}"
