"""The choice of queue names that spreads queues over a cluster's masters.

A queue lives in one slot (its `{q}` hash tag), so on one master: to use N
masters, run at least N queues with names chosen by `spread_queues`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import count as counter
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from echomq._instrument import check_queue_name
from echomq_bench.servers.cluster import Cluster
from echomq_bench.servers.errors import ServerError

__all__ = ["Placement", "queue_slot", "is_cluster", "spread_queues", "master_clients", "format_placements"]


def queue_slot(name: str) -> int:
    """The slot of every key of queue `name`: its `{name}` hash tag."""
    return key_slot(check_queue_name(name).encode())


@dataclass(frozen=True)
class Placement:
    queue: str
    slot: int
    node: str  # host:port of the master serving the slot when chosen


def is_cluster(target: Any) -> bool:
    """A local or URL cluster (what `servers.start` gives for a cluster spec)."""
    return isinstance(target, Cluster)


def _address(client: redis.Redis) -> str:
    """A plain client's node, named as a cluster names its masters: host:port (or its socket's path)."""
    kw = client.connection_pool.connection_kwargs
    return str(kw["path"]) if "path" in kw else f"{kw.get('host', '?')}:{kw.get('port', '?')}"


def _owners(target: Any) -> tuple[list[str], Callable[[int], str]]:
    """The masters' addresses and a slot -> address function for a cluster,
    a cluster client, or a plain client (one node owns everything)."""
    if isinstance(target, Cluster):
        target = target.client()
    if isinstance(target, RedisCluster):
        cache = target.nodes_manager.slots_cache

        def owner(slot: int) -> str:
            nodes = cache.get(slot)
            if not nodes:
                raise ServerError(f"slot {slot} has no master: is the cluster healthy?")
            return str(nodes[0].name)

        order: list[str] = []
        for slot in range(REDIS_CLUSTER_HASH_SLOTS):
            name = owner(slot)
            if name not in order:
                order.append(name)
        return order, owner
    only = _address(target)
    return [only], lambda slot: only


def spread_queues(target: Any, count: int, prefix: str = "q") -> list[Placement]:
    """`count` queue names `<prefix><n>` whose slots land evenly on the masters.

    Queue i goes to master i mod M (masters in slot order), so any first k
    queues are as even as k allows. `target` is a cluster, a RedisCluster
    client, or a plain client (then every queue is on its one node).
    """
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 100_000:
        raise ValueError(f"queue count must be an integer from 1 to 100000, got {count!r}")
    check_queue_name(f"{prefix}{count}")
    masters, owner = _owners(target)
    wanted = [masters[i % len(masters)] for i in range(count)]
    pools: dict[str, list[Placement]] = {m: [] for m in masters}
    need = Counter(wanted)
    for n in counter():
        if all(len(pools[m]) >= need[m] for m in masters):
            break
        if n > 100 * count + 10_000:
            raise ServerError(f"no queue names for masters {masters} in {n} tries")
        name = f"{prefix}{n}"
        slot = queue_slot(name)
        node = owner(slot)
        if node in pools and len(pools[node]) < need[node]:
            pools[node].append(Placement(name, slot, node))
    taken = {m: iter(p) for m, p in pools.items()}
    return [next(taken[m]) for m in wanted]


def master_clients(target: Any) -> dict[str, redis.Redis]:
    """A plain client per master that serves slots, by address, for per-node
    INFO (echomq_bench.measurement.serverstats.sample). `target` is a cluster, a RedisCluster
    client, or a plain client (then: that one node)."""
    if isinstance(target, Cluster):
        return {m.name: m.client() for m in target.masters()}
    if isinstance(target, RedisCluster):
        order, _ = _owners(target)
        # redis-py leaves get_primaries unannotated; it answers ClusterNodes.
        nodes = {n.name: n for n in target.get_primaries()}  # type: ignore[no-untyped-call]
        return {name: target.get_redis_connection(nodes[name]) for name in order}
    return {_address(target): target}


def format_placements(placements: Sequence[Placement]) -> str:
    """The choice as a table, with the count per node under it."""
    width = max([5] + [len(p.queue) for p in placements])
    lines = [f"{'queue':<{width}}  {'slot':>5}  node"]
    lines += [f"{p.queue:<{width}}  {p.slot:>5}  {p.node}" for p in placements]
    per_node = Counter(p.node for p in placements)
    lines.append("per node: " + ", ".join(f"{node} {n}" for node, n in sorted(per_node.items())))
    return "\n".join(lines)
