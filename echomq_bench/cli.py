"""`echomq-bench`: one console script, one module per command.

Every command that talks to a server takes `--server SPEC` (repeatable) with
the same meaning; the default is both embedded builds. A command module
provides `configure(parser)` and `run(args) -> exit code`. The parser is
built from the table below without importing any command module: only the
command being run (or asked for its --help) is imported and configured, so
`echomq-bench check` never pays for pandas. Option types and shared flags
live in `echomq_bench.options`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import Sequence

from echomq_bench.errors import BenchError
from echomq_bench.options import add_server_option

__all__ = ["main", "build_parser", "COMMANDS", "Command"]


@dataclass(frozen=True)
class Command:
    summary: str          # one whole sentence, shown in `echomq-bench --help`
    server: bool = True   # takes --server: it talks to a server
    every_build: bool = False  # with no --server: every build installed here, not redis and valkey
    servers: tuple[str, ...] = ()  # with no --server: these specs, not redis and valkey


COMMANDS: dict[str, Command] = {
    "check": Command("Play the conformance stories (J1-J6, L1-L6) on each server and say which pass."),
    "run": Command("The main job on every installed build: which build, how long a lease, what the reaper's cap "
                   "costs and how throughput grows, answered first in the terminal and the report.",
                   every_build=True),
    "gate": Command("Fail when a verb got slower than the committed baseline, naming it."),
    "reapcost": Command("Measure what one reap or promote call costs the server against the set size and the "
                        "cap."),
    "faults": Command("Inject ten faults under a steady load on every installed build and audit where every job "
                      "went.", every_build=True),
    "peers": Command("Run the same no-op jobs through echomq and ten peer queues, in two modes, on one server.",
                     servers=("redis",)),
    "lease": Command("Sweep leases on a real server, model them and recommend one."),
    "report": Command("Turn results folders into report.md, a self-contained report.html and PNG charts.",
                      server=False),
    "capacity": Command("Measure how many claim/complete cycles per second a server sustains, and what bound it."),
    "compare": Command("Judge whether build B is faster than build A, over interleaved trials with confidence "
                       "intervals."),
    "failover": Command("Kill a cluster master under load and audit where every job went."),
    "reshard": Command("Move a queue's cluster slot between masters under load and audit where every job went."),
    "history": Command("Follow every recorded run's headline figures across commits, one line per machine "
                       "fingerprint, and flag step changes.", server=False),
}


DESCRIPTION = "Benchmarks and checks of the echomq job queue on Redis and Valkey; one command per question."
CONVENTIONS = ("Every command: durations carry their unit (500ms, 10s, 1.5s, 2m); a list repeats its flag or takes "
               "a comma list; --rate is jobs/s offered over the whole run; --quick is the short form of a long "
               "command. `echomq-bench COMMAND --help` shows a command's flags.")


class _NoServer(argparse.Action):
    """--server on a command that talks to no server: say so instead of 'unrecognized arguments'."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        parser.error("it reads results folders and talks to no server: drop --server")


def module_of(name: str) -> object:
    return importlib.import_module(f"echomq_bench.commands.{name}")


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command named in argv: the first word that is one (the top level has no options with values)."""
    return next((word for word in argv if word in COMMANDS), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; only the command argv names is imported and configured.
    With argv None every command is configured (a full parser, for tools and tests)."""
    parser = argparse.ArgumentParser(prog="echomq-bench", description=DESCRIPTION, epilog=CONVENTIONS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = None if argv is None else chosen_command(argv)
    for name, command in COMMANDS.items():
        cmd = sub.add_parser(name, help=command.summary, description=command.summary)
        if argv is not None and name != wanted:
            continue
        if command.server:
            add_server_option(cmd, every_build=command.every_build, default=command.servers)
        else:
            cmd.add_argument("--server", action=_NoServer, nargs="?", help=argparse.SUPPRESS)
        module = module_of(name)
        module.configure(cmd)  # type: ignore[attr-defined]
        cmd.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Every failure of the instrument (echomq_bench.errors),
    of the client (a server that misbehaves) or of the system ends it with one
    line on stderr and exit 2, not a traceback; anything else is a bug and
    keeps its traceback."""
    from echomq import EchoMQError  # not at import: the parser alone needs no server client

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    try:
        if COMMANDS[args.command].server and not args.server:
            args.server = default_servers(COMMANDS[args.command])
        return int(args._module.run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (BenchError, EchoMQError, OSError) as exc:
        print(f"echomq-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2


def default_servers(command: Command) -> list[object]:
    """The servers of a command given no --server: every installed build, or its own specs, or the defaults."""
    from echomq_bench.servers import DEFAULT_SPECS, installed_builds, parse_server_spec

    every = [b.name for b in installed_builds()] if command.every_build else []
    fallback = command.servers or DEFAULT_SPECS
    return [parse_server_spec(s) for s in (every if len(every) >= 2 else fallback)]


if __name__ == "__main__":
    sys.exit(main())
