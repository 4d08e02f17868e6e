"""Redis Cluster and Valkey Cluster: a local launcher, a handle on one that
already runs, and the choice of queue names that spreads queues over masters.

    redis-cluster | valkey-cluster        three masters on loopback ports
    NAME=redis-cluster [--masters N] [--replicas N] [--cluster-node-timeout MS] [ARGS...]
    [NAME=]redis+cluster://[USER:PASS@]HOST:PORT   (rediss+cluster:// for TLS)

Every node of a local cluster is an `EmbeddedServer` (its own temp dir, its
own free port, cleaned up by the keeper however this process ends); the
launcher adds the cluster settings, assigns slots, introduces the nodes and
returns only once every node says `cluster_state:ok` and all of them agree
on who owns which slot. It does what `redis-cli --cluster create` does, with
commands, so it needs no CLI binary and can wait on exactly what it needs.

A queue lives in one slot (its `{q}` hash tag), so on one master: to use N
masters, run at least N queues with names chosen by `spread_queues`.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import count as counter
from typing import Any, Sequence
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.cluster import RedisCluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from echomq.keys import check_queue_name
from echomq_bench.servers.embedded import (
    LOOPBACK,
    EmbeddedServer,
    ServerError,
    ServerSpec,
    ServerSpecError,
    ServerNotFoundError,
    ServerStartError,
    _no_retry,
    free_port,
    _option_value,
    redacted_url,
    server_version,
)

__all__ = [
    "ClusterLayout",
    "ClusterNode",
    "NodeState",
    "EmbeddedCluster",
    "UrlCluster",
    "Placement",
    "split_cluster_args",
    "start_cluster",
    "slot_ranges",
    "spread_queues",
    "format_placements",
    "queue_slot",
    "master_clients",
    "is_cluster",
]

CLUSTER_BINARIES: dict[str, str] = {"redis-cluster": "redis-server", "valkey-cluster": "valkey-server"}
CLUSTER_SCHEMES: dict[str, str] = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
# The launcher sets these on every node; a user value would break the wiring.
MANAGED_CLUSTER_OPTIONS = frozenset({"--cluster-enabled", "--cluster-config-file", "--cluster-port"})
# Long enough that a node busy with a large reap on a shared two-core
# machine is not declared failed; the failover scenario asks for less.
DEFAULT_NODE_TIMEOUT_MS = 5000
READY_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.05
START_ATTEMPTS = 3


class ClusterNotReadyError(ServerStartError):
    """The nodes did not agree on a healthy cluster in time."""


# --------------------------------------------------------------------------
# Layout: what the launcher options ask for


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


def queue_slot(name: str) -> int:
    """The slot of every key of queue `name`: its `{name}` hash tag."""
    return key_slot(check_queue_name(name).encode())


# --------------------------------------------------------------------------
# Nodes and what they report


@dataclass(frozen=True)
class NodeState:
    """One line of CLUSTER NODES, as one node sees the cluster."""

    node_id: str
    addr: str  # host:port
    role: str  # "master" or "replica"
    master_id: str | None
    slots: tuple[tuple[int, int], ...]
    failed: bool  # flagged fail or pfail, or its link is down


class ClusterNode:
    """One node: an embedded server this process owns, or an address."""

    def __init__(self, host: str, port: int, *, server: EmbeddedServer | None = None,
                 client_options: dict[str, Any] | None = None) -> None:
        self.host = host
        self.port = port
        self.server = server
        self._options = dict(client_options or {})

    @property
    def name(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's pid when this process started it, else None."""
        return self.server.pid if self.server is not None else None

    @property
    def running(self) -> bool:
        return self.server.running if self.server is not None else True

    def client(self, **kwargs: Any) -> redis.Redis:
        """A plain client of this node alone: for INFO, CLUSTER and per-node stats."""
        if self.server is not None:
            return self.server.client(**kwargs)
        options: dict[str, Any] = {"host": self.host, "port": self.port, "decode_responses": False,
                                   "socket_connect_timeout": 5, **self._options}
        options.update(kwargs)
        return redis.Redis(**options)

    def state(self) -> list[NodeState]:
        """The cluster as this node sees it."""
        with self.client(socket_timeout=5, retry=_no_retry()) as c:
            view = parse_cluster_nodes(c.cluster("nodes"))
        # A node that never met another does not know its own IP (":port").
        return [replace(s, addr=self.host + s.addr) if s.addr.startswith(":") else s for s in view]

    def __repr__(self) -> str:
        return f"ClusterNode({self.name}, pid={self.pid})"


def parse_cluster_nodes(reply: dict[str, dict[str, Any]]) -> list[NodeState]:
    """CLUSTER NODES, as redis-py parses it (address -> fields), as NodeState rows."""
    out = []
    for addr, fields in reply.items():
        flags = set(str(fields.get("flags", "")).split(","))
        slots = [(int(item[0]), int(item[-1])) for item in fields.get("slots", []) if item]
        master_id = fields.get("master_id", "-")
        out.append(NodeState(
            node_id=str(fields["node_id"]),
            addr=addr.split("@", 1)[0],
            role="master" if "master" in flags else "replica",
            master_id=None if master_id in ("-", "", None) else str(master_id),
            slots=tuple(sorted(slots)),
            failed=bool(flags & {"fail", "fail?", "noaddr", "handshake"})
            or ("myself" not in flags and not fields.get("connected", False)),
        ))
    return out


# --------------------------------------------------------------------------
# What both kinds of cluster share


class _Cluster:
    spec: ServerSpec
    name: str
    nodes: list[ClusterNode]
    _client_options: dict[str, Any]

    @property
    def url(self) -> str:
        first = self.nodes[0]
        return f"redis+cluster://{first.host}:{first.port}"

    def client(self, **kwargs: Any) -> RedisCluster:
        """redis-py's cluster client: every command goes to the node owning its slot."""
        live = [n for n in self.nodes if n.running]
        if not live:
            raise ServerError(f"cluster {self.name!r}: no node is running")
        options: dict[str, Any] = {"decode_responses": False, "socket_connect_timeout": 5,
                                   **self._client_options}
        options.update(kwargs)
        startup = [redis.cluster.ClusterNode(n.host, n.port) for n in live]
        return RedisCluster(startup_nodes=startup, **options)

    def version(self) -> str:
        for node in self.nodes:
            if node.running:
                with node.client() as c:
                    return server_version(c)
        raise ServerError(f"cluster {self.name!r}: no node is running")

    def describe(self) -> str:
        return self.spec.describe()

    def states(self) -> dict[str, list[NodeState]]:
        """What every reachable node says about the cluster, by node address."""
        out = {}
        for node in self.nodes:
            if not node.running:
                continue
            try:
                out[node.name] = node.state()
            except (redis.RedisError, OSError):
                continue
        return out

    def masters(self) -> list[ClusterNode]:
        """The nodes that serve slots now, in slot order (it changes after a failover)."""
        by_addr = {n.name: n for n in self.nodes}
        views = self.states()
        if not views:
            raise ServerError(f"cluster {self.name!r}: no node answers")
        view = next(iter(views.values()))
        owners = sorted((s.slots[0][0], s.addr) for s in view if s.role == "master" and s.slots and not s.failed)
        return [by_addr.get(addr) or self._node_at(addr) for _, addr in owners]

    def _node_at(self, addr: str) -> ClusterNode:
        host, _, port = addr.rpartition(":")
        node = ClusterNode(host, int(port), client_options=self._client_options)
        self.nodes.append(node)
        return node

    def _cluster_info(self, node: ClusterNode) -> dict[str, Any]:
        with node.client(socket_timeout=5, retry=_no_retry()) as c:
            return c.cluster("info")  # type: ignore[no-any-return]

    def wait_ready(self, timeout: float = READY_TIMEOUT_SECONDS, *, expect_masters: int | None = None) -> None:
        """Return once every live node says cluster_state:ok, all of them
        agree on the owner of every slot, and (with `expect_masters`) that
        many masters serve slots. Raise ClusterNotReadyError otherwise."""
        deadline = time.monotonic() + timeout
        why = "no node answered"
        while time.monotonic() < deadline:
            why = self._not_ready(expect_masters)
            if why is None:
                return
            time.sleep(POLL_SECONDS)
        raise ClusterNotReadyError(f"cluster {self.name!r} not ready after {timeout:g} s: {why}")

    def _not_ready(self, expect_masters: int | None) -> str | None:
        maps = {}
        for node in self.nodes:
            if not node.running:
                continue
            try:
                info = self._cluster_info(node)
                view = node.state()
            except (redis.RedisError, OSError) as exc:
                return f"{node.name} does not answer ({type(exc).__name__})"
            if info.get("cluster_state") != "ok":
                return f"{node.name} says cluster_state:{info.get('cluster_state')}"
            maps[node.name] = sorted(
                (s.slots, s.addr) for s in view if s.role == "master" and s.slots and not s.failed
            )
        if not maps:
            return "no node answered"
        distinct = {repr(m) for m in maps.values()}
        if len(distinct) > 1:
            return "the nodes do not yet agree on who owns which slots"
        owners = next(iter(maps.values()))
        covered = sum(hi - lo + 1 for slots, _ in owners for lo, hi in slots)
        if covered != REDIS_CLUSTER_HASH_SLOTS:
            return f"{covered} of {REDIS_CLUSTER_HASH_SLOTS} slots have an owner"
        if expect_masters is not None and len(owners) != expect_masters:
            return f"{len(owners)} masters serve slots, expected {expect_masters}"
        return None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


# --------------------------------------------------------------------------
# A local cluster


class EmbeddedCluster(_Cluster):
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
        password = _option_value(self.node_args, "--requirepass")
        self._client_options = {"password": password} if password is not None else {}
        if password is not None and _option_value(self.node_args, "--masterauth") is None:
            # A replica authenticates to its master with the same password.
            self.node_args = (*self.node_args, "--masterauth", password)
        try:
            for index in range(self.layout.size):
                self.nodes.append(ClusterNode(LOOPBACK, 0, server=self._start_node(index)))
                self.nodes[-1].port = self.nodes[-1].server.port  # type: ignore[union-attr]
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
            ids = [c.execute_command("CLUSTER MYID").decode() for c in clients]
            for epoch, (c, (lo, hi)) in enumerate(zip(clients, slot_ranges(len(masters))), start=1):
                # Distinct epochs up front, as redis-cli does, so no collision
                # round decides the first slot map.
                c.execute_command("CLUSTER SET-CONFIG-EPOCH", epoch)
                c.execute_command("CLUSTER ADDSLOTSRANGE", lo, hi)
            # Every pair meets directly: a full mesh at once instead of
            # waiting for gossip to spread the news from one node.
            servers = self.servers
            for i, c in enumerate(clients):
                for other in servers[i + 1 :]:
                    bus = _option_value(other._run_args, "--cluster-port")
                    c.execute_command("CLUSTER MEET", LOOPBACK, other.port, bus)
            self._wait(lambda: self._all_know(ids), ready_timeout, "every node to know every other")
            for index in range(len(masters), len(self.nodes)):
                master_id = ids[(index - len(masters)) // self.layout.replicas]
                clients[index].execute_command("CLUSTER REPLICATE", master_id)
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

    def _wait(self, check: Any, timeout: float, what: str) -> None:
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

    @property
    def running(self) -> bool:
        return any(n.running for n in self.nodes)

    def __repr__(self) -> str:
        return f"EmbeddedCluster(name={self.name!r}, nodes={[n.name for n in self.nodes]})"


# --------------------------------------------------------------------------
# A cluster that already runs


class UrlCluster(_Cluster):
    """A cluster somewhere else, reached through one of its nodes' URL."""

    def __init__(self, spec: ServerSpec) -> None:
        if spec.kind != "cluster" or spec.url is None:
            raise ServerSpecError(f"{spec!r} is not a cluster URL spec")
        self.spec = spec
        self.name = spec.name
        parts = urlsplit(spec.url)
        scheme = CLUSTER_SCHEMES[parts.scheme.lower()]
        self._plain_url = urlunsplit((scheme, parts.netloc, "", parts.query, ""))
        self._client_options = {}
        if parts.username:
            self._client_options["username"] = parts.username
        if parts.password:
            self._client_options["password"] = parts.password
        if scheme == "rediss":
            self._client_options["ssl"] = True
        self.nodes = [ClusterNode(parts.hostname or "", parts.port or 6379, client_options=self._client_options)]
        self.running = True

    @property
    def url(self) -> str:
        return self.spec.url  # type: ignore[return-value]

    def client(self, **kwargs: Any) -> RedisCluster:
        options: dict[str, Any] = {"decode_responses": False, "socket_connect_timeout": 5}
        options.update(kwargs)
        return RedisCluster.from_url(self._plain_url, **options)

    def check(self, timeout: float = 5.0) -> None:
        """Raise ServerStartError unless the node answers and says the cluster is ok;
        then learn every node from it."""
        first = self.nodes[0]
        try:
            with first.client(socket_connect_timeout=timeout, socket_timeout=timeout, retry=_no_retry()) as c:
                state = c.cluster("info").get("cluster_state")
                view = parse_cluster_nodes(c.cluster("nodes"))
        except redis.ResponseError as exc:
            if "cluster support disabled" not in str(exc):
                raise ServerStartError(f"cluster {self.name!r}: {redacted_url(str(exc))}") from None
            raise ServerStartError(
                f"{redacted_url(self.url)} is a server without cluster mode; use redis://{first.name}"
            ) from None
        except (redis.RedisError, OSError) as exc:
            reason = redacted_url(f"{type(exc).__name__}: {exc}")
            raise ServerStartError(f"cluster {self.name!r} at {redacted_url(self.url)} does not answer: {reason}") from None
        if state != "ok":
            raise ServerStartError(f"cluster {self.name!r} at {redacted_url(self.url)} says cluster_state:{state}")
        for s in view:
            if s.addr != first.name and not s.failed:
                self._node_at(s.addr)

    def stop(self) -> None:
        """Nothing to stop: this process did not start the cluster."""

    def __repr__(self) -> str:
        return f"UrlCluster(name={self.name!r}, url={redacted_url(self.url)!r})"


def start_cluster(spec: ServerSpec | str, *, check: bool = True) -> EmbeddedCluster | UrlCluster:
    """Start a local cluster, or connect to a running one (checking it unless check=False)."""
    from echomq_bench.servers.embedded import parse_server_spec

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


# --------------------------------------------------------------------------
# Spreading queues over masters


@dataclass(frozen=True)
class Placement:
    queue: str
    slot: int
    node: str  # host:port of the master serving the slot when chosen


def is_cluster(target: Any) -> bool:
    """A local or URL cluster (what `servers.start` gives for a cluster spec)."""
    return isinstance(target, _Cluster)


def _owners(target: Any) -> tuple[list[str], Any]:
    """The masters' addresses and a slot -> address function for a cluster,
    a cluster client, or a plain client (one node owns everything)."""
    if isinstance(target, _Cluster):
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
    from echomq.queue import describe

    only = describe(target)
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
    if isinstance(target, _Cluster):
        return {m.name: m.client() for m in target.masters()}
    if isinstance(target, RedisCluster):
        order, _ = _owners(target)
        nodes = {n.name: n for n in target.get_primaries()}
        return {name: target.get_redis_connection(nodes[name]) for name in order}
    from echomq.queue import describe

    return {describe(target): target}


def format_placements(placements: Sequence[Placement]) -> str:
    """The choice as a table, with the count per node under it."""
    width = max([5] + [len(p.queue) for p in placements])
    lines = [f"{'queue':<{width}}  {'slot':>5}  node"]
    lines += [f"{p.queue:<{width}}  {p.slot:>5}  {p.node}" for p in placements]
    per_node = Counter(p.node for p in placements)
    lines.append("per node: " + ", ".join(f"{node} {n}" for node, n in sorted(per_node.items())))
    return "\n".join(lines)
