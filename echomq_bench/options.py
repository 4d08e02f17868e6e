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

from echomq_bench.errors import SettingsError

__all__ = [
    "DurationError", "DURATION_FORMS", "parse_duration_ms", "duration_ms", "duration_s", "whole_ms",
    "number", "list_of", "choice", "fraction", "fraction_in", "work_dist", "add_list", "rate", "server_spec",
    "add_server_option", "add_quick", "add_ceiling", "add_out",
]

T = TypeVar("T")

DURATION_FORMS = "250us, 500ms, 10s, 1.5s, 2m"
_UNITS_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}
_DURATION = re.compile(r"\s*([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*(us|µs|ms|s|m)?\s*")


class DurationError(SettingsError):
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


def _fraction_of(text: str) -> float:
    body, percent = (text[:-1], True) if text.strip().endswith("%") else (text, False)
    try:
        return float(body) / (100.0 if percent else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction: give 0.02 or 2%") from None


def fraction(text: str) -> float:
    """A fraction between 0 and 1 exclusive, as `0.02` or `2%`."""
    value = _fraction_of(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must lie between 0 and 1 (0% and 100%), exclusive")
    return value


def fraction_in(lo: float, hi: float) -> Callable[[str], float]:
    """A fraction from `lo` to `hi`, both included, as `0.02` or `2%`; the error names the range in percent."""

    def convert(text: str) -> float:
        value = _fraction_of(text)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text!r} must be from {lo * 100:g}% to {hi * 100:g}%")
        return value

    convert.__name__ = "fraction"
    return convert


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
