"""The soak's nemesis schedule: which fault strikes when, a pure function of
the seed and the soak's length, so that a soak is replayed by its seed.

    schedule(seed=7, duration_s=600)  ->  (Fault("partition", at_s=2.0, hold_s=2.5, gap_s=3.7), ...)

Faults alternate between the two families, process and network (the first
family is the seed's choice), and the kind within a family is drawn at
random, so every soak long enough for two faults mixes both. Each fault is
planned to last `hold_s` and is followed by a recovery gap of GAP_MIN_S to
GAP_MAX_S with no fault in it; the last one's gap ends within the soak.
The first fault waits LEAD_IN_S for the load to settle, which also gives
it a pre-fault rate to recover to.

This module imports nothing of the runner: the schedule can be printed,
tested and replayed without a server.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

__all__ = ["Fault", "PROCESS", "NETWORK", "KINDS", "HOLD_S", "LEAD_IN_S", "GAP_MIN_S", "GAP_MAX_S",
           "MIN_SOAK_S", "MAX_SOAK_S", "schedule", "counts", "family"]

# Each kind and the time planned for it: how long a fault with a length
# lasts, or roughly how long an instant one takes to inject.
PROCESS: dict[str, float] = {
    "kill": 0.5,           # a consumer SIGKILLed mid-lease, and replaced (scenario crash)
    "zombie": 2.0,         # a consumer SIGSTOPped past its lease, resumed (scenario zombie)
    "pause": 2.0,          # the server SIGSTOPped (scenario pause)
    "restart": 0.5,        # the server SIGKILLed, restarted from its AOF (scenario restart-aof)
    "script-flush": 0.5,   # SCRIPT FLUSH twice (scenario script-flush)
    "oom": 3.0,            # maxmemory just above use, noeviction, until enqueues are refused (scenario oom)
}
NETWORK: dict[str, float] = {
    "latency": 2.0,        # latency, jitter and a bandwidth cap (scenario net-latency)
    "bandwidth": 2.0,      # a tight bandwidth cap alone
    "reset": 1.0,          # rounds of swallowed replies and resets (scenario net-reset)
    "partition": 2.5,      # a blackhole longer than the lease, then half-open (scenario net-partition)
    "half-open": 0.1,      # every connection half-open at once
}
HOLD_S: dict[str, float] = {**PROCESS, **NETWORK}
KINDS: tuple[str, ...] = tuple(HOLD_S)

LEAD_IN_S = 2.0
GAP_MIN_S = 3.0
GAP_MAX_S = 5.0
# The shortest soak fits two faults (one of each family) with their gaps whatever the seed draws.
MIN_SOAK_S = 20.0
MAX_SOAK_S = 24 * 3600.0


@dataclass(frozen=True)
class Fault:
    """One planned fault: its kind, when it starts (seconds after the load
    starts), how long it is planned to last, and the quiet gap after it."""

    kind: str
    at_s: float
    hold_s: float
    gap_s: float

    @property
    def family(self) -> str:
        return family(self.kind)

    @property
    def ends_s(self) -> float:
        """When its recovery gap is over."""
        return self.at_s + self.hold_s + self.gap_s


def family(kind: str) -> str:
    if kind in PROCESS:
        return "process"
    if kind in NETWORK:
        return "network"
    raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")


def schedule(seed: int, duration_s: float) -> tuple[Fault, ...]:
    """The faults of a soak of `duration_s` seconds with this seed."""
    if seed < 0:
        raise ValueError(f"seed must be 0 or more, got {seed}")
    if not MIN_SOAK_S <= duration_s <= MAX_SOAK_S:
        raise ValueError(f"a soak lasts from {MIN_SOAK_S:g} s to {MAX_SOAK_S:g} s, got {duration_s:g} s")
    rng = random.Random(f"nemesis:{seed}")  # a string seed: the same schedule on every Python and platform
    families = [sorted(PROCESS), sorted(NETWORK)]
    turn = rng.randrange(2)
    out: list[Fault] = []
    at = LEAD_IN_S
    while True:
        kind = rng.choice(families[turn])
        fault = Fault(kind, round(at, 3), HOLD_S[kind], round(rng.uniform(GAP_MIN_S, GAP_MAX_S), 3))
        if fault.ends_s > duration_s:
            return tuple(out)
        out.append(fault)
        at = fault.ends_s
        turn = 1 - turn


def counts(faults: tuple[Fault, ...] | list[Fault]) -> dict[str, int]:
    """Faults by kind, in the order of KINDS; kinds not drawn are left out."""
    found = Counter(f.kind for f in faults)
    return {k: found[k] for k in KINDS if found[k]}
