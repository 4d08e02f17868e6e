"""Where a client points, what its server's error replies and failures
become in the tree, and the eviction warning every Queue gives at start."""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import redis

from .errors import EchoMQError, OutOfMemoryError, ServerUnavailableError, from_reply
from .scripts import Client

__all__ = ["wire_errors", "reply_error", "describe", "EvictionWarning", "eviction_policy", "warn_if_evicting"]


@contextmanager
def wire_errors(client: Client) -> Iterator[None]:
    """Turn the server's error replies and connection failures into the tree."""
    try:
        yield
    except redis.exceptions.OutOfMemoryError as exc:
        # Scripts check maxmemory only before their first write, so a refused
        # call wrote nothing: the OOM reply is all-or-nothing like any other.
        raise OutOfMemoryError(f"OOM server {describe(client)} is out of memory: {exc}") from None
    except redis.exceptions.ResponseError as exc:
        # Every error reply lands in the tree: an unknown one as ServerReplyError.
        raise reply_error(exc) from None
    except redis.exceptions.ClusterError as exc:
        # A cluster client that ran out of redirects and TRYAGAIN waits: nothing ran.
        raise ServerUnavailableError(f"cluster {describe(client)} unavailable: {exc}") from exc
    except redis.exceptions.AuthenticationError as exc:
        # Without a password redis-py's HELLO gets a reply about HELLO; say what is wrong.
        # A cluster client has no pool of its own to ask, so it gets the answer that covers both.
        pool = getattr(client, "connection_pool", None)
        given = pool.connection_kwargs.get("password") if pool is not None else True
        why = "it needs a password and none was given" if not given else "it refused the user or password"
        raise ServerUnavailableError(f"server {describe(client)} unavailable: {why} ({exc})") from exc
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise ServerUnavailableError(f"server {describe(client)} unavailable: {exc}") from exc


def reply_error(exc: redis.exceptions.ResponseError) -> EchoMQError:
    """An error reply as the tree's exception. redis-py strips the code of a
    reply it has a class for (TRYAGAIN, MOVED, ...) and keeps it in
    status_code; the code is put back, so `from_reply` sees the whole reply."""
    code = getattr(exc, "status_code", None)
    if code is None and isinstance(exc, redis.exceptions.TryAgainError):  # made by hand, or an older parser
        code = "TRYAGAIN"
    text = str(exc)
    return from_reply(f"{code} {text}" if code and not text.startswith(code) else text)


class EvictionWarning(UserWarning):
    """The server may evict keys under memory pressure: a job row can vanish."""


def eviction_policy(client: Any) -> str | None:
    """The server's maxmemory-policy, or None when it cannot be read (an ACL
    without CONFIG, a managed server): on a cluster, the first node's that is
    not noeviction."""
    try:
        got = client.config_get("maxmemory-policy")
    except redis.exceptions.RedisError:
        return None
    values = got.values() if isinstance(got, dict) else ()
    # A RedisCluster answers per node ({node: {name: value}}) or merged, by version.
    found = [v for v in values if not isinstance(v, dict)] + [
        x for v in values if isinstance(v, dict) for x in v.values()]
    policies = [x.decode() if isinstance(x, bytes) else str(x) for x in found]
    return next((p for p in policies if p != "noeviction"), policies[0] if policies else None)


def warn_if_evicting(client: Any) -> None:
    """BullMQ's start-up warning, here: under any policy but noeviction the
    server may drop a job row to make room, and the job is then damaged (it
    goes to the dead set when a script meets it: docs/contract.md)."""
    policy = eviction_policy(client)
    if policy is not None and policy != "noeviction":
        warnings.warn(f"server {describe(client)} has maxmemory-policy {policy}: it may evict job rows; "
                      "set maxmemory-policy noeviction so that a full server refuses enqueues instead",
                      EvictionWarning, stacklevel=3)


def describe(client: Any) -> str:
    """Where a client points: a redis.Redis, or a RedisCluster (no pool of its own)."""
    pool = getattr(client, "connection_pool", None)
    if pool is None:  # a RedisCluster: one pool per node, none of its own
        node = client.get_default_node()
        return f"cluster via {node.host}:{node.port}" if node is not None else "cluster"
    kw = pool.connection_kwargs
    if "path" in kw:
        return str(kw["path"])
    return f"{kw.get('host', '?')}:{kw.get('port', '?')}"
