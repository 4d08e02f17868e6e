"""echomq: a job queue whose state machine is a set of Lua scripts, and the
suite that measures it on Redis and Valkey.

The public surface is exactly `__all__`; every other name of every module is
the client's own and may change. Beside the Queue and its Worker:

- the contract's key grammar (`QueueKeys`, `check_queue_name`), its id
  format (`ids`, through that module's own `__all__`) and its
  argument ranges (`INT31` for every ms and count argument, `MAX_LIMIT` for
  a reap, promote or browse limit);
- the raw calls: `verbs` builds a `ScriptCall` per verb (the one copy of each
  script's KEYS and ARGV) and `pipeline` sends many in one round trip;
  `ConsumeStep` builds a consumer's claim and settle calls and reads their
  replies, as the Worker does;
- the scripts themselves: `discover` reads `lua_dir()` into `ScriptSource`s,
  and `Scripts` loads them on a `Client` (a server or a cluster);
  `send_reloading` is the one place a call answered NOSCRIPT is sent again,
  over any transport (the Locust wire's held connections use it);
- every error the client raises, under `EchoMQError`, and `wire_errors`,
  which turns redis-py's failures and error replies into that tree.
"""

from __future__ import annotations

from . import ids, pipeline, verbs
from .args import INT31, MAX_LIMIT
from .consume import ConsumeStep
from .errors import (
    EchoMQError,
    EvictionPolicyError,
    InvalidArgumentError,
    KeyspaceDamageError,
    MalformedReplyError,
    OutcomeUnknownError,
    OutOfMemoryError,
    RepliesLostError,
    ServerBusyError,
    ServerReplyError,
    ServerUnavailableError,
    SlotMigratingError,
    StaleTokenError,
    WrongKindError,
)
from .ids import mint, parse_id
from .keys import QueueKeys, check_queue_name
from .queue import Job, Queue
from .scripts import Client, Scripts, ScriptSource, discover, lua_dir, send_reloading
from .verbs import ScriptCall
from .wire import EvictionWarning, wire_errors
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
    "QueueKeys",
    "check_queue_name",
    "INT31",
    "MAX_LIMIT",
    "verbs",
    "ids",
    "pipeline",
    "ScriptCall",
    "ConsumeStep",
    "Client",
    "Scripts",
    "ScriptSource",
    "discover",
    "lua_dir",
    "send_reloading",
    "wire_errors",
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
    "ServerBusyError",
    "ServerReplyError",
    "EvictionPolicyError",
    "EvictionWarning",
]
__version__ = "0.1.0"
