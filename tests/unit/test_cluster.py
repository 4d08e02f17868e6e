"""Redis Cluster and Valkey Cluster without a node: SPECs, the slot split,
and refusals that come before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.servers import ServerSpecError, parse_server_spec, slot_ranges


# --------------------------------------------------------------------------
# SPECs


@pytest.mark.parametrize(
    ("text", "name", "binary", "args", "url"),
    [
        ("redis-cluster", "redis-cluster", "redis-server", (), None),
        ("valkey-cluster", "valkey-cluster", "valkey-server", (), None),
        ("rc=redis-cluster --replicas 1", "rc", "redis-server", ("--replicas", "1"), None),
        ("vc=valkey-cluster --masters 1 --io-threads 2", "vc", "valkey-server",
         ("--masters", "1", "--io-threads", "2"), None),
        ("redis+cluster://127.0.0.1:7000", "127.0.0.1:7000", None, (), "redis+cluster://127.0.0.1:7000"),
        ("prod=rediss+cluster://u:pw@h:7000", "prod", None, (), "rediss+cluster://u:pw@h:7000"),
    ],
)
def test_cluster_specs_parse_and_print_back(text: str, name: str, binary: str | None,
                                            args: tuple[str, ...], url: str | None) -> None:
    spec = parse_server_spec(text)
    assert (spec.name, spec.kind, spec.binary, spec.args, spec.url) == (name, "cluster", binary, args, url)
    assert "pw" not in spec.describe() and "pw" not in repr(spec)
    if "pw" not in text:  # a hidden password cannot print back
        assert parse_server_spec(spec.describe()) == spec


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("x=redis-cluster --masters 0", "--masters must be an integer from 1 to 16"),
        ("x=redis-cluster --replicas 3", "--replicas must be an integer from 0 to 2"),
        ("x=redis-cluster --replicas", "--replicas needs a value"),
        ("x=valkey-cluster --cluster-port 7001", "--cluster-port is set by the cluster launcher"),
        ("x=valkey-cluster --port 7001", "--port is set by the launcher"),
        ("redis+cluster://h:7000/2", "a cluster has only database 0"),
    ],
)
def test_bad_cluster_specs_say_why(text: str, why: str) -> None:
    with pytest.raises(ServerSpecError, match=why):
        parse_server_spec(text)


def test_slot_ranges_cover_every_slot_once() -> None:
    for masters in (1, 2, 3, 5, 16):
        ranges = slot_ranges(masters)
        assert ranges[0][0] == 0 and ranges[-1][1] == 16383
        assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:]))
    assert slot_ranges(3) == [(0, 5460), (5461, 10922), (10923, 16383)]  # as redis-cli assigns them


@pytest.mark.parametrize(("argv", "fragment"), [
    (["capacity", "--server", "valkey-cluster", "--queues", "0"], "queues must be >= 1"),
    (["compare", "--server", "redis-cluster", "--server", "valkey-cluster"], "a main thread per node"),
])
def test_capacity_bad_input_on_a_cluster_starts_nothing(argv: list[str], fragment: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import echomq_bench.servers

    started: list[object] = []
    monkeypatch.setattr(echomq_bench.servers, "start", lambda *a, **k: started.append(a))
    monkeypatch.setattr(echomq_bench.servers.EmbeddedServer, "__init__", lambda *a, **k: started.append(a))
    out = tmp_path / "cap"
    assert main([*argv, "--duration", "300ms", "--out", str(out)]) == 2
    assert fragment in capsys.readouterr().err
    assert not out.exists() and started == []
