"""echomq_bench.servers without a server: SPEC parsing, redaction, what is
and is not a Server, refusals before any start, and the package's shape."""

from __future__ import annotations

import ast

import pytest
import redis

import echomq_bench.servers
from echomq_bench.servers import (
    Server,
    ServerNotFoundError,
    ServerSpecError,
    UrlServer,
    parse_server_spec,
    redacted_url,
    start,
)
from tests.helpers import ROOT


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


def test_missing_binary_says_how_to_install() -> None:
    with pytest.raises(ServerNotFoundError, match="apt-get install redis-server"):
        start("gone=/nonexistent/redis-server")
    with pytest.raises(ServerNotFoundError) as caught:
        start("gone=no-such-valkey-server")
    assert "apt-get install -t bookworm-backports valkey-server valkey-tools" in str(caught.value)
    assert "README: Setup" in str(caught.value)


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
    assert graph["spec"] <= {"errors", "layout", "builds"}  # parsing never reaches for a server kind
    assert graph["builds"] == {"errors"}  # naming a build starts nothing
    assert graph["keeper"] == set()  # runs under `python -I -S`: standard library only
    order: list[str] = []
    remaining = {name: set(deps) for name, deps in graph.items()}
    while remaining:
        ready = sorted(name for name, deps in remaining.items() if deps <= set(order))
        assert ready, f"import cycle among {sorted(remaining)}"
        order += ready
        for name in ready:
            del remaining[name]
