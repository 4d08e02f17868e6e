"""`echomq-bench`: one console script, one module per command.

Every command takes `--server SPEC` (repeatable) with the same meaning; the
default is both embedded builds. A command module provides
`configure(parser)` and `run(args) -> exit code`, and is imported only when
it runs, so `echomq-bench check` does not pay for pandas.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

__all__ = ["main", "COMMANDS"]

# command name -> module; the module's docstring first line is the help text.
COMMANDS: dict[str, str] = {
    "check": "echomq_bench.commands.check",
    "run": "echomq_bench.commands.run",
    "gate": "echomq_bench.commands.gate",
    "reapcost": "echomq_bench.commands.reapcost",
    "faults": "echomq_bench.commands.faults",
    "peers": "echomq_bench.commands.peers",
    "lease": "echomq_bench.commands.lease",
    "report": "echomq_bench.commands.report",
    "capacity": "echomq_bench.commands.capacity",
    "compare": "echomq_bench.commands.compare",
    "failover": "echomq_bench.commands.failover",
}


def server_spec(text: str) -> object:
    from echomq_bench.servers import ServerSpecError, parse_server_spec

    try:
        return parse_server_spec(text)
    except ServerSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_server_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        action="append",
        type=server_spec,
        metavar="SPEC",
        help="redis | valkey | NAME=BINARY [ARGS...] | redis://... | rediss://... "
        "| redis-cluster | valkey-cluster | redis+cluster://... "
        "(repeatable; default: redis and valkey, embedded)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="echomq-bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0])
        add_server_option(command)
        module.configure(command)
        command.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from echomq.errors import EchoMQError
    from echomq_bench.servers import DEFAULT_SPECS, parse_server_spec

    args = build_parser().parse_args(argv)
    if not args.server:
        args.server = [parse_server_spec(s) for s in DEFAULT_SPECS]
    try:
        return int(args._module.run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (EchoMQError, OSError) as exc:
        # Known failures get one clear line, not a traceback.
        print(f"echomq-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
