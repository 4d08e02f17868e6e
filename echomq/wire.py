"""Where a client points, what its server's error replies and failures
become in the tree, and the eviction check every Queue makes at start."""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import redis

from .errors import (EchoMQError, EvictionPolicyError, InvalidArgumentError, MalformedReplyError, OutOfMemoryError,
                     ServerUnavailableError, from_reply)
from .scripts import Client

__all__ = ["wire_errors", "reply_error", "unmapped_error", "describe", "EvictionWarning", "eviction_policy",
           "check_eviction", "REPLIES", "REPLY_CLASSES"]

# Error replies redis-py raises as one of its own classes, and their codes:
# LOADING comes as BusyLoadingError, a ConnectionError, though it is a refusal.
REPLY_CLASSES: tuple[tuple[type[redis.exceptions.RedisError], str], ...] = (
    (redis.exceptions.TryAgainError, "TRYAGAIN"), (redis.exceptions.BusyLoadingError, "LOADING"))
REPLIES = (redis.exceptions.ResponseError, redis.exceptions.BusyLoadingError)


@contextmanager
def wire_errors(client: Client) -> Iterator[None]:
    """Turn the server's error replies and redis-py's failures into the tree:
    nothing redis-py raises leaves it raw."""
    try:
        yield
    except redis.exceptions.OutOfMemoryError as exc:
        # Scripts check maxmemory only before their first write, so a refused
        # call wrote nothing: the OOM reply is all-or-nothing like any other.
        raise OutOfMemoryError(f"OOM server {describe(client)} is out of memory: {exc}") from None
    except REPLIES as exc:
        # Every error reply lands in the tree: an unknown one as ServerReplyError,
        # LOADING (nothing ran, though redis-py raises it as a ConnectionError) as ServerBusyError.
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
    except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as exc:
        raise unmapped_error(client, exc) from exc


def unmapped_error(client: Client, exc: Exception) -> EchoMQError:
    """What redis-py raises that is neither an error reply nor a lost
    connection. The once-only senders (`echomq.outcome.send_all_once`) judge
    an unreadable reply as lost themselves; this is for the client's own
    command path (promote, reap, browse, loading scripts)."""
    where = describe(client)
    if isinstance(exc, redis.exceptions.InvalidResponse):
        # The call went out and its reply is not RESP; redis-py dropped the connection.
        return MalformedReplyError(f"server {where} sent a reply that cannot be parsed ({exc}); the call may have "
                                   "run, and the connection was dropped")
    if isinstance(exc, redis.exceptions.DataError):
        # redis-py refused to encode an argument before anything was sent.
        return InvalidArgumentError(f"an argument cannot be sent to {where}: {exc}; nothing was sent")
    if isinstance(exc, redis.exceptions.RedisClusterException):
        # The cluster client has no node for the call (a slot not covered, no node answers): nothing ran.
        return ServerUnavailableError(f"cluster {where} unavailable: {type(exc).__name__}: {exc}")
    return EchoMQError(f"server {where}: {type(exc).__name__}: {exc}")


def reply_error(exc: redis.exceptions.RedisError) -> EchoMQError:
    """An error reply as the tree's exception. redis-py strips the code of a
    reply it has a class for (TRYAGAIN, LOADING, MOVED, ...) and keeps it in
    status_code; the code is put back, so `from_reply` sees the whole reply."""
    code = getattr(exc, "status_code", None)
    if code is None:  # made by hand, or an older parser
        code = next((name for cls, name in REPLY_CLASSES if isinstance(exc, cls)), None)
    text = str(exc)
    return from_reply(f"{code} {text}" if code and not text.startswith(code) else text)


class EvictionWarning(UserWarning):
    """The Queue runs on a server whose allkeys-* policy it was told to accept:
    under memory pressure a job row or a whole set can vanish."""


def eviction_policy(client: Any) -> str | None:
    """The server's maxmemory-policy, or None when it cannot be read (an ACL
    without CONFIG, a managed server): on a cluster, the first node's that is
    not noeviction, an allkeys-* one first."""
    try:
        got = client.config_get("maxmemory-policy")
    except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException):
        return None
    values = got.values() if isinstance(got, dict) else ()
    # A RedisCluster answers per node ({node: {name: value}}) or merged, by version.
    found = [v for v in values if not isinstance(v, dict)] + [
        x for v in values if isinstance(v, dict) for x in v.values()]
    policies = [x.decode() if isinstance(x, bytes) else str(x) for x in found]
    evicting = sorted((p for p in policies if p != "noeviction"), key=lambda p: not p.startswith("allkeys-"))
    return evicting[0] if evicting else (policies[0] if policies else None)


def check_eviction(client: Any, accept: str | None) -> None:
    """Refuse a server that may evict the queue's own keys.

    Under an allkeys-* maxmemory-policy a full server evicts any key: a
    queue's sets as well as its job rows. A job whose id goes with its set
    is left in no set, and no verb ever meets it again; a set evicted whole
    takes every job in it. So EvictionPolicyError is raised, saying which
    policy, unless `accept` names that very policy: the caller has chosen to
    run there, and is warned (EvictionWarning) instead.

    A volatile-* policy passes (see below), and so does a policy that cannot
    be read (an ACL without CONFIG, a managed server)."""
    policy = eviction_policy(client)
    # volatile-* evicts only keys that carry a TTL, and no script sets one: with
    # nothing to evict, a full server refuses writes (OOM) as under noeviction.
    if policy is None or not policy.startswith("allkeys-"):
        return
    if accept == policy:
        warnings.warn(f"server {describe(client)} has maxmemory-policy {policy}, accepted: it may evict the queue's "
                      "sets and job rows, and an evicted job is lost", EvictionWarning, stacklevel=3)
        return
    raise EvictionPolicyError(
        f"server {describe(client)} has maxmemory-policy {policy}: when memory runs short it evicts any key, the "
        "queue's pending, active, schedule and dead sets and its job rows included, and a job evicted from its "
        "set is left in no set and never runs. Set maxmemory-policy noeviction (a full server then refuses "
        f"enqueues), or pass accept_eviction={policy!r} to run on it anyway")


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
