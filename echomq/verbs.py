"""Each verb's KEYS and ARGV, spelled once.

The header of every `lua/<verb>-<numkeys>.lua` is the contract; this module
is its one Python copy. `Queue`, the load engine, the Locust client, backlog
fills and the bench files build their script calls here and nowhere else, so
changing a script's signature is one edit in this file (and a test holds the
key counts against the script names).

A `ScriptCall` is plain data: it checks nothing. `Queue` checks arguments
before it builds a call; a load generator that wants the server's own
refusals builds calls with bad arguments on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .keys import QueueKeys

__all__ = ["ScriptCall", "Fence", "enqueue", "claim", "complete", "retry", "promote", "reap", "fence", "VERBS"]


@dataclass(frozen=True)
class ScriptCall:
    """One script call: the verb, its KEYS and its ARGV, in the script's order."""

    verb: str
    keys: tuple[str, ...]
    args: tuple[Any, ...]

    def evalsha(self, sha: str | bytes) -> tuple[Any, ...]:
        """The whole EVALSHA command, ready for `execute_command` or a RESP writer."""
        return ("EVALSHA", sha, len(self.keys), *self.keys, *self.args)


def enqueue(keys: QueueKeys, job_id: str, payload: bytes | str) -> ScriptCall:
    return ScriptCall("enqueue", (keys.pending, keys.job(job_id)), (job_id, payload))


def claim(keys: QueueKeys, lease_ms: int) -> ScriptCall:
    # The row key is built inside the script from the prefix: the id is
    # unknown until ZPOPMIN hands it out. A popped job whose row is damaged
    # goes to the dead set.
    return ScriptCall("claim", (keys.pending, keys.active, keys.dead), (keys.job_prefix, lease_ms))


def complete(keys: QueueKeys, job_id: str, token: int) -> ScriptCall:
    return ScriptCall("complete", (keys.active, keys.job(job_id)), (job_id, token))


def retry(keys: QueueKeys, job_id: str, token: int, error: bytes | str, delay_ms: int,
          max_attempts: int) -> ScriptCall:
    return ScriptCall(
        "retry",
        (keys.active, keys.schedule, keys.dead, keys.job(job_id)),
        (job_id, token, error, delay_ms, max_attempts),
    )


@dataclass(frozen=True)
class Fence:
    """What a complete or retry call is fenced by, read back from its ARGV."""

    job_id: str
    token: int
    error: bytes | None = None         # retry only
    max_attempts: int | None = None    # retry only
    delay_ms: int | None = None        # retry only


def fence(call: ScriptCall) -> Fence:
    """The job, token (and for a retry its error, max_attempts and delay) a complete or retry call carries."""
    if call.verb == "complete":
        job_id, token = call.args
        return Fence(str(job_id), int(token))
    if call.verb == "retry":
        job_id, token, error, delay_ms, max_attempts = call.args
        text = error.encode("utf-8") if isinstance(error, str) else bytes(error)
        return Fence(str(job_id), int(token), text, int(max_attempts), int(delay_ms))
    raise ValueError(f"only complete and retry calls are fenced by a token, not {call.verb}")


def promote(keys: QueueKeys, limit: int) -> ScriptCall:
    return ScriptCall("promote", (keys.schedule, keys.pending, keys.dead), (keys.job_prefix, limit))


def reap(keys: QueueKeys, limit: int, max_attempts: int) -> ScriptCall:
    return ScriptCall("reap", (keys.active, keys.pending, keys.dead), (keys.job_prefix, limit, max_attempts))


# verb -> builder, for code that walks every verb (tests, the gate's cases).
VERBS = {
    "enqueue": enqueue,
    "claim": claim,
    "complete": complete,
    "retry": retry,
    "promote": promote,
    "reap": reap,
}
