"""echomq_bench.servers on real servers: the Server interface of every
kind, and embedded servers that must never outlive the process
that started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq_bench.servers import embedded as embedded_module
from echomq_bench.servers import (
    DEFAULT_SPECS,
    EmbeddedServer,
    Server,
    ServerError,
    ServerStartError,
    UrlServer,
    guard,
    keeper_pid,
    running,
    start,
)
from tests.helpers import ROOT, alive, no_retry_client, wait_until

EXPECTED_VERSION = {"redis": "redis 7", "valkey": "valkey 8"}


# --------------------------------------------------------------------------
# Embedded servers


def test_embedded_answers_on_loopback_without_persistence(server: EmbeddedServer) -> None:
    client = server.client()
    assert client.ping() is True
    assert server.version().startswith(EXPECTED_VERSION[server.name])
    assert client.config_get("bind") == {"bind": "127.0.0.1"}
    assert client.config_get("save") == {"save": ""}
    assert client.config_get("appendonly") == {"appendonly": "no"}
    assert client.info("server")["process_id"] == server.pid
    assert server.url == f"redis://127.0.0.1:{server.port}"
    assert server.dir.parent == Path(tempfile.gettempdir())
    assert server.dir.name.startswith("echomq-server-")
    assert (server.dir / "server.log").is_file()
    assert client.get("missing") is None and client.set("k", "v") and client.get("k") == b"v"
    client.close()


def test_extra_args_pass_through() -> None:
    with start("small=valkey-server --maxmemory 10mb --maxmemory-policy allkeys-lru") as server:
        client = server.client(decode_responses=True)
        assert client.config_get("maxmemory") == {"maxmemory": "10485760"}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "allkeys-lru"}
        assert server.name == "small"
        client.close()


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


def test_url_server(server: EmbeddedServer) -> None:
    remote = start(f"named={server.url}/0")
    assert isinstance(remote, UrlServer)
    assert (remote.name, remote.host, remote.port, remote.pid) == ("named", "127.0.0.1", server.port, None)
    assert remote.client().ping() is True
    assert remote.version() == server.version()
    remote.stop()
    assert server.client().ping() is True
    with pytest.raises(ServerError):
        remote.restart()


# --------------------------------------------------------------------------
# One interface for every kind


@pytest.mark.parametrize("password_server", DEFAULT_SPECS, indirect=True)
def test_embedded_and_url_servers_are_servers_whose_credentials_log_in(password_server: EmbeddedServer) -> None:
    server = password_server
    password = server.connection_kwargs()["password"]
    build = server.spec.binary.removesuffix("-server")  # type: ignore[union-attr]
    remote = start(f"remote=redis://:{password}@127.0.0.1:{server.port}/0")
    assert isinstance(remote, UrlServer)
    assert server.client().ping() is True  # the accessor logs in by itself
    for kind in (server, remote):
        assert isinstance(kind, Server)
        kwargs = kind.connection_kwargs()
        assert (kwargs["host"], kwargs["port"], kwargs["password"]) == ("127.0.0.1", server.port, password)
        with no_retry_client(**kwargs) as logged_in:
            assert logged_in.ping() is True
        with redis.Redis.from_url(kind.connection_url(), retry=Retry(NoBackoff(), 0)) as by_url:
            assert by_url.ping() is True
        assert kind.version().startswith(EXPECTED_VERSION[build])
        for shown in (repr(kind), kind.describe(), kind.display_url, str(kind.spec)):
            assert password not in shown, shown
    assert server.display_url == f"redis://127.0.0.1:{server.port}"
    assert remote.display_url == f"redis://:***@127.0.0.1:{server.port}/0"
    assert remote.connection_kwargs()["db"] == 0 and remote.pid is None and remote.running
    assert server.pid is not None and server.running and password not in server.url
    # Without the accessor's password the server refuses: the check can fail.
    with pytest.raises(redis.AuthenticationError), no_retry_client(host="127.0.0.1", port=server.port) as anon:
        anon.ping()
    assert server.option("--maxmemory-policy") == "noeviction"
    assert password not in " ".join(server.args) and "***" in server.args
    with pytest.raises(ServerError, match="connection_kwargs"):
        server.option("--requirepass")


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


def test_unreachable_url_fails_without_password() -> None:
    with pytest.raises(ServerStartError) as caught:
        start("redis://user:secret@127.0.0.1:1/0")
    assert "secret" not in str(caught.value)
    assert "127.0.0.1" in str(caught.value)
