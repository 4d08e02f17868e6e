"""The instrument's door into the client: the plumbing that echomq_bench, the
Locust scenarios, the bench files and the measurement scripts borrow, and
that a queue user never needs. The instrument imports these names from here
and nowhere else inside the client (tests/unit/test_client_surface.py holds
it to that); the client's modules keep their own names and may change.

- the contract's key grammar (`QueueKeys`, `check_queue_name`), its id
  format (`ids`, through that module's own `__all__`) and its argument
  ranges (`INT31` for every ms and count argument, `MAX_LIMIT` for a reap,
  promote or browse limit);
- the raw calls: `verbs` builds a `ScriptCall` per verb (the one copy of
  each script's KEYS and ARGV) and `pipeline` sends many in one round trip;
  `ConsumeStep` builds a consumer's claim and settle calls and reads their
  replies, as the Worker does;
- the scripts themselves: `discover` reads `lua_dir()`, and `Scripts` loads
  them on a `Client` (a server or a cluster); `send_reloading` is the one
  place a call answered NOSCRIPT is sent again, over any transport (the
  Locust wire's held connections use it); `wire_errors` turns redis-py's
  failures and error replies into the client's error tree.
"""

from __future__ import annotations

from . import ids, pipeline, verbs
from .args import INT31, MAX_LIMIT
from .consume import ConsumeStep
from .keys import QueueKeys, check_queue_name
from .scripts import Client, Scripts, discover, lua_dir, send_reloading
from .verbs import ScriptCall
from .wire import wire_errors

__all__ = [
    "QueueKeys",
    "check_queue_name",
    "ids",
    "INT31",
    "MAX_LIMIT",
    "verbs",
    "ScriptCall",
    "pipeline",
    "ConsumeStep",
    "discover",
    "lua_dir",
    "Scripts",
    "Client",
    "send_reloading",
    "wire_errors",
]
