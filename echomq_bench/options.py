"""The command line's option types and shared flags, in one place.

Every command (and the Locust scenarios' options) follows the same rules:

- A duration carries its unit: ``250us``, ``500ms``, ``10s``, ``1.5s``,
  ``2m``. A bare number is refused with the accepted forms, because no one
  unit is obvious for it; ``0`` alone needs none.
- A list is given by repeating the flag (``--verbs reap --verbs promote``);
  a comma list (``--verbs reap,promote``) means the same. Values that may
  themselves hold commas or spaces (``--server SPEC``, ``--scripts
  NAME=DIR``) are only repeated.
- ``--rate`` is always jobs/s offered over the whole run (all queues, all
  producers), open loop. Other rates have their own names.
- ``--quick`` is the short form of every long command.
- ``--ceiling/--no-ceiling`` says whether the redis-benchmark ceiling is
  measured; on by default wherever it exists.

This module stays light (argparse and re): `echomq-bench --help` and a
command's `--help` import it without the measuring code.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

__all__ = [
    "DurationError", "DURATION_FORMS", "parse_duration_ms", "duration_ms", "duration_s", "whole_ms",
    "legacy_ms", "number", "list_of", "choice", "fraction", "work_dist", "add_list", "rate", "server_spec",
    "add_server_option", "add_quick", "add_ceiling", "add_out", "add_workload_options",
]

T = TypeVar("T")

DURATION_FORMS = "250us, 500ms, 10s, 1.5s, 2m"
_UNITS_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}
_DURATION = re.compile(r"\s*([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*(us|µs|ms|s|m)?\s*")


class DurationError(ValueError):
    """A duration that does not parse; the message shows the accepted forms."""


def parse_duration_ms(text: str) -> float:
    """'500ms' -> 500.0, '1.5s' -> 1500.0, '0' -> 0.0; a bare non-zero number is refused."""
    match = _DURATION.fullmatch(str(text))
    if not match:
        raise DurationError(f"bad duration {text!r}: want a number with its unit, e.g. {DURATION_FORMS}")
    value, unit = float(match[1]), match[2]
    if value < 0:
        raise DurationError(f"duration {text!r} is negative")
    if unit is None:
        if value == 0:
            return 0.0
        raise DurationError(f"duration {text!r} has no unit: write e.g. {match[1]}s or {match[1]}ms "
                            f"(accepted: {DURATION_FORMS})")
    return value * _UNITS_MS[unit]


def _typed(convert: Callable[[str], T], name: str) -> Callable[[str], T]:
    """`convert` as an argparse type: a ValueError becomes the flag's own error line."""

    def typed(text: str) -> T:
        try:
            return convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = name  # argparse names the type in some messages
    return typed


duration_ms = _typed(parse_duration_ms, "duration")
duration_s = _typed(lambda text: parse_duration_ms(text) / 1000.0, "duration")


def _whole_ms(text: str) -> int:
    value = parse_duration_ms(text)
    if value < 1:
        raise DurationError(f"duration {text!r} is under 1ms; give at least 1ms")
    return int(round(value))


whole_ms = _typed(_whole_ms, "duration")


def legacy_ms(text: str) -> float:
    """The value of a flag whose name ends in -ms: a bare number of ms, or a duration with its unit."""
    try:
        value = float(text)
    except ValueError:
        return parse_duration_ms(text)
    if value < 0:
        raise DurationError(f"duration {text!r} is negative")
    return value


def number(kind: type, lo: float, hi: float | None = None) -> Callable[[str], Any]:
    """An int or float type bounded to [lo, hi]; the error names the range."""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if value < lo or (hi is not None and value > hi):
            raise ValueError(f"{text!r} must be from {lo:g} to {hi:g}" if hi is not None
                             else f"{text!r} must be at least {lo:g}")
        return value

    return _typed(convert, kind.__name__)


rate = number(float, 0.001, 1e7)


def list_of(item: Callable[[str], T]) -> Callable[[str], list[T]]:
    """A comma list of `item`s; with action="extend" the flag may also repeat."""

    def convert(text: str) -> list[T]:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"{text!r} is an empty list")
        return [item(p) for p in parts]

    convert.__name__ = "list"
    return convert


def choice(names: Sequence[str], what: str | None = None) -> Callable[[str], str]:
    """One of `names`; the error names the kind of thing (`what`) when given."""

    def convert(text: str) -> str:
        if text not in names:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}; known: {', '.join(names)}" if what else
                                             f"invalid choice: {text!r} (choose from {', '.join(names)})")
        return text

    return convert


def fraction(text: str) -> float:
    """A fraction between 0 and 1 exclusive, as `0.02` or `2%`."""
    body, percent = (text[:-1], True) if text.strip().endswith("%") else (text, False)
    try:
        value = float(body) / (100.0 if percent else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction: give 0.02 or 2%") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must lie between 0 and 1 (0% and 100%), exclusive")
    return value


def work_dist(text: str) -> str:
    """A work-time distribution (`const:0`, `exp:mean=2ms`, ...), checked here and kept as text."""
    from echomq_bench.measurement.workdist import DistError, parse_dist

    try:
        parse_dist(text)
    except DistError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_list(parser: Any, flag: str, item: Callable[[str], Any], help: str, metavar: str, **kw: Any) -> None:
    """A list flag: repeatable, each value may be a comma list; None when not given."""
    parser.add_argument(flag, action="extend", type=list_of(item), default=None, metavar=metavar,
                        help=f"{help}; repeatable, or a comma list", **kw)


def server_spec(text: str) -> object:
    """A `--server SPEC`; a named build is looked up here, so a missing or
    wrong build is refused before the command does anything."""
    from echomq_bench.servers import ServerSpecError, build_binary, parse_server_spec

    try:
        spec = parse_server_spec(text)
        if spec.build is not None:
            build_binary(spec.build)
        return spec
    except ServerSpecError as exc:
        hint = "; give --server once per server" if "," in text else ""
        raise argparse.ArgumentTypeError(f"{exc}{hint}") from None


def add_server_option(parser: argparse.ArgumentParser, *, every_build: bool = False,
                      default: Sequence[str] = ()) -> None:
    from echomq_bench.servers.builds import BUILD_NAMES

    named = " and ".join(default) if default else "redis and valkey"
    default_text = (f"every build installed here of {', '.join(BUILD_NAMES[:-1])} and {BUILD_NAMES[-1]} (redis and "
                    "valkey when fewer than two are)" if every_build else named)
    parser.add_argument(
        "--server", action="append", type=server_spec, metavar="SPEC",
        help=f"redis | valkey | {' | '.join(BUILD_NAMES)} | NAME=BINARY [ARGS...] | "
             "redis://... | rediss://... | redis-cluster | valkey-cluster | redis+cluster://... (repeatable, "
             f"once per server; default: {default_text}, embedded)")


def add_quick(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--quick", action="store_true", help=f"the short form: {what}")


def add_ceiling(parser: Any) -> None:
    parser.add_argument("--ceiling", action=argparse.BooleanOptionalAction, default=True,
                        help="measure the redis-benchmark ceiling of the claim script beside the run "
                             "(default: on; --no-ceiling skips it)")


def add_out(parser: argparse.ArgumentParser, default: str = "results/<run-id>") -> None:
    parser.add_argument("--out", type=Path, default=None, metavar="DIR", help=f"results folder (default {default})")


def add_workload_options(parser: argparse.ArgumentParser, *, duration_default: str,
                         pipeline_default: int | None = None) -> None:
    """The capacity workload flags `capacity` and `compare` share. Values that
    --quick changes default to None here; see capacity.workload.settings_from_args."""
    from dataclasses import replace

    from echomq_bench.capacity.settings import CapacitySettings

    d = CapacitySettings()
    d = replace(d, pipeline=pipeline_default) if pipeline_default is not None else d
    g = parser.add_argument_group("workload")
    g.add_argument("--duration", type=duration_s, default=None, metavar="DURATION",
                   help=f"measured window per run, e.g. 10s, 500ms (default {duration_default})")
    g.add_argument("--warmup", type=duration_s, default=None, metavar="DURATION",
                   help=f"load before the window opens (default {d.warmup_s:g}s)")
    g.add_argument("--processes", type=number(int, 1), default=d.processes, metavar="N",
                   help=f"driver processes, per master on a cluster (default {d.processes})")
    g.add_argument("--connections", type=number(int, 1), default=d.connections, metavar="N",
                   help=f"connections per process (default {d.connections})")
    g.add_argument("--pipeline", type=int, default=d.pipeline, metavar="N",
                   help=f"jobs in flight per connection (default {d.pipeline})")
    g.add_argument("--payload", type=number(int, 0), default=d.payload_bytes, metavar="BYTES",
                   help=f"payload size in bytes (default {d.payload_bytes})")
    g.add_argument("--lease", type=whole_ms, default=d.lease_ms, metavar="DURATION",
                   help=f"lease per claim, e.g. 60s, 500ms (default {d.lease_ms // 1000}s)")
    g.add_argument("--work", type=work_dist, default=d.work, metavar="DIST",
                   help="simulated work per job, e.g. const:0 (default, capacity), exp:mean=2ms")
    g.add_argument("--rate", type=rate, default=None, metavar="JOBS_PER_S",
                   help="jobs/s offered over all queues, open loop (on a cluster split over the queues); latency "
                        "from each claim's intended start (default: closed loop, as fast as the server answers)")
    g.add_argument("--feed", choices=("backlog", "produce"), default=d.feed,
                   help="backlog: drain a pre-filled backlog (default); produce: producers keep pending fed")
    g.add_argument("--backlog", type=number(int, 0), default=None, metavar="JOBS",
                   help="jobs to pre-fill (default: enough for 80,000 jobs/s through warm-up and window)")
    g.add_argument("--queues", type=int, default=d.queues, metavar="N",
                   help="queues to spread the load over (default: 1 on a server, one per master on a cluster, "
                        "named so that they land on different masters)")
    add_ceiling(g)
    g.add_argument("--ceiling-requests", type=number(int, 1), default=None, metavar="N",
                   help=f"claims the C client sends for the ceiling (default {d.ceiling_requests:,})")
    g.add_argument("--no-pin", dest="pin", action="store_false",
                   help="do not pin the server to one core and the driver to the others")
    add_out(parser)
