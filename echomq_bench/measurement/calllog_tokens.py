"""The three fencing checks of one job's call log, pure.

Every comparison of two operations is by real-time order: `a` happened
before `b` when a's outcome was known before b was invoked (a.t1 < b.t0),
on one clock. Then:

    token_fell      two claims handed out the same token, or a claim that
                    happened before another got the larger token
    stale_accepted  a complete or retry was accepted although, before it was
                    invoked, a claim had handed out a larger token or a
                    settle of the same or a larger token had been accepted
    lease_overlap   a claim handed the job out while an earlier lease on it
                    still ran, in the server's time

A lease ends early only when its holder's complete or retry is accepted;
otherwise only a reap ends it, at or after its deadline (claim's server time
+ lease_ms). With both claims' server times known the overlap is exact.
Without them (every call log recorded today) a claim's server time lies
between its invoke and its reply, so an overlap is certain when the later
claim's reply came less than lease_ms after the earlier claim was invoked,
and impossible when the later claim was invoked lease_ms or more after the
earlier one's reply, each less or more a slack for the server's clock (read
in whole ms) and its rate; in between the pair is counted undecided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

__all__ = ["Op", "Fencing", "fencing", "SERVER_TICK_S", "RATE_ERROR"]

# The scripts read the server's clock in whole milliseconds, so a deadline can
# fall up to 1 ms before claim time + lease; and the server's wall clock may
# be slewed against the client's monotonic one by up to 500 ppm (NTP's limit).
SERVER_TICK_S = 0.001
RATE_ERROR = 500e-6


class Op(NamedTuple):
    """One operation: its invocation and outcome, paired."""

    process: str
    f: str
    job: str | None
    token: int | None
    t0: float                 # invoked, monotonic s
    t1: float                 # outcome known; inf when the call log never says
    type: str                 # ok, fail or info
    fault: str | None         # the fault named on its lines, the invoke's first
    server_ms: int | None = None
    lease_ms: int | None = None
    clock: int = 0            # which clock t0 and t1 read (one per call-log file when clocks differ)


@dataclass(frozen=True)
class Fencing:
    token_fell: bool
    stale_accepted: bool
    lease_overlap: bool
    releases: int = 0         # consecutive pairs of claims compared for an overlap
    exact: int = 0            # decided by server times
    by_client: int = 0        # decided by the client's clock
    undecided: int = 0


Before = Callable[[Op, Op], bool]


def _before(one_clock: bool) -> Before:
    def before(a: Op, b: Op) -> bool:
        return (one_clock or a.clock == b.clock) and a.t1 < b.t0
    return before


def _token_fell(claims: Sequence[Op], before: Before) -> bool:
    for i, a in enumerate(claims):
        for b in claims[i + 1:]:
            assert a.token is not None and b.token is not None
            if a.token == b.token or (before(a, b) and a.token > b.token) or (before(b, a) and b.token > a.token):
                return True
    return False


def _stale(claims: Sequence[Op], settles: Sequence[Op], before: Before) -> bool:
    accepted = [s for s in settles if s.type == "ok" and s.token is not None]
    for s in accepted:
        assert s.token is not None
        if any(c.token is not None and c.token > s.token and before(c, s) for c in claims):
            return True
        if any(o is not s and o.token is not None and o.token >= s.token and before(o, s) for o in accepted):
            return True
    return False


def _ended(a: Op, settles: Sequence[Op]) -> tuple[str, Op | None]:
    """How lease `a` ended: `settled` by an accepted complete or retry,
    `unknown` when one of its settles has no known outcome, else `reaped`."""
    mine = [s for s in settles if s.token == a.token]
    for s in mine:
        if s.type == "ok":
            return "settled", s
    if any(s.type == "info" for s in mine):
        return "unknown", None
    return "reaped", None


def _deadline(a: Op, b: Op, one_clock: bool) -> str:
    """Did b's claim come before a's deadline (a's server time + lease_ms)?"""
    if a.lease_ms is None:
        return "undecided"
    if a.server_ms is not None and b.server_ms is not None:
        return "yes exact" if b.server_ms < a.server_ms + a.lease_ms else "no exact"
    if not (one_clock or a.clock == b.clock):
        return "undecided"
    # a's server time is no earlier than its invoke, b's no later than its reply;
    # the slack covers the server's clock, read in whole ms, and its rate.
    lease_s = a.lease_ms / 1000.0
    slack_s = SERVER_TICK_S + RATE_ERROR * lease_s
    if b.t1 - a.t0 < lease_s - slack_s:
        return "yes client"
    if b.t0 - a.t1 >= lease_s + slack_s:
        return "no client"
    return "undecided"


def _overlap(a: Op, b: Op, settles: Sequence[Op], before: Before, one_clock: bool) -> str:
    """`yes`, `no` or `undecided`, the first two with how they were decided (`exact`, `client`).

    Past a's deadline a lease is over whatever its holder did (a settle
    accepted later is stale, which the stale check counts). Before it, the
    lease ran unless its holder's settle had landed: a settle of unknown
    outcome leaves the pair undecided."""
    view = _deadline(a, b, one_clock)
    if view.startswith("no"):
        return view
    how, settle = _ended(a, settles)
    if how == "reaped":
        return view
    if how == "unknown" or settle is None:
        return "undecided"
    if before(settle, b):
        return "no client"
    return view if before(b, settle) else "undecided"


def fencing(claims: Sequence[Op], settles: Sequence[Op], one_clock: bool = True) -> Fencing:
    """The three checks over one job's accepted claims and its completes and retries."""
    known = sorted((c for c in claims if c.type == "ok" and c.token is not None), key=lambda c: c.token or 0)
    before = _before(one_clock)
    overlap = False
    tally = {"exact": 0, "client": 0, "undecided": 0}
    for a, b in zip(known, known[1:]):
        if a.token == b.token:
            continue  # the same token twice: token_fell says so
        verdict = _overlap(a, b, settles, before, one_clock)
        overlap = overlap or verdict.startswith("yes")
        tally[verdict.split()[-1]] += 1
    return Fencing(_token_fell(known, before), _stale(known, settles, before), overlap,
                   releases=sum(tally.values()), exact=tally["exact"], by_client=tally["client"],
                   undecided=tally["undecided"])
