"""The consume step: claim, then settle each job claimed, on one queue.

    step = ConsumeStep(keys, lease_ms, batch, max_attempts)
    step.claims                         one round's claim calls, built once
    step.settle(id, token)              the complete of a job that succeeded
    step.settle(id, token, error, ms)   the retry of one that failed
    step.outcome(verb, reply)           what a settle's reply says, one of OUTCOMES

No I/O: a caller sends the calls its own way and hands each reply back.
`echomq.Worker` sends them through `echomq.pipeline`, the load engine's
`Consumer` through its calls protocol, and its pipelined consumer encodes
`claim` and a `settle` once as byte templates and keeps several in flight.
What each caller adds around the step is in docs/design/consumer-loop.md.
"""

from __future__ import annotations

from typing import Any

import redis

from . import verbs
from .errors import EchoMQError, OutcomeUnknownError, StaleTokenError
from .keys import QueueKeys
from .verbs import ScriptCall

__all__ = ["ConsumeStep", "OUTCOMES"]

# completed: the complete landed. retried: scheduled for another attempt.
# dead: the retry moved it to the dead set. lost: the lease was lost (EMQSTALE,
# or a lost reply whose row shows the lease gone): another worker may hold the
# job; this attempt's result is discarded.
# unsettled: the complete or retry surely did not land (refused, or never
# sent); the lease will expire and reap will hand the job out again.
# unknown: its reply was lost and the server's state cannot tell whether it
# landed (OutcomeUnknownError); never counted as done: if it did not land,
# the lease expires and reap hands the job out again.
OUTCOMES = ("completed", "retried", "dead", "lost", "unsettled", "unknown")


class ConsumeStep:
    """The calls one consumer sends to one queue. The claims are built once,
    as every claim of a round is the same call; a settle is built per job."""

    __slots__ = ("keys", "lease_ms", "max_attempts", "claim", "claims")

    def __init__(self, keys: QueueKeys, lease_ms: int, batch: int = 1, max_attempts: int = 3) -> None:
        self.keys = keys
        self.lease_ms = lease_ms
        self.max_attempts = max_attempts
        self.claim = verbs.claim(keys, lease_ms)
        self.claims = (self.claim,) * batch

    def settle(self, job_id: str, token: int, error: bytes | None = None, delay_ms: int = 0) -> ScriptCall:
        """The complete of the job (no error), or its retry after `delay_ms`,
        which buries it at max_attempts; fenced by the claim's token."""
        if error is None:
            return verbs.complete(self.keys, job_id, token)
        return verbs.retry(self.keys, job_id, token, error, delay_ms, self.max_attempts)

    @staticmethod
    def outcome(verb: str, reply: Any) -> str:
        """A complete's or retry's outcome, one of OUTCOMES, from its reply: the
        value the script answered, or the error in its place (StaleTokenError:
        lost; OutcomeUnknownError: unknown; any other: unsettled)."""
        if isinstance(reply, StaleTokenError):
            return "lost"
        if isinstance(reply, OutcomeUnknownError):
            return "unknown"
        if isinstance(reply, (EchoMQError, redis.exceptions.RedisError)):
            return "unsettled"
        if verb == "complete":
            return "completed"
        return "dead" if reply == b"dead" or reply == "dead" else "retried"
