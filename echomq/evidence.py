"""What the judges of a lost reply read about the server: which server holds
the queue (its identity and clock, `echomq.outcome.Identity` and
`ServerClock`), and the row reads they make under a deadline.

The `queue` each function takes is an `echomq.Queue`: its client, keys,
`judge_timeout_s`, and the `identity`, `clock`, `identity_node` and
`judge_client` these functions keep on it.
"""

from __future__ import annotations

import time
from typing import Any

import redis

from .errors import RepliesLostError, ServerUnavailableError
from .outcome import Identity, ServerClock, send_all_once

__all__ = ["owner", "current_identity", "follow_owner", "judge_read", "JUDGE_BACKOFF_S"]

JUDGE_BACKOFF_S = (0.05, 0.1, 0.2, 0.5)  # waits between a judge's reads that found no server


def owner(queue: Any) -> Any:
    """On a cluster, the node the client's slot map gives the queue's keys; None on a plain client."""
    client: Any = queue.client
    if isinstance(client, redis.RedisCluster):
        return client.get_node_from_key(queue.keys.pending)  # type: ignore[no-untyped-call]
    return None


def _identity_at(queue: Any, node: Any,
                 deadline: float | None = None) -> tuple[tuple[Identity | None, ServerClock | None], bool]:
    """The identity and clock INFO gives at `node` (None: the client's own
    server), and whether the server answered: a refusal (an ACL without INFO) is an
    answer, a connection failure is not. With a deadline (a judge's), INFO
    is asked until then, each try sent once; without, with the client's retries."""
    client: Any = queue.client
    try:
        if deadline is not None:
            info = judge_read(queue, ("INFO",), node, deadline)
        else:
            info = client.info(target_nodes=node) if node is not None else client.info()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ServerUnavailableError):
        return (None, None), False
    except redis.exceptions.RedisError:
        return (None, None), True
    if not isinstance(info, dict):
        return (None, None), True
    return (Identity.of(info), ServerClock.of(info, time.monotonic())), True


def judge_read(queue: Any, command: tuple[Any, ...], node: Any, deadline: float) -> Any:
    """An idempotent read the judges make on the server that holds the queue
    (on a cluster, at `node`): each try sent once and answered by `deadline`,
    tried again after a failure to reach the server while time is left. The
    reply; an error reply raised as redis-py's; past the deadline, the last
    failure (a redis-py ConnectionError or TimeoutError, or RepliesLostError)."""
    target = _judge_client(queue, node)
    waits = iter(JUDGE_BACKOFF_S)
    while True:
        try:
            reply = send_all_once(target, [command], deadline=deadline)[0]
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, RepliesLostError):
            wait = next(waits, JUDGE_BACKOFF_S[-1])
            if time.monotonic() + wait >= deadline:
                raise
            time.sleep(wait)
            continue
        if isinstance(reply, Exception):
            raise reply
        return reply


def _judge_client(queue: Any, node: Any) -> redis.Redis:
    """Where the judges read: a client of the queue's own connection settings
    whose connect and reads give up within judge_timeout_ms, so that a server
    that accepts connections and answers nothing cannot hold a judge past its
    deadline, whatever socket_timeout the caller's client has. On a cluster,
    the node's own client (its timeouts are the cluster client's)."""
    client: Any = queue.client
    if node is not None:
        return client.get_redis_connection(node)  # type: ignore[no-any-return]
    if queue.judge_client is None:
        pool = client.connection_pool
        limit = queue.judge_timeout_s
        kwargs = dict(pool.connection_kwargs)
        for name in ("socket_timeout", "socket_connect_timeout"):
            kwargs[name] = min(kwargs.get(name) or limit, limit)
        queue.judge_client = redis.Redis(connection_pool=redis.ConnectionPool(
            connection_class=pool.connection_class, max_connections=8, **kwargs))
    judge: redis.Redis = queue.judge_client
    return judge


def current_identity(queue: Any, node: Any = None, deadline: float | None = None) -> Identity | None:
    """The server's identity now (on a cluster, at `node`, by default where
    the slot map puts the queue); when it changed, later leases carry the new one."""
    if node is None:
        node = owner(queue)
    (now, clock), answered = _identity_at(queue, node, deadline)
    if now is not None:
        queue.identity = now
        queue.clock = clock
    if answered and node is not None:
        queue.identity_node = node.name
    return now


def follow_owner(queue: Any) -> Any:
    """The node a claim goes to: on a cluster, the master the slot map gives
    the queue now, whose identity is read first when it is not the node the
    Queue's identity came from (the map moved the queue, as after a
    failover), so that the leases taken there name the master that granted
    them. None on a plain client."""
    node = owner(queue)
    if node is not None and node.name != queue.identity_node:
        current_identity(queue, node)
    return node
