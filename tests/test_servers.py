"""echomq_bench.servers: SPEC parsing, redaction, the Server interface of
every kind, and real embedded servers that must never outlive the process
that started them."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

import echomq_bench.servers
from echomq_bench.servers import embedded as embedded_module
from echomq_bench.servers import (
    DEFAULT_SPECS,
    EmbeddedServer,
    Server,
    ServerError,
    ServerNotFoundError,
    ServerSpecError,
    ServerStartError,
    UrlServer,
    guard,
    keeper_pid,
    parse_server_spec,
    redacted_url,
    running,
    start,
)

ROOT = Path(__file__).resolve().parents[1]
EXPECTED_VERSION = {"redis": "redis 7", "valkey": "valkey 8"}


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie waiting for its reaper counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def wait_until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture(scope="module", params=DEFAULT_SPECS)
def embedded(request: pytest.FixtureRequest) -> Iterator[EmbeddedServer]:
    server = start(request.param)
    assert isinstance(server, EmbeddedServer)
    yield server
    server.stop()


# --------------------------------------------------------------------------
# Parsing


@pytest.mark.parametrize(
    ("text", "name", "binary", "args"),
    [
        ("redis", "redis", "redis-server", ()),
        ("valkey", "valkey", "valkey-server", ()),
        (" valkey ", "valkey", "valkey-server", ()),
        ("valkey-io2=valkey-server --io-threads 2", "valkey-io2", "valkey-server", ("--io-threads", "2")),
        ("aof=redis-server --appendonly yes", "aof", "redis-server", ("--appendonly", "yes")),
        ("x.y_z=/usr/bin/redis-server --save ''", "x.y_z", "/usr/bin/redis-server", ("--save", "")),
        ("fast=valkey --io-threads 2", "fast", "valkey-server", ("--io-threads", "2")),
    ],
)
def test_parse_embedded(text: str, name: str, binary: str, args: tuple[str, ...]) -> None:
    spec = parse_server_spec(text)
    assert (spec.name, spec.kind, spec.binary, spec.args, spec.url) == (name, "embedded", binary, args, None)
    assert parse_server_spec(spec.describe()) == spec


@pytest.mark.parametrize(
    ("text", "name", "url"),
    [
        ("redis://127.0.0.1:6380/0", "127.0.0.1:6380", "redis://127.0.0.1:6380/0"),
        ("rediss://cache.internal:6390", "cache.internal:6390", "rediss://cache.internal:6390"),
        ("redis://localhost", "localhost:6379", "redis://localhost"),
        ("redis://[::1]:7000", "[::1]:7000", "redis://[::1]:7000"),
        ("prod=redis://u:p@10.0.0.1:7000/1", "prod", "redis://u:p@10.0.0.1:7000/1"),
    ],
)
def test_parse_url(text: str, name: str, url: str) -> None:
    spec = parse_server_spec(text)
    assert (spec.name, spec.kind, spec.binary, spec.args, spec.url) == (name, "url", None, (), url)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "memcached",
        "bad name=redis-server",
        "x" * 41 + "=redis-server",
        "x=",
        "x=   ",
        "=redis-server",
        "http://127.0.0.1:6379",
        "x=http://127.0.0.1:6379",
        "valkey://127.0.0.1:6379",
        "redis://",
        "redis://127.0.0.1:notaport",
        "redis://127.0.0.1:0",
        "redis://127.0.0.1:6379/abc",
        "x=redis-server 'unbalanced",
        "x=redis-server --port 7000",
    ],
)
def test_bad_spec_names_input_and_forms(text: str) -> None:
    with pytest.raises(ServerSpecError) as caught:
        parse_server_spec(text)
    message = str(caught.value)
    assert repr(text) in message
    assert "Accepted forms" in message and "NAME=BINARY" in message and "redis://" in message
    assert isinstance(caught.value, ValueError)


# --------------------------------------------------------------------------
# Redaction


def test_redacted_url() -> None:
    assert redacted_url("redis://user:secret@127.0.0.1:1/0") == "redis://user:***@127.0.0.1:1/0"
    assert redacted_url("redis://:secret@h:1") == "redis://:***@h:1"
    assert redacted_url("redis://u:sec@ret@h:1/0") == "redis://u:***@h:1/0"
    assert redacted_url("redis://h:1/0?password=secret&db=1") == "redis://h:1/0?password=***&db=1"
    assert redacted_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_spec_never_shows_password() -> None:
    spec = parse_server_spec("redis://user:secret@127.0.0.1:1/0")
    named = parse_server_spec("prod=rediss://user:secret@127.0.0.1:1/0")
    auth = parse_server_spec("auth=redis-server --requirepass secret --user bob on >secret")
    for shown in (repr(spec), str(spec), spec.describe(), repr(named), named.describe(), repr(auth), auth.describe()):
        assert "secret" not in shown
    assert spec.url == "redis://user:secret@127.0.0.1:1/0"  # still usable to connect
    assert repr(UrlServer(spec)).count("***") == 1


def test_bad_spec_message_never_shows_password() -> None:
    for text in ("http://user:secret@127.0.0.1:1", "bad name=redis://user:secret@127.0.0.1:1"):
        with pytest.raises(ServerSpecError) as caught:
            parse_server_spec(text)
        assert "secret" not in str(caught.value)
        assert "***" in str(caught.value)


def test_unreachable_url_fails_without_password() -> None:
    with pytest.raises(ServerStartError) as caught:
        start("redis://user:secret@127.0.0.1:1/0")
    assert "secret" not in str(caught.value)
    assert "127.0.0.1" in str(caught.value)


# --------------------------------------------------------------------------
# Embedded servers


def test_embedded_answers_on_loopback_without_persistence(embedded: EmbeddedServer) -> None:
    client = embedded.client()
    assert client.ping() is True
    assert embedded.version().startswith(EXPECTED_VERSION[embedded.name])
    assert client.config_get("bind") == {"bind": "127.0.0.1"}
    assert client.config_get("save") == {"save": ""}
    assert client.config_get("appendonly") == {"appendonly": "no"}
    assert client.info("server")["process_id"] == embedded.pid
    assert embedded.url == f"redis://127.0.0.1:{embedded.port}"
    assert embedded.dir.parent == Path(tempfile.gettempdir())
    assert embedded.dir.name.startswith("echomq-server-")
    assert (embedded.dir / "server.log").is_file()
    assert client.get("missing") is None and client.set("k", "v") and client.get("k") == b"v"
    client.close()


def test_extra_args_pass_through() -> None:
    with start("small=valkey-server --maxmemory 10mb --maxmemory-policy allkeys-lru") as server:
        client = server.client(decode_responses=True)
        assert client.config_get("maxmemory") == {"maxmemory": "10485760"}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "allkeys-lru"}
        assert server.name == "small"
        client.close()


def test_requirepass_server_starts_and_client_authenticates() -> None:
    with start("auth=redis-server --requirepass s3cret") as server:
        assert server.client().ping() is True
        with pytest.raises(redis.AuthenticationError):
            server.client(password=None, retry=Retry(NoBackoff(), 0)).ping()
        assert "s3cret" not in repr(server) + server.describe()


def test_missing_binary_says_how_to_install() -> None:
    with pytest.raises(ServerNotFoundError, match="apt-get install redis-server"):
        start("gone=/nonexistent/redis-server")
    with pytest.raises(ServerNotFoundError) as caught:
        start("gone=no-such-valkey-server")
    assert "apt-get install -t bookworm-backports valkey-server valkey-tools" in str(caught.value)
    assert "README: Setup" in str(caught.value)


def test_failed_start_shows_log_and_cleans_up(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def recording_mkdtemp(**kwargs: str) -> str:
        made.append(real_mkdtemp(**kwargs))
        return made[-1]

    monkeypatch.setattr(embedded_module.tempfile, "mkdtemp", recording_mkdtemp)
    with pytest.raises(ServerStartError) as caught:
        start("broken=redis-server --no-such-directive 1")
    assert "Bad directive" in str(caught.value)  # from the server's own output
    assert made and not Path(made[0]).exists()


def test_stop_leaves_no_process_and_no_dir() -> None:
    server = start("valkey")
    assert isinstance(server, EmbeddedServer)
    pid, path = server.pid, server.dir
    assert pid is not None and alive(pid) and path.is_dir()
    server.stop()
    assert not alive(pid)
    assert not path.exists()
    assert server.pid is None and not server.running
    server.stop()  # twice is fine


def test_restart_keeps_port_and_aof_data() -> None:
    with start("aof=redis-server --appendonly yes") as server:
        port, pid = server.port, server.pid
        server.client().set("kept", "yes")
        server.restart()
        assert (server.port, server.dir.is_dir()) == (port, True)
        assert server.pid != pid and not alive(pid or 0)
        assert server.client().get("kept") == b"yes"


def test_restart_without_aof_loses_data_and_takes_extra_args() -> None:
    with start("redis") as server:
        port = server.port
        server.client().set("lost", "yes")
        server.restart(("--maxmemory", "20mb"))
        assert server.port == port
        client = server.client()
        assert client.get("lost") is None
        assert client.config_get("maxmemory") == {"maxmemory": "20971520"}
        client.close()


def test_restart_after_crash() -> None:
    with start("redis") as server:
        os.kill(server.pid or 0, signal.SIGKILL)
        server.restart()
        assert server.client().ping() is True


def test_running_stops_everything() -> None:
    with running("redis", "valkey") as started:
        assert [server.name for server in started] == ["redis", "valkey"]
        assert all(server.client().ping() for server in started)
        leftovers = [(server.pid, server.dir) for server in started]
    for pid, path in leftovers:
        assert pid is not None and not alive(pid)
        assert path is not None and not path.exists()


def test_url_server(embedded: EmbeddedServer) -> None:
    server = start(f"named={embedded.url}/0")
    assert isinstance(server, UrlServer)
    assert (server.name, server.host, server.port, server.pid) == ("named", "127.0.0.1", embedded.port, None)
    assert server.client().ping() is True
    assert server.version() == embedded.version()
    server.stop()
    assert embedded.client().ping() is True
    with pytest.raises(ServerError):
        server.restart()


# --------------------------------------------------------------------------
# One interface for every kind


def no_retry_client(**kwargs: object) -> redis.Redis:
    return redis.Redis(socket_connect_timeout=2, retry=Retry(NoBackoff(), 0), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("binary", ["redis-server", "valkey-server"])
def test_embedded_and_url_servers_are_servers_whose_credentials_log_in(binary: str) -> None:
    password = "pw-" + os.urandom(6).hex()
    with start(f"locked={binary} --requirepass {password} --maxmemory 20mb") as server:
        remote = start(f"remote=redis://:{password}@127.0.0.1:{server.port}/0")
        assert isinstance(server, EmbeddedServer) and isinstance(remote, UrlServer)
        for kind in (server, remote):
            assert isinstance(kind, Server)
            kwargs = kind.connection_kwargs()
            assert (kwargs["host"], kwargs["port"], kwargs["password"]) == ("127.0.0.1", server.port, password)
            with no_retry_client(**kwargs) as logged_in:
                assert logged_in.ping() is True
            with redis.Redis.from_url(kind.connection_url(), retry=Retry(NoBackoff(), 0)) as by_url:
                assert by_url.ping() is True
            assert kind.version().startswith(EXPECTED_VERSION[binary.removesuffix("-server")])
            for shown in (repr(kind), kind.describe(), kind.display_url, str(kind.spec)):
                assert password not in shown, shown
        assert server.display_url == f"redis://127.0.0.1:{server.port}"
        assert remote.display_url == f"redis://:***@127.0.0.1:{server.port}/0"
        assert remote.connection_kwargs()["db"] == 0 and remote.pid is None and remote.running
        assert server.pid is not None and server.running and password not in server.url
        # Without the accessor's password the server refuses: the check can fail.
        with pytest.raises(redis.AuthenticationError), no_retry_client(host="127.0.0.1", port=server.port) as anon:
            anon.ping()
        assert server.option("--maxmemory") == "20mb"
        assert password not in " ".join(server.args) and "***" in server.args
        with pytest.raises(ServerError, match="connection_kwargs"):
            server.option("--requirepass")


def test_what_is_not_a_server_fails_the_protocol() -> None:
    assert not isinstance(object(), Server)
    assert not isinstance(parse_server_spec("redis"), Server)
    assert not isinstance(redis.Redis(), Server)


def test_package_exports_exactly_its_public_api() -> None:
    exported = set(echomq_bench.servers.__all__)
    assert len(exported) == len(echomq_bench.servers.__all__)
    assert all(not name.startswith("_") for name in exported)
    assert all(hasattr(echomq_bench.servers, name) for name in exported)
    public = {
        name for name, value in vars(echomq_bench.servers).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("echomq_bench.servers")
        and not isinstance(value, type(echomq_bench.servers))
    }
    assert public <= exported, public - exported


def servers_import_graph() -> dict[str, set[str]]:
    """Which module of echomq_bench.servers imports which, read from the source
    (imports inside functions included: a lazy import still makes a cycle)."""
    package = ROOT / "echomq_bench" / "servers"
    modules = {path.stem for path in package.glob("*.py")} - {"__init__"}
    graph: dict[str, set[str]] = {}
    for name in modules:
        found: set[str] = set()
        for node in ast.walk(ast.parse((package / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("echomq_bench.servers"):
                rest = (node.module or "").removeprefix("echomq_bench.servers").lstrip(".")
                found |= {rest.split(".")[0]} if rest else {alias.name for alias in node.names} & modules
            elif isinstance(node, ast.Import):
                found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("echomq_bench.servers.")}
        graph[name] = found - {name}
    return graph


def test_servers_modules_import_each_other_without_a_cycle() -> None:
    graph = servers_import_graph()
    assert graph["spec"] <= {"errors", "layout"}  # parsing never reaches for a server kind
    assert graph["keeper"] == set()  # runs under `python -I -S`: standard library only
    order: list[str] = []
    remaining = {name: set(deps) for name, deps in graph.items()}
    while remaining:
        ready = sorted(name for name, deps in remaining.items() if deps <= set(order))
        assert ready, f"import cycle among {sorted(remaining)}"
        order += ready
        for name in ready:
            del remaining[name]


# --------------------------------------------------------------------------
# Nothing outlives its owner


def test_keeper_is_replaced_when_it_dies() -> None:
    with start("redis"):
        first = keeper_pid()
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert wait_until(lambda: guard.current().keeper is not None and guard.current().keeper.poll() is not None, 5)
        with start("redis"):
            second = keeper_pid()
            assert second is not None and second != first and alive(second)


def test_fork_child_gets_its_own_keeper() -> None:
    with start("redis") as server:
        parent_keeper = keeper_pid()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            code = 9
            try:
                code = 1 if keeper_pid() is not None else 0
                server.stop()  # not the child's to stop
                with start("redis"):
                    if keeper_pid() in (None, parent_keeper):
                        code = 2
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert server.client().ping() is True
        assert keeper_pid() == parent_keeper and parent_keeper is not None and alive(parent_keeper)


CRASHING_PARENT = textwrap.dedent(
    """
    import os, sys, time
    from echomq_bench.servers import keeper_pid, start

    server = start("redis")
    # A fork child that outlives us must not keep our keeper waiting.
    child = os.fork()
    if child == 0:
        time.sleep(30)
        os._exit(0)
    print(server.pid, keeper_pid(), child, server.dir, flush=True)
    time.sleep(60)
    """
)


def test_sigkill_of_parent_leaves_nothing_behind() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", CRASHING_PARENT],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    forked = 0
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline().strip()
        server_pid, keeper, forked, path = line.split(" ", 3)
        assert alive(int(server_pid)) and Path(path).is_dir()
        parent.kill()
        parent.wait()
        assert wait_until(lambda: not alive(int(server_pid)) and not Path(path).exists(), 5)
        assert wait_until(lambda: not alive(int(keeper)), 2)
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        if int(forked) and alive(int(forked)):
            os.kill(int(forked), signal.SIGKILL)
