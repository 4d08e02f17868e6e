"""A latency target as `--slo` takes it: `claim p99 <= 5ms`, `p99.9<=800us`.

The verb is optional and can only be `claim`: it is the one call the open
loop times from its intended start (a complete follows its claim's reply,
so it has no schedule of its own). The quantile runs from p50 to p99.9, the
limit carries its unit (us, µs, ms or s). Anything else is refused with a
message that names the part that is wrong.

This module stays light (re, argparse and the option types): a command's `--help` imports it.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from typing import Any

from echomq_bench.errors import SettingsError
from echomq_bench.options import fraction_in, number

__all__ = ["SloSpec", "SloSpecError", "parse_slo", "slo_option", "add_slo_options", "FORMS", "VERBS",
           "DEFAULT_RESOLUTION", "DEFAULT_HELD"]

VERBS = ("claim",)
FORMS = "'claim p99 <= 5ms', 'claim p99<=5ms', 'p99.9 <= 800us'"
LOWEST_Q, HIGHEST_Q = 50.0, 99.9
UNITS_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0}
DEFAULT_RESOLUTION = 0.02
LOWEST_RESOLUTION, HIGHEST_RESOLUTION = 0.001, 0.5
# The share of probes that hold at the rate reported: a rate to plan at, not where the target
# starts to break. 95% takes 14 probes in a row at every rate that holds (capacity.slo_search).
DEFAULT_HELD = 0.95
LOWEST_HELD, HIGHEST_HELD = 0.5, 0.99
_QUANTILE = re.compile(r"[pP]([0-9]+(?:\.[0-9]+)?)")
_LIMIT = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(\S*)")


class SloSpecError(SettingsError):
    """A latency target that does not parse; the message names the part that is wrong."""


@dataclass(frozen=True)
class SloSpec:
    verb: str            # the call whose latency is held to the limit: claim
    quantile: float      # 99.0 for p99
    limit_ms: float
    limit_text: str      # the limit as given: 5ms, 800us

    @property
    def name(self) -> str:
        """`p99`, `p99.9`."""
        return f"p{self.quantile:g}"

    @property
    def text(self) -> str:
        """`claim p99 <= 5ms`: the target as every record and report writes it."""
        return f"{self.verb} {self.name} <= {self.limit_text}"

    @property
    def key(self) -> str:
        """`claim_p99_le_5ms`: the target in a metric's name."""
        return f"{self.verb}_{self.name}_le_{self.limit_text.replace('µs', 'us')}"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "key": self.key, "verb": self.verb, "quantile": self.quantile,
                "name": self.name, "limit_ms": self.limit_ms}


def _quantile(text: str) -> float:
    match = _QUANTILE.fullmatch(text)
    if not match:
        raise SloSpecError(f"bad quantile {text!r}: want p50 to p99.9, e.g. p99 (targets: {FORMS})")
    value = float(match[1])
    if not LOWEST_Q <= value <= HIGHEST_Q:
        raise SloSpecError(f"quantile {text!r} is outside p50..p99.9")
    return value


def _limit(text: str) -> tuple[float, str]:
    match = _LIMIT.fullmatch(text.strip())
    if not match:
        raise SloSpecError(f"bad limit {text.strip()!r}: want a number with its unit, e.g. 5ms or 800us")
    number, unit = match[1], match[2]
    if not unit:
        raise SloSpecError(f"limit {text.strip()!r} has no unit: write e.g. {number}ms or {number}us "
                           f"(units: {', '.join(UNITS_MS)})")
    if unit not in UNITS_MS:
        raise SloSpecError(f"limit {text.strip()!r}: unknown unit {unit!r}; units: {', '.join(UNITS_MS)}")
    value = float(number) * UNITS_MS[unit]
    if not (value > 0 and math.isfinite(value)):
        raise SloSpecError(f"limit {text.strip()!r} must be more than 0")
    return value, f"{float(number):g}{unit}"


def parse_slo(text: str) -> SloSpec:
    """`claim p99 <= 5ms` -> SloSpec('claim', 99.0, 5.0, '5ms'); SloSpecError naming what is wrong."""
    body = str(text).strip()
    if not body:
        raise SloSpecError(f"the target is empty: want e.g. {FORMS}")
    if "<=" not in body:
        other = next((op for op in (">=", "=>", "=<", "<", ">", "==", "=") if op in body), None)
        if other:
            raise SloSpecError(f"{body!r}: a target is an upper bound on the latency, written '<=' (not "
                               f"{other!r}), e.g. {FORMS}")
        raise SloSpecError(f"{body!r} has no '<=': want e.g. {FORMS}")
    left, _, right = body.partition("<=")
    words = left.split()
    if len(words) not in (1, 2):
        raise SloSpecError(f"{body!r}: want [claim] pNN before '<=', e.g. {FORMS}")
    verb = words[0].lower() if len(words) == 2 else VERBS[0]
    if verb not in VERBS:
        raise SloSpecError(f"verb {words[0]!r}: only claim's latency is timed from its intended start; write "
                           f"'claim {words[-1]} <= ...' or leave the verb out")
    limit_ms, limit_text = _limit(right)
    return SloSpec(verb, _quantile(words[-1]), limit_ms, limit_text)


def slo_option(text: str) -> SloSpec:
    """`parse_slo` as an argparse type: the error becomes the flag's own line (exit 2)."""
    try:
        return parse_slo(text)
    except SloSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_slo_options(parser: argparse.ArgumentParser, min_trials: int, what: str, held: float = DEFAULT_HELD) -> None:
    """--slo, --slo-trials, --slo-resolution and --slo-held (default `held`); `what` says what the search's rate
    is reported as."""
    g = parser.add_argument_group("latency target")
    g.add_argument("--slo", type=slo_option, default=None, metavar="TARGET",
                   help=f"find the highest open-loop rate at which a probe of the window holds TARGET with "
                        f"the --slo-held share, e.g. {FORMS}: a bisection of the rate, every probe on a fresh "
                        f"server; {what}")
    g.add_argument("--slo-trials", type=number(int, 1), default=None, metavar="N",
                   help=f"searches per build with --slo, each on fresh servers (default {min_trials}; fewer than "
                        f"{min_trials} give 'inconclusive', no interval)")
    g.add_argument("--slo-resolution", type=fraction_in(LOWEST_RESOLUTION, HIGHEST_RESOLUTION), default=None,
                   metavar="FRACTION",
                   help=f"with --slo, bisect until the passing and the failing rate are within FRACTION of each "
                        f"other (default {DEFAULT_RESOLUTION * 100:g}%%)")
    g.add_argument("--slo-held", type=fraction_in(LOWEST_HELD, HIGHEST_HELD), default=None, metavar="FRACTION",
                   help=f"with --slo, report the rate a probe of the window holds with probability FRACTION: a "
                        f"rate holds when enough probes in a row hold (default {held * 100:g}%%; 95%% is 14 in a "
                        f"row; 50%% is one probe, the rate where the target breaks half the time)")
