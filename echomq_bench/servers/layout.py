"""The shape of a local cluster: how many masters and replicas, and which
slots each master serves.

    NAME=redis-cluster [--masters N] [--replicas N] [--cluster-node-timeout MS] [ARGS...]

`split_cluster_args` takes the launcher's own options out of ARGS; SPEC
parsing uses it to reject a bad size early, the launcher to build the nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.crc import REDIS_CLUSTER_HASH_SLOTS

__all__ = ["ClusterLayout", "split_cluster_args", "slot_ranges", "DEFAULT_NODE_TIMEOUT_MS"]

# The launcher sets these on every node; a user value would break the wiring.
MANAGED_CLUSTER_OPTIONS = frozenset({"--cluster-enabled", "--cluster-config-file", "--cluster-port"})
# Long enough that a node busy with a large reap on a shared two-core
# machine is not declared failed; the failover scenario asks for less.
DEFAULT_NODE_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class ClusterLayout:
    masters: int = 3
    replicas: int = 0  # per master
    node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS

    @property
    def size(self) -> int:
        return self.masters * (1 + self.replicas)


_LAYOUT_OPTIONS: dict[str, tuple[str, int, int]] = {
    "--masters": ("masters", 1, 16),
    "--replicas": ("replicas", 0, 2),
    "--cluster-node-timeout": ("node_timeout_ms", 100, 600_000),
}


def split_cluster_args(args: Sequence[str]) -> tuple[ClusterLayout, tuple[str, ...]]:
    """Take the launcher's own options out of ARGS; the rest go to every node.

    Raises ValueError naming the bad option.
    """
    values: dict[str, int] = {}
    rest: list[str] = []
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        option = arg.lower()
        if option in MANAGED_CLUSTER_OPTIONS:
            raise ValueError(f"{arg} is set by the cluster launcher and cannot be given")
        if option in _LAYOUT_OPTIONS:
            field_name, lo, hi = _LAYOUT_OPTIONS[option]
            if i + 1 >= len(items):
                raise ValueError(f"{arg} needs a value")
            raw = items[i + 1]
            if not raw.isdigit() or not lo <= int(raw) <= hi:
                raise ValueError(f"{arg} must be an integer from {lo} to {hi}, got {raw!r}")
            values[field_name] = int(raw)
            i += 2
            continue
        rest.append(arg)
        i += 1
    return ClusterLayout(**values), tuple(rest)


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """16384 slots cut into `masters` contiguous ranges, as redis-cli does."""
    per = REDIS_CLUSTER_HASH_SLOTS / masters
    bounds = [round(per * i) for i in range(masters + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(masters)]
