"""The Locust wire over a cluster: the same held connections, one per master
a greenlet talks to, each command routed by its key's slot.

redis-py's cluster client keeps the slot map (`ClusterRouter`); the calls
go over `echomq_bench.locust.wire.Wire`s held per master (`ClusterWire`),
not through the client's pools.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import redis
from redis.cluster import ClusterNode, NodesManager, RedisCluster
from redis.connection import AbstractConnection

from echomq import ServerUnavailableError
from echomq._instrument import Scripts
from echomq_bench.locust.wire import Command, Wire

__all__ = ["ClusterRouter", "ClusterWire", "is_cluster_url"]


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in ("redis+cluster", "rediss+cluster")


class _NodeFactory:
    """Connections to one node, with the settings redis-py's cluster client uses for it."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.connection_class: type[AbstractConnection] = pool.connection_class
        self.kwargs = dict(pool.connection_kwargs)

    def connect(self) -> AbstractConnection:
        return self.connection_class(**self.kwargs)


class _SlotMap(Protocol):
    """What the router reads from redis-py's cluster client, typed (redis-py
    leaves `keyslot` and `get_node` unannotated)."""

    nodes_manager: NodesManager

    def keyslot(self, key: str) -> int: ...

    def get_node(self, host: str | None = None, port: int | None = None,
                 node_name: str | None = None) -> ClusterNode | None: ...

    def get_redis_connection(self, node: ClusterNode) -> redis.Redis: ...


class ClusterRouter:
    """The process's view of a cluster, kept by redis-py's cluster client
    (`RedisCluster`): which master owns a key's slot, and each master's
    connection settings. Calls themselves go over `ClusterWire`'s held
    connections, not through the client's pools: a greenlet killed between
    send and reply must drop its connection, which a pooled connection
    (released on BaseException without a disconnect) would not."""

    def __init__(self, url: str) -> None:
        from echomq_bench.servers import UrlCluster, parse_server_spec

        self.client: RedisCluster = UrlCluster(parse_server_spec(url)).client()
        self._slots: dict[str, str] = {}  # hash tag -> master address
        self.made = 0

    def node_for(self, key: Any) -> str:
        key = key.decode() if isinstance(key, bytes) else str(key)
        start = key.find("{")
        end = key.find("}", start + 1) if start >= 0 else -1
        tag = key[start + 1:end] if end > start + 1 else key
        node = self._slots.get(tag)
        if node is None:
            cluster: _SlotMap = self.client
            node = cluster.nodes_manager.get_node_from_slot(cluster.keyslot(key)).name
            self._slots[tag] = node
        return node

    def factory(self, node: str) -> _NodeFactory:
        cluster: _SlotMap = self.client
        target = cluster.get_node(node_name=node)
        if target is None or target.redis_connection is None:
            self.refresh()
            target = cluster.get_node(node_name=node)
        if target is None:
            raise ServerUnavailableError(f"cluster node {node} is not in the slot map")
        if target.redis_connection is None:
            target.redis_connection = cluster.get_redis_connection(target)
        self.made += 1
        return _NodeFactory(target.redis_connection.connection_pool)

    def refresh(self) -> None:
        """Re-read the slot map (after a MOVED: a failover or a resharding)."""
        self.client.nodes_manager.initialize()
        self._slots.clear()

    def scripts(self) -> Scripts:
        """The verbs' scripts, loaded on every primary (redis-py sends SCRIPT LOAD to each)."""
        return Scripts(self.client)

    def wire(self, scripts: Scripts) -> "ClusterWire":
        return ClusterWire(self, scripts)


def _first_key(cmd: Command) -> Any:
    # EVALSHA sha numkeys key...; every other command the scenarios send has its key first
    return cmd[3] if str(cmd[0]).upper() == "EVALSHA" else cmd[1]


class ClusterWire:
    """`Wire`'s interface over a cluster: one held `Wire` per master this
    greenlet has talked to; each command goes to the master owning its
    key's slot. A MOVED reply (the command was not applied) re-reads the
    slot map and sends once more."""

    MOVES = (redis.exceptions.MovedError, redis.exceptions.AskError)

    def __init__(self, router: ClusterRouter, scripts: Scripts) -> None:
        self.router = router
        self.scripts = scripts
        self.wires: dict[str, Wire] = {}

    def _wire(self, node: str) -> Wire:
        wire = self.wires.get(node)
        if wire is None:
            wire = self.wires[node] = Wire(self.router.factory(node), self.scripts)
        return wire

    def call(self, cmd: Command) -> Any:
        for _ in range(3):
            try:
                return self._wire(self.router.node_for(_first_key(cmd))).call(cmd)
            except self.MOVES:
                self.router.refresh()
        raise ServerUnavailableError(f"cluster: {cmd[0]} still MOVED after re-reading the slot map")

    def pipeline(self, cmds: Sequence[Command]) -> list[Any]:
        """Each master's share as one pipeline (the scenarios send one queue's
        commands together, so normally one); replies in the order sent."""
        out: list[Any] = [None] * len(cmds)
        todo = list(range(len(cmds)))
        for _ in range(3):
            groups: dict[str, list[int]] = {}
            for i in todo:
                groups.setdefault(self.router.node_for(_first_key(cmds[i])), []).append(i)
            for node, idx in groups.items():
                for i, reply in zip(idx, self._wire(node).pipeline([cmds[i] for i in idx])):
                    out[i] = reply
            todo = [i for i in todo if isinstance(out[i], self.MOVES)]
            if not todo:
                return out
            self.router.refresh()
        return out

    def command(self, *args: Any) -> Any:
        return self.call(args)

    def load_scripts(self) -> None:
        for wire in self.wires.values():
            wire.load_scripts()

    def reconnect(self) -> None:
        for wire in self.wires.values():
            wire.reconnect()

    def close(self) -> None:
        for wire in self.wires.values():
            wire.close()
