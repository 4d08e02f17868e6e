"""`echomq-bench check`: the contract's conformance stories, played for real.

J1..J6 hold the job row, L1..L6 the state machine (docs/contract.md).
Each line is `ok` or `FAIL` with what was seen, then PASS n/n.
Every story runs on its own throwaway queue and deletes its keys after.
With `--out DIR` the lines are also kept as a record of kind "check", the
same record `run` keeps in its check/ folder; either way no pandas or
matplotlib is imported, so the check starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from echomq_bench.conformance.stories import Line, run_check

__all__ = ["Line", "run_check", "configure", "run", "play", "keep"]

Row = dict[str, Any]


def configure(parser: argparse.ArgumentParser) -> None:
    from echomq_bench.options import add_out

    parser.description = "Play the contract's conformance stories (J1-J6, L1-L6) on each server."
    add_out(parser, "none: the lines are printed only")


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
    from echomq_bench.records.writer import write_record

    info = meta.collect(servers, part="check", **settings)
    return write_record(out, Record(kind="check", summary=CheckRecord(passed=ok).to_record(), meta=info,
                                    tables={"check": tuple(rows)}))


def verdict(lines: list[Line]) -> str:
    passed = sum(line.ok for line in lines)
    return f"{'PASS' if passed == len(lines) else 'FAIL'} {passed}/{len(lines)}"


# The settings the queue relies on: what a full server does to job rows, whether
# the queue survives a restart, and how long a script may hold the server.
RELIED_ON = ("maxmemory-policy", "appendonly", "save", "busy-reply-threshold", "lua-time-limit")


def settings_lines(settings: dict[str, str]) -> list[str]:
    """The settings line of a server's header, and a warning when rows can be evicted."""
    shown = ", ".join(f"{name} {settings[name]!r}" if settings[name] == "" else f"{name} {settings[name]}"
                      for name in RELIED_ON if name in settings)
    lines = [f"settings: {shown or 'not readable (CONFIG GET refused)'}"]
    policy = settings.get("maxmemory-policy")
    if policy not in (None, "noeviction"):
        lines.append(f"WARNING: maxmemory-policy {policy} may evict job rows; a job whose row is gone goes to the "
                     "dead set when a script meets it. Set noeviction.")
    return lines


def _say_servers(servers: Sequence[Any]) -> ServerReport:
    """Each server's header names its build (version, allocator and binary) and the settings the queue relies on."""
    from echomq_bench.records.meta import build_text, describe_server, server_settings

    builds = {server.name: build_text(describe_server(server)) for server in servers}
    settings = {server.name: server_settings(server.client()) for server in servers}

    def report(name: str, version: str, lines: list[Line] | None) -> None:
        if lines is None:
            print("\n".join([f"== {name}: {builds.get(name, version)} ==", *settings_lines(settings[name])]),
                  flush=True)
        else:
            print(verdict(lines), flush=True)

    return report


def _say_line(line: Line) -> None:
    print(line, flush=True)


def run(args: argparse.Namespace) -> int:
    from echomq_bench.servers import running

    with running(*args.server) as servers:
        ok, rows = play(servers, _say_servers(servers), _say_line)
        if args.out is not None:
            print(f"record: {keep(args.out, servers, ok, rows)}", file=sys.stderr)
    return 0 if ok else 1
