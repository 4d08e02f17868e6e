"""From a `--server SPEC` to a running `Server`, whatever its kind."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from echomq_bench.servers.base import Server
from echomq_bench.servers.cluster_launcher import start_cluster
from echomq_bench.servers.embedded import EmbeddedServer
from echomq_bench.servers.spec import ServerSpec, parse_server_spec
from echomq_bench.servers.url import UrlServer

__all__ = ["start", "running"]


def start(spec: ServerSpec | str, *, check: bool = True) -> Server:
    """Start an embedded server or a local cluster, or connect to a URL one
    (checking that it answers unless check=False).

    Every kind satisfies `Server`; a cluster (`EmbeddedCluster`, `UrlCluster`)
    adds `nodes`, `masters()` and `wait_ready()`.
    """
    if isinstance(spec, str):
        spec = parse_server_spec(spec)
    if spec.kind == "cluster":
        return start_cluster(spec, check=check)
    if spec.kind == "embedded":
        return EmbeddedServer(spec)
    server = UrlServer(spec)
    if check:
        server.check()
    return server


@contextmanager
def running(*specs: ServerSpec | str) -> Iterator[tuple[Server, ...]]:
    """Start every spec in order; stop them all on the way out, even on error."""
    with ExitStack() as stack:
        servers: list[Server] = []
        for spec in specs:
            server = start(spec)
            stack.callback(server.stop)
            servers.append(server)
        yield tuple(servers)
