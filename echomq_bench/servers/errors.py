"""The error tree of `echomq_bench.servers`, drawn once (its place in the
instrument's whole tree: echomq_bench.errors).

    ServerError                     a server could not be described, started or controlled
    ├── ServerSpecError             a `--server SPEC` that is not an accepted form (also ValueError)
    │   └── BuildError              a build's short name (redis6.2, ...) that this machine cannot honour:
    │                               the build is not installed, or its binary is another version
    └── ServerStartError            an embedded server did not come up, or a URL server did not answer
        ├── ServerNotFoundError     the server binary is not installed or not on the system PATH
        └── ClusterNotReadyError    the nodes did not agree on a healthy cluster in time
    TlsError (servers.tls)          openssl is missing or refused to make a certificate
"""

from __future__ import annotations

from echomq_bench.errors import BenchError

__all__ = [
    "ServerError",
    "ServerSpecError",
    "BuildError",
    "ServerStartError",
    "ServerNotFoundError",
    "ClusterNotReadyError",
]


class ServerError(BenchError):
    """A server could not be described, started or controlled."""


class ServerSpecError(ServerError, ValueError):
    """A `--server SPEC` that is not one of the accepted forms."""


class BuildError(ServerSpecError):
    """A build's short name whose binary is not installed, or is another version."""


class ServerStartError(ServerError):
    """An embedded server did not come up, or a URL server did not answer."""


class ServerNotFoundError(ServerStartError):
    """The server binary is not installed or not on the system PATH."""


class ClusterNotReadyError(ServerStartError):
    """The nodes did not agree on a healthy cluster in time."""
