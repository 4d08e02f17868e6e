"""The settings every embedded server starts with, whatever its build, and
which of them a given version knows.

Builds are compared on equal terms only when each runs the same way: no
snapshots, no AOF, one I/O thread, loopback only. A setting a version does
not know would stop that server at start ("Bad directive"), so each setting
carries the first Redis release that knows it and is left out, and recorded
as left out, for an older binary. Valkey began from Redis 7.2 and knows
every setting Redis 7.2 knows. A binary whose version is unknown (not a
Redis or Valkey server by its `--version`) gets them all, as before there
was a check.

The spec's own ARGS come after these, so `--appendonly yes` or
`--io-threads 2` in a spec still wins.
"""

from __future__ import annotations

from dataclasses import dataclass

from echomq_bench.servers.builds import Identity

__all__ = ["Setting", "BASELINE", "Baseline", "baseline_for"]

# Valkey's first release forked Redis 7.2.4, configuration included.
VALKEY_KNOWS_REDIS = (7, 2)


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    since: tuple[int, int]   # the first Redis release that knows it


BASELINE: tuple[Setting, ...] = (
    Setting("save", "", (2, 0)),            # no RDB snapshot: no fork or disk write inside a window
    Setting("appendonly", "no", (2, 0)),    # no AOF, likewise
    Setting("io-threads", "1", (6, 0)),     # the main thread does all the work in every build
    Setting("protected-mode", "yes", (3, 2)),
)


@dataclass(frozen=True)
class Baseline:
    """What one binary is started with: the settings given and those its version lacks."""

    given: tuple[tuple[str, str], ...]
    left_out: tuple[str, ...]

    def args(self) -> list[str]:
        return [word for name, value in self.given for word in (f"--{name}", value)]

    def record(self) -> dict[str, object]:
        """For meta.json: each setting given with its value, and the names left out."""
        return {"given": dict(self.given), "left_out": list(self.left_out)}


def baseline_for(identity: Identity | None) -> Baseline:
    """The baseline settings `identity`'s version knows; all of them when the version is unknown."""
    if identity is None:
        return Baseline(tuple((s.name, s.value) for s in BASELINE), ())
    release = VALKEY_KNOWS_REDIS if identity.product == "valkey" else identity.release()[:2]
    given = tuple((s.name, s.value) for s in BASELINE if release >= s.since)
    left_out = tuple(s.name for s in BASELINE if release < s.since)
    return Baseline(given, left_out)
