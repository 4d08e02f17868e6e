"""The servers that tests, benchmarks and the CLI talk to.

Every command takes `--server SPEC`; `parse_server_spec` turns SPEC into a
`ServerSpec` and `start` turns that into a running `Server`:

    base.py              the `Server` protocol every kind satisfies
    errors.py            the error tree
    spec.py              SPEC parsing and password redaction (starts nothing)
    builds.py            the named builds (redis6.2, ...): where each binary is, what it says it is
    baseline.py          the settings every embedded server starts with, per version
    layout.py            a local cluster's size and slot ranges
    embedded.py          one embedded server this process owns
    guard.py, keeper.py  nothing this process starts outlives it
    url.py               a server that already runs (redis://, rediss://)
    cluster.py           a cluster's nodes and client; a cluster that already runs
    cluster_launcher.py  a local cluster this process owns
    placement.py         queue names spread over a cluster's masters
    tls.py               a throwaway CA and certificate for TLS trials
    launch.py            `start` and `running`, for every kind

Import from here; the modules are the package's own layout.
"""

from __future__ import annotations

from echomq_bench.servers.base import LOOPBACK, Server, server_allocator, server_executable, server_version
from echomq_bench.servers.builds import BUILD_NAMES, BUILDS, InstalledBuild, build_binary, installed_builds
from echomq_bench.servers.cluster import Cluster, ClusterNode, NodeState, UrlCluster
from echomq_bench.servers.cluster_launcher import EmbeddedCluster, start_cluster
from echomq_bench.servers.embedded import EmbeddedServer, find_binary, free_port, spec_binary
from echomq_bench.servers.errors import (
    BuildError,
    ClusterNotReadyError,
    ServerError,
    ServerNotFoundError,
    ServerSpecError,
    ServerStartError,
)
from echomq_bench.servers.guard import keeper_pid, stop_all
from echomq_bench.servers.launch import running, start
from echomq_bench.servers.layout import ClusterLayout, slot_ranges, split_cluster_args
from echomq_bench.servers.placement import (
    Placement,
    format_placements,
    is_cluster,
    master_clients,
    queue_slot,
    spread_queues,
)
from echomq_bench.servers.spec import (
    BUILTIN_BINARIES,
    DEFAULT_SPECS,
    ServerSpec,
    parse_server_spec,
    redacted_args,
    redacted_url,
)
from echomq_bench.servers.url import UrlServer

__all__ = [
    # starting and stopping
    "start",
    "running",
    "stop_all",
    "keeper_pid",
    # what SPEC means
    "DEFAULT_SPECS",
    "BUILTIN_BINARIES",
    "ServerSpec",
    "parse_server_spec",
    "redacted_url",
    "redacted_args",
    # the named builds
    "BUILDS",
    "BUILD_NAMES",
    "InstalledBuild",
    "installed_builds",
    "build_binary",
    # the kinds of server
    "Server",
    "EmbeddedServer",
    "UrlServer",
    "Cluster",
    "EmbeddedCluster",
    "UrlCluster",
    "ClusterNode",
    "NodeState",
    "start_cluster",
    # clusters: layout and queue placement
    "ClusterLayout",
    "split_cluster_args",
    "slot_ranges",
    "Placement",
    "queue_slot",
    "spread_queues",
    "master_clients",
    "format_placements",
    "is_cluster",
    # helpers
    "LOOPBACK",
    "server_version",
    "server_allocator",
    "server_executable",
    "find_binary",
    "spec_binary",
    "free_port",
    # errors
    "ServerError",
    "ServerSpecError",
    "BuildError",
    "ServerStartError",
    "ServerNotFoundError",
    "ClusterNotReadyError",
]
