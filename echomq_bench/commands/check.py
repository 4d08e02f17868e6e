"""`echomq-bench check`: the seeds' conformance stories, played for real.

J1..J5 are course page B3.2 (the job row), L1..L6 are B3.3 (the state
machine). Each line is `ok` or `FAIL` with what was seen, then PASS n/n.
Every story runs on its own throwaway queue and deletes its keys after.
"""

from __future__ import annotations

import argparse
from typing import Iterator

from echomq_bench.conformance.stories import Line, run_check

__all__ = ["Line", "run_check", "configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = "Play the seeds' conformance stories (J1-J5, L1-L6) on each server."


def run(args: argparse.Namespace) -> int:
    from echomq_bench.servers import running

    failed = False
    with running(*args.server) as servers:
        for server in servers:
            print(f"== {server.name}: {server.version()} ==")
            lines = list(_print_each(run_check(server.client())))
            passed = sum(line.ok for line in lines)
            print(f"{'PASS' if passed == len(lines) else 'FAIL'} {passed}/{len(lines)}")
            failed |= passed != len(lines)
    return 1 if failed else 0


def _print_each(lines: Iterator[Line]) -> Iterator[Line]:
    for line in lines:
        print(line, flush=True)
        yield line
