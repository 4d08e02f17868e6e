"""What every server kind is to its callers.

`Server` is the one interface callers program against: an `EmbeddedServer`,
a `UrlServer` (plain or TLS), an `EmbeddedCluster` and a `UrlCluster` all
satisfy it. Its accessors are public so that no caller needs a private
attribute, and they are the only way to the credentials: `connection_kwargs()`
and `connection_url()` carry the password for worker processes, while
`repr()`, `describe()` and `display_url` never do.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq_bench.servers.spec import ServerSpec

__all__ = ["LOOPBACK", "Server", "OneServer", "server_version", "server_allocator", "server_executable", "no_retry"]

LOOPBACK = "127.0.0.1"


@runtime_checkable
class Server(Protocol):
    """A started server or cluster, whatever its kind.

    `host`/`port` address the server itself, or for a cluster the node the
    client starts from. `pid` is set only for one server this process
    started; a URL server or a cluster (see its `nodes`) has None.
    """

    name: str
    spec: ServerSpec

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def url(self) -> str:
        """The address to connect to; a URL server's own URL may hold a password."""
        ...

    @property
    def display_url(self) -> str:
        """`url` with any password hidden: the form for logs, messages and files."""
        ...

    @property
    def pid(self) -> int | None: ...

    @property
    def running(self) -> bool: ...

    def client(self, **kwargs: Any) -> Any:
        """A redis-py client (a `RedisCluster` for a cluster); kwargs override the defaults."""
        ...

    def connection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `redis.Redis(**kwargs)` to the server (or the
        cluster's start node): host, port, db, credentials, TLS settings.
        Holds the password: hand it to worker processes, never print it."""
        ...

    def connection_url(self) -> str:
        """A URL that connects with the right credentials, for processes that
        take a URL (Locust workers). Holds the password: never print it."""
        ...

    def version(self) -> str:
        """The build and version it runs, as `redis 7.0.15` or `valkey 8.0.1`."""
        ...

    def describe(self) -> str:
        """The SPEC it was started from, passwords hidden."""
        ...

    def stop(self) -> None:
        """Stop what this process started; nothing for a server it only reached."""
        ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc_info: object) -> None: ...


class OneServer:
    """What one server answers the same way whoever started it: its version, from
    INFO over its own client, and the SPEC it came from."""

    spec: ServerSpec

    def client(self, **kwargs: Any) -> redis.Redis:
        raise NotImplementedError

    def version(self) -> str:
        with self.client() as client:
            return server_version(client)

    def describe(self) -> str:
        return self.spec.describe()


def server_version(client: redis.Redis) -> str:
    """`valkey 8.0.1` or `redis 7.0.15`, from INFO server."""
    info = client.info("server")
    valkey = info.get("valkey_version")
    if valkey:
        return f"valkey {valkey}"
    return f"redis {info['redis_version']}"


def server_allocator(client: Any) -> str:
    """`jemalloc-5.3.0` or `libc`, from INFO memory: which malloc the build links."""
    return str(client.info("memory").get("mem_allocator", "?"))


def server_executable(client: Any) -> str | None:
    """The binary's path as the server reports it (INFO server), or None if it does not."""
    found = client.info("server").get("executable")
    return str(found) if found else None


def no_retry() -> Retry:
    # redis-py retries a refused connection with backoff for seconds; a
    # readiness poll or a reachability check wants the first answer.
    return Retry(NoBackoff(), 0)
