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
from typing import Any, Sequence

from echomq_bench.conformance.check import ServerReport, keep, play, verdict
from echomq_bench.conformance.stories import Line

__all__ = ["configure", "run", "RELIED_ON", "settings_lines"]


def configure(parser: argparse.ArgumentParser) -> None:
    from echomq_bench.options import add_out

    parser.description = "Play the contract's conformance stories (J1-J6, L1-L6) on each server."
    add_out(parser, "none: the lines are printed only")


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
