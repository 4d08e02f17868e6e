"""echomq: a job queue whose state machine is a set of Lua scripts, and the
suite that measures it on Redis and Valkey."""

from __future__ import annotations

from .errors import (
    EchoMQError,
    InvalidArgumentError,
    KeyspaceDamageError,
    MalformedReplyError,
    OutcomeUnknownError,
    OutOfMemoryError,
    RepliesLostError,
    ServerReplyError,
    ServerUnavailableError,
    SlotMigratingError,
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
    "KeyspaceDamageError",
    "MalformedReplyError",
    "OutOfMemoryError",
    "RepliesLostError",
    "SlotMigratingError",
    "ServerReplyError",
    "EvictionWarning",
]
__version__ = "0.1.0"
