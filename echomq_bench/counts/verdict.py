"""The count gate's decision rule, apart from any server.

A baseline pools P fresh servers of one binary; what varies between them
(the server's random hash seed and skiplist levels, the clock's digits in
the scripts' strings) is the spread. A new run is one more draw. Its verb
is flagged when it exceeds the one-sided 99.9% prediction bound of the
baseline's runs:

    allowed = max(FLOOR, t(0.999, P-1) * sd * sqrt(1 + 1/P) / mean)

A flagged verb is counted once more on another fresh server; it is a
regression only when that run is flagged too (the rule the timing gate
shares, measurement.regression). Under the rule's normal model a verb of
unchanged code fails with probability 1e-6 per run, and a change of k
times the allowance is caught whenever both draws land above it. The
measured rates are on the gate's page (docs/measurements).

A regression names the part of the verb that grew most, in instructions
per call: a server command the script called, or `lua`, the interpreter
and scripting glue around them. Every redis.call costs glue as well as its
command (docs/measurements/2026-12-02-count-gate.md measures it), so a script that calls one
more command grows in `lua` too; the verdict also names each command the
script now calls more often per call.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from echomq_bench.measurement.intervals import prediction_bound
from echomq_bench.records.kinds.counts import CountVerdictEntry

__all__ = ["FLOOR", "CONFIDENCE", "allowance", "judge", "largest_growth", "more_calls"]

FLOOR = 0.005       # no allowance below 0.5%: a spread of a handful of runs can read near zero by chance
CONFIDENCE = 0.999  # one-sided, per verb and per draw
LUA = "lua"


def allowance(mean: float, sd: float, passes: int) -> float:
    """The largest change of one new run that the baseline's spread explains."""
    if passes < 2 or mean <= 0:
        raise ValueError(f"an allowance needs a positive mean and at least 2 runs, got mean {mean}, {passes} runs")
    return max(FLOOR, prediction_bound(sd, passes, CONFIDENCE) / mean)


def _parts(figure: Mapping[str, Any]) -> dict[str, float]:
    """A figure's instructions per call by part: each command, and the Lua rest."""
    commands = figure.get("commands") or {}
    parts = {name: float(c["instructions"]) for name, c in commands.items()}
    parts[LUA] = float(figure["instructions"]) - sum(parts.values())
    return parts


def largest_growth(base: Mapping[str, Any], now: Mapping[str, Any]) -> tuple[str, float]:
    """The part that grew most per call, and by how many instructions."""
    before, after = _parts(base), _parts(now)
    growth = {p: after.get(p, 0.0) - before.get(p, 0.0) for p in set(before) | set(after)}
    part = max(sorted(growth), key=lambda p: growth[p])
    return part, growth[part]


def more_calls(base: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, float]:
    """Each command the verb now calls at least half a call more often per call, and by how many calls."""
    before = {k: float(c["calls"]) for k, c in (base.get("commands") or {}).items()}
    after = {k: float(c["calls"]) for k, c in (now.get("commands") or {}).items()}
    return {k: round(n - before.get(k, 0.0), 3) for k, n in sorted(after.items()) if n - before.get(k, 0.0) >= 0.5}


def judge(verb: str, now: Mapping[str, Any], base: Mapping[str, Any] | None, passes: int,
          script_changed: bool = False) -> CountVerdictEntry:
    """One verb's verdict: its figure now (instructions, commands) against the baseline's."""
    current = float(now["instructions"])
    if base is None:
        return CountVerdictEntry(verb=verb, base=None, now=current, missing=True, script_changed=script_changed)
    mean = float(base["instructions"])
    verdict = CountVerdictEntry(verb=verb, base=mean, now=current, change=current / mean - 1,
                           allowed=allowance(mean, float(base["sd"]), passes), script_changed=script_changed)
    if verdict.flagged:
        part, by = largest_growth(base, now)
        verdict = replace(verdict, grew=part, grew_by=by, more_calls=more_calls(base, now))
    return verdict
