"""A server that already runs somewhere, reached by `redis://` or `rediss://`
(TLS: see `echomq_bench.servers.tls` for a throwaway one): the `Server`
interface without process control.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.connection import SSLConnection, parse_url

from echomq_bench.servers.base import OneServer, no_retry
from echomq_bench.servers.errors import ServerError, ServerSpecError, ServerStartError
from echomq_bench.servers.spec import DEFAULT_URL_PORT, ServerSpec, redacted_url

__all__ = ["UrlServer", "url_connection_kwargs"]

URL_CHECK_TIMEOUT_SECONDS = 5.0


def url_connection_kwargs(url: str) -> dict[str, Any]:
    """`redis.Redis(**kwargs)` arguments for `url`, as redis-py reads it
    (credentials, db and TLS query options included), with `ssl=True` for
    rediss:// in place of redis-py's connection class."""
    # redis-py leaves parse_url unannotated; it answers a plain dict.
    kwargs: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
    if kwargs.pop("connection_class", None) is SSLConnection:
        kwargs["ssl"] = True
    kwargs.setdefault("port", DEFAULT_URL_PORT)
    kwargs.setdefault("db", 0)
    return kwargs


class UrlServer(OneServer):
    """A server that already runs somewhere: the `Server` interface without
    process control. Its credentials are the URL's own."""

    def __init__(self, spec: ServerSpec) -> None:
        if spec.kind != "url" or spec.url is None:
            raise ServerSpecError(f"{spec!r} is not a URL server spec")
        parts = urlsplit(spec.url)
        self.spec = spec
        self.name = spec.name
        self.url = spec.url
        self.host = parts.hostname or ""
        self.port = parts.port or DEFAULT_URL_PORT
        self.pid: int | None = None
        self.dir: Path | None = None
        self.running = True

    @property
    def display_url(self) -> str:
        return redacted_url(self.url)

    def connection_kwargs(self) -> dict[str, Any]:
        """host, port, db, credentials and TLS options from the URL. Never print it."""
        return url_connection_kwargs(self.url)

    def connection_url(self) -> str:
        """The URL itself, credentials included. Never print it."""
        return self.url

    def client(self, **kwargs: Any) -> redis.Redis:
        options: dict[str, Any] = {"socket_connect_timeout": 5, "decode_responses": False}
        options.update(kwargs)
        return redis.Redis.from_url(self.url, **options)

    def check(self, timeout: float = URL_CHECK_TIMEOUT_SECONDS) -> None:
        """Raise ServerStartError unless the server answers PING."""
        try:
            with self.client(
                socket_connect_timeout=timeout, socket_timeout=timeout, retry=no_retry()
            ) as client:
                client.ping()
        except (redis.RedisError, OSError) as exc:
            reason = redacted_url(f"{type(exc).__name__}: {exc}")
            raise ServerStartError(
                f"server {self.name!r} at {self.display_url} does not answer: {reason}"
            ) from None

    def stop(self) -> None:
        """Nothing to stop: this process did not start the server."""

    def restart(self, extra_args: tuple[str, ...] = ()) -> None:
        raise ServerError(f"server {self.name!r} runs elsewhere; only embedded servers restart")

    def __enter__(self) -> UrlServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"UrlServer(name={self.name!r}, url={self.display_url!r})"


