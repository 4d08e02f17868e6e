"""Moving one hash slot between two masters, step by step, as resharding does.

`redis-cli --cluster reshard` and `valkey-cli` move a slot in three steps:
the target is marked IMPORTING and the source MIGRATING, the keys go over
in batches by MIGRATE, and the slot is assigned to the target on every
master. Between the steps some of a queue's keys are on one node and some
on the other: the state the scripts must refuse to act on rather than
half-move a job. `SlotMove` exposes the steps apart, so a test can stop
between them and a load can run through them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from echomq_bench.servers.cluster import ClusterNode

__all__ = ["SlotMove", "MIGRATE_TIMEOUT_MS"]

MIGRATE_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class SlotMove:
    slot: int
    source: ClusterNode
    target: ClusterNode

    def begin(self) -> None:
        """IMPORTING on the target, then MIGRATING on the source (the order
        the cluster tools use: the target must accept ASKING before the source
        sends clients there)."""
        source_id = self._id(self.source)
        target_id = self._id(self.target)
        with self.target.client() as c:
            c.execute_command("CLUSTER", "SETSLOT", self.slot, "IMPORTING", source_id)
        with self.source.client() as c:
            c.execute_command("CLUSTER", "SETSLOT", self.slot, "MIGRATING", target_id)

    def keys_left(self, count: int) -> list[bytes]:
        """Up to `count` keys of the slot still on the source."""
        with self.source.client() as c:
            return list(c.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, count))

    def move(self, keys: Sequence[bytes | str]) -> None:
        """MIGRATE these keys of the slot from the source to the target, in one call."""
        if not keys:
            return
        with self.source.client() as c:
            c.execute_command("MIGRATE", self.target.host, self.target.port, "", 0, MIGRATE_TIMEOUT_MS,
                              "KEYS", *keys)

    def move_batch(self, count: int) -> int:
        """Move up to `count` of the keys left; how many moved (0: none left)."""
        keys = self.keys_left(count)
        self.move(keys)
        return len(keys)

    def finish(self, masters: Sequence[ClusterNode]) -> None:
        """Assign the slot to the target: on the target first, then the source,
        then every other master, so no node sends a client back to the source."""
        target_id = self._id(self.target)
        others = [m for m in masters if m.name not in (self.source.name, self.target.name)]
        for node in (self.target, self.source, *others):
            with node.client() as c:
                c.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", target_id)

    @staticmethod
    def _id(node: ClusterNode) -> str:
        with node.client() as c:
            raw = c.execute_command("CLUSTER", "MYID")
        return raw.decode() if isinstance(raw, bytes) else str(raw)
