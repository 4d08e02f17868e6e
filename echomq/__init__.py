"""echomq: a job queue whose state machine is a set of Lua scripts, and the
suite that measures it on Redis and Valkey.

The public surface is `__all__`, what a queue user needs: the `Queue` and its
`Job`s, the `Worker` with its settings, stats and health, the id helpers
(`mint`, `parse_id`), the errors a caller of a Queue or a Worker catches,
and the `EvictionWarning` a Queue accepted on an `allkeys-*` server warns
with. The whole error tree, drawn once, is in `echomq.errors`, which is
public too: from there come the kinds this package does not export, the
finer `ServerUnavailableError`s (`ServerBusyError`, `SlotMigratingError`,
and `RepliesLostError`, which only a raw pipeline raises) and the
`MalformedReplyError` the Worker counts itself.

Every other module of the package is the client's own and may change. The
plumbing the instrument measures the client with (raw verb calls,
pipelines, the script loader, the key grammar) is reached through one
private door, `echomq._instrument`, never from here.
"""

from __future__ import annotations

from .errors import (
    EchoMQError,
    EvictionPolicyError,
    InvalidArgumentError,
    KeyspaceDamageError,
    OutcomeUnknownError,
    OutOfMemoryError,
    ServerReplyError,
    ServerUnavailableError,
    StaleTokenError,
    WrongKindError,
)
from .ids import mint, parse_id
from .queue import Job, Queue
from .wire import EvictionWarning
from .worker import Worker, WorkerHealth, WorkerSettings, WorkerStats

__all__ = [
    "Queue",
    "Job",
    "Worker",
    "WorkerSettings",
    "WorkerStats",
    "WorkerHealth",
    "mint",
    "parse_id",
    "EchoMQError",
    "StaleTokenError",
    "WrongKindError",
    "InvalidArgumentError",
    "ServerUnavailableError",
    "OutcomeUnknownError",
    "OutOfMemoryError",
    "KeyspaceDamageError",
    "EvictionPolicyError",
    "ServerReplyError",
    "EvictionWarning",
]
__version__ = "0.1.0"
