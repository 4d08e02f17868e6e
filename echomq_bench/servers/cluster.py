"""A handle on a Redis Cluster or Valkey Cluster: its nodes, what they say
about each other, and the cluster client; plus `UrlCluster`, a cluster that
already runs.

    [NAME=]redis+cluster://[USER:PASS@]HOST:PORT   (rediss+cluster:// for TLS)

A local cluster is started by `echomq_bench.servers.cluster_launcher`, which
builds on the `Cluster` base here; the choice of queue names that spreads
queues over masters is `echomq_bench.servers.placement`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import redis
from redis.cluster import RedisCluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS

from echomq_bench.servers.base import no_retry, server_version
from echomq_bench.servers.embedded import EmbeddedServer
from echomq_bench.servers.errors import (
    ClusterNotReadyError,
    ServerError,
    ServerSpecError,
    ServerStartError,
)
from echomq_bench.servers.spec import DEFAULT_URL_PORT, ServerSpec, redacted_url

__all__ = ["NodeState", "ClusterNode", "Cluster", "UrlCluster", "parse_cluster_nodes"]

CLUSTER_SCHEMES: dict[str, str] = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
READY_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.05


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
        # Credentials and TLS settings of a node this process did not start.
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

    def connection_kwargs(self) -> dict[str, Any]:
        """`redis.Redis(**kwargs)` arguments for this node alone, credentials
        and TLS settings included: for worker processes. Never print it."""
        if self.server is not None:
            return self.server.connection_kwargs()
        return {"host": self.host, "port": self.port, **self._options}

    def client(self, **kwargs: Any) -> redis.Redis:
        """A plain client of this node alone: for INFO, CLUSTER and per-node stats."""
        if self.server is not None:
            return self.server.client(**kwargs)
        options: dict[str, Any] = {**self.connection_kwargs(), "decode_responses": False,
                                   "socket_connect_timeout": 5}
        options.update(kwargs)
        return redis.Redis(**options)

    def state(self) -> list[NodeState]:
        """The cluster as this node sees it."""
        with self.client(socket_timeout=5, retry=no_retry()) as c:
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


class Cluster:
    """What a local and a URL cluster share: the `Server` interface, with
    `host`/`port` of the node clients start from and `pid` None (see `nodes`)."""

    spec: ServerSpec
    name: str
    nodes: list[ClusterNode]
    # Credentials and TLS settings every node takes (username, password, ssl).
    _client_options: dict[str, Any]
    pid: int | None = None

    @property
    def host(self) -> str:
        return self.nodes[0].host

    @property
    def port(self) -> int:
        return self.nodes[0].port

    @property
    def url(self) -> str:
        scheme = "rediss+cluster" if self._client_options.get("ssl") else "redis+cluster"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def display_url(self) -> str:
        return redacted_url(self.url)

    @property
    def running(self) -> bool:
        return any(n.running for n in self.nodes)

    def connection_kwargs(self) -> dict[str, Any]:
        """`redis.Redis(**kwargs)` arguments for the start node, credentials
        included; every node takes the same. Never print it."""
        return {"host": self.host, "port": self.port, **self._client_options}

    def connection_url(self) -> str:
        """redis+cluster://[USER:PASSWORD@]HOST:PORT of the start node, for
        processes that take a URL. Never print it."""
        user = quote(self._client_options.get("username") or "", safe="")
        password = self._client_options.get("password")
        secret = f":{quote(password, safe='')}" if password is not None else ""
        auth = f"{user}{secret}@" if user or secret else ""
        return self.url.replace("://", f"://{auth}", 1)

    def client(self, **kwargs: Any) -> RedisCluster:
        """redis-py's cluster client: every command goes to the node owning its slot."""
        live = [n for n in self.nodes if n.running]
        if not live:
            raise ServerError(f"cluster {self.name!r}: no node is running")
        options: dict[str, Any] = {"decode_responses": False, "socket_connect_timeout": 5,
                                   **self._client_options}
        options.update(kwargs)
        # redis-py leaves ClusterNode's constructor unannotated.
        startup = [redis.cluster.ClusterNode(n.host, n.port) for n in live]  # type: ignore[no-untyped-call]
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
        with node.client(socket_timeout=5, retry=no_retry()) as c:
            info: dict[str, Any] = c.cluster("info")
        return info

    def wait_ready(self, timeout: float = READY_TIMEOUT_SECONDS, *, expect_masters: int | None = None) -> None:
        """Return once every live node says cluster_state:ok, all of them
        agree on the owner of every slot, and (with `expect_masters`) that
        many masters serve slots. Raise ClusterNotReadyError otherwise."""
        deadline = time.monotonic() + timeout
        why: str | None = "no node answered"
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
# A cluster that already runs


class UrlCluster(Cluster):
    """A cluster somewhere else, reached through one of its nodes' URL."""

    def __init__(self, spec: ServerSpec) -> None:
        if spec.kind != "cluster" or spec.url is None:
            raise ServerSpecError(f"{spec!r} is not a cluster URL spec")
        self.spec = spec
        self.name = spec.name
        self._url = spec.url
        parts = urlsplit(spec.url)
        scheme = CLUSTER_SCHEMES[parts.scheme.lower()]
        self._plain_url = urlunsplit((scheme, parts.netloc, "", parts.query, ""))
        self._client_options = {}
        if parts.username:
            self._client_options["username"] = unquote(parts.username)
        if parts.password:
            self._client_options["password"] = unquote(parts.password)
        if scheme == "rediss":
            self._client_options["ssl"] = True
        self.nodes = [ClusterNode(parts.hostname or "", parts.port or DEFAULT_URL_PORT,
                                  client_options=self._client_options)]

    @property
    def url(self) -> str:
        return self._url

    @property
    def running(self) -> bool:
        return True  # not ours to know: check() says whether it answers

    def connection_url(self) -> str:
        """The URL itself, credentials included. Never print it."""
        return self.url

    def client(self, **kwargs: Any) -> RedisCluster:
        options: dict[str, Any] = {"decode_responses": False, "socket_connect_timeout": 5}
        options.update(kwargs)
        return RedisCluster.from_url(self._plain_url, **options)

    def check(self, timeout: float = 5.0) -> None:
        """Raise ServerStartError unless the node answers and says the cluster is ok;
        then learn every node from it."""
        first = self.nodes[0]
        try:
            with first.client(socket_connect_timeout=timeout, socket_timeout=timeout, retry=no_retry()) as c:
                state = c.cluster("info").get("cluster_state")
                view = parse_cluster_nodes(c.cluster("nodes"))
        except redis.ResponseError as exc:
            if "cluster support disabled" not in str(exc):
                raise ServerStartError(f"cluster {self.name!r}: {redacted_url(str(exc))}") from None
            raise ServerStartError(
                f"{self.display_url} is a server without cluster mode; use redis://{first.name}"
            ) from None
        except (redis.RedisError, OSError) as exc:
            reason = redacted_url(f"{type(exc).__name__}: {exc}")
            raise ServerStartError(f"cluster {self.name!r} at {self.display_url} does not answer: {reason}") from None
        if state != "ok":
            raise ServerStartError(f"cluster {self.name!r} at {self.display_url} says cluster_state:{state}")
        for s in view:
            if s.addr != first.name and not s.failed:
                self._node_at(s.addr)

    def stop(self) -> None:
        """Nothing to stop: this process did not start the cluster."""

    def __repr__(self) -> str:
        return f"UrlCluster(name={self.name!r}, url={self.display_url!r})"

