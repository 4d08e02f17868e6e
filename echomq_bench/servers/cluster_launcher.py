"""A local Redis Cluster or Valkey Cluster, started and owned by this process.

    redis-cluster | valkey-cluster        three masters on loopback ports
    NAME=redis-cluster [--masters N] [--replicas N] [--cluster-node-timeout MS] [ARGS...]

Every node is an `EmbeddedServer` (its own temp dir, its own free port,
cleaned up by the keeper however this process ends); the launcher adds the
cluster settings, assigns slots, introduces the nodes and returns only once
every node says `cluster_state:ok` and all of them agree on who owns which
slot. It does what `redis-cli --cluster create` does, with commands, so it
needs no CLI binary and can wait on exactly what it needs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from echomq_bench.servers.base import LOOPBACK
from echomq_bench.servers.cluster import (
    READY_TIMEOUT_SECONDS,
    Cluster,
    ClusterNode,
    UrlCluster,
)
from echomq_bench.servers.embedded import EmbeddedServer, free_port
from echomq_bench.servers.errors import (
    ClusterNotReadyError,
    ServerNotFoundError,
    ServerSpecError,
    ServerStartError,
)
from echomq_bench.servers.layout import slot_ranges, split_cluster_args
from echomq_bench.servers.spec import ServerSpec, option_value, parse_server_spec

__all__ = ["EmbeddedCluster", "start_cluster"]

POLL_SECONDS = 0.05
START_ATTEMPTS = 3


class EmbeddedCluster(Cluster):
    """A cluster of embedded servers this process started and owns.

    The constructor returns once the cluster is ready; `stop()` (or the exit
    of this process, however it ends) stops every node and removes its dir.
    `nodes` are in start order: masters first, then each master's replicas.
    """

    def __init__(self, spec: ServerSpec, *, ready_timeout: float = READY_TIMEOUT_SECONDS) -> None:
        if spec.kind != "cluster" or spec.binary is None:
            raise ServerSpecError(f"{spec!r} is not a local cluster spec")
        try:
            self.layout, self.node_args = split_cluster_args(spec.args)
        except ValueError as exc:
            raise ServerSpecError(f"server spec {spec.describe()!r}: {exc}") from None
        self.spec = spec
        self.name = spec.name
        self.nodes = []
        if self.layout.replicas:
            # A replica's first sync would otherwise wait 5 s for more replicas to join it.
            self.node_args = ("--repl-diskless-sync", "no", *self.node_args)
        password = option_value(self.node_args, "--requirepass")
        self._client_options = {"password": password} if password is not None else {}
        if password is not None and option_value(self.node_args, "--masterauth") is None:
            # A replica authenticates to its master with the same password.
            self.node_args = (*self.node_args, "--masterauth", password)
        try:
            for index in range(self.layout.size):
                server = self._start_node(index)
                self.nodes.append(ClusterNode(LOOPBACK, server.port, server=server))
            self._form(ready_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def servers(self) -> list[EmbeddedServer]:
        return [n.server for n in self.nodes if n.server is not None]

    def _start_node(self, index: int) -> EmbeddedServer:
        last: ServerStartError | None = None
        for _ in range(START_ATTEMPTS):
            # The bus port is given, not port+10000: free ports above 55535
            # would put the bus past 65535.
            args = (
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(self.layout.node_timeout_ms),
                "--cluster-port", str(free_port()),
                "--cluster-announce-ip", LOOPBACK,
                *self.node_args,
            )  # fmt: skip
            node_spec = ServerSpec(name=f"{self.name}-{index}", kind="embedded", binary=self.spec.binary, args=args)
            try:
                return EmbeddedServer(node_spec)
            except ServerNotFoundError:
                raise
            except ServerStartError as exc:
                # The bus port may have gone to someone else (the launcher
                # retries only the client port); a bad ARG fails every time, fast.
                last = exc
        assert last is not None
        raise last

    def _form(self, ready_timeout: float) -> None:
        masters = self.nodes[: self.layout.masters]
        clients = [n.client() for n in self.nodes]
        try:
            ids = [c.cluster("MYID").decode() for c in clients]
            for epoch, (c, (lo, hi)) in enumerate(zip(clients, slot_ranges(len(masters))), start=1):
                # Distinct epochs up front, as redis-cli does, so no collision
                # round decides the first slot map.
                c.cluster("SET-CONFIG-EPOCH", epoch)
                c.cluster("ADDSLOTSRANGE", lo, hi)
            # Every pair meets directly: a full mesh at once instead of
            # waiting for gossip to spread the news from one node.
            servers = self.servers
            for i, c in enumerate(clients):
                for other in servers[i + 1 :]:
                    bus = other.option("--cluster-port")
                    c.cluster("MEET", LOOPBACK, other.port, bus)
            self._wait(lambda: self._all_know(ids), ready_timeout, "every node to know every other")
            for index in range(len(masters), len(self.nodes)):
                master_id = ids[(index - len(masters)) // self.layout.replicas]
                clients[index].cluster("REPLICATE", master_id)
            self._wait(lambda: self._replicas_synced(ids), ready_timeout, "the replicas to sync")
        finally:
            for c in clients:
                c.close()
        self.wait_ready(ready_timeout, expect_masters=self.layout.masters)

    def _all_know(self, ids: list[str]) -> bool:
        for node in self.nodes:
            view = node.state()
            known = {s.node_id for s in view if not s.failed}
            if known != set(ids):
                return False
        return True

    def _replicas_synced(self, ids: list[str]) -> bool:
        expected = {ids[i]: ids[(i - self.layout.masters) // self.layout.replicas]
                    for i in range(self.layout.masters, len(self.nodes))}
        for node in self.nodes:
            seen = {s.node_id: s.master_id for s in node.state() if s.role == "replica"}
            if seen != expected:
                return False
        for node in self.nodes[self.layout.masters:]:
            with node.client() as c:
                info = c.info("replication")
            if info.get("master_link_status") != "up" or info.get("master_sync_in_progress", 0):
                return False
        return True

    def _wait(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise ClusterNotReadyError(f"cluster {self.name!r}: gave up waiting {timeout:g} s for {what}")
            time.sleep(POLL_SECONDS)

    def stop(self) -> None:
        """Stop every node and remove its dir. Safe to call twice."""
        servers = self.servers
        if len(servers) > 1:
            # Each stop waits for its node to exit; wait for all at once.
            with ThreadPoolExecutor(max_workers=len(servers)) as pool:
                list(pool.map(lambda server: server.stop(), servers))
        else:
            for server in servers:
                server.stop()

    def __repr__(self) -> str:
        return f"EmbeddedCluster(name={self.name!r}, nodes={[n.name for n in self.nodes]})"


def start_cluster(spec: ServerSpec | str, *, check: bool = True) -> EmbeddedCluster | UrlCluster:
    """Start a local cluster, or connect to a running one (checking it unless check=False)."""
    if isinstance(spec, str):
        spec = parse_server_spec(spec)
    if spec.kind != "cluster":
        raise ServerSpecError(f"{spec!r} is not a cluster spec")
    if spec.url is None:
        return EmbeddedCluster(spec)
    cluster = UrlCluster(spec)
    if check:
        cluster.check()
    return cluster

