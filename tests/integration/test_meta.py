"""No password from a URL is ever written: capacity and compare against
servers that need one, then every file they wrote is searched for it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.records.record import SCHEMA, read_record
from echomq_bench.servers import EmbeddedServer
from tests.integration.conftest import Login

def files_holding(folder: Path, secret: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def run_cli(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> int:
    # As the console script sees it: the command line meta.json records is sys.argv.
    monkeypatch.setattr(sys, "argv", ["echomq-bench", *argv])
    return main(argv)


def test_capacity_with_an_acl_user_writes_no_password(acl_server: Login, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    url = f"redis://{acl_server.user}:{acl_server.password}@127.0.0.1:{acl_server.server.port}"
    out = tmp_path / "cap"
    code = run_cli(monkeypatch, ["capacity", "--server", url, "--duration", "0.4s", "--warmup", "100ms",
                                 "--ceiling-requests", "3000", "--audit", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    # The run really logged in: it drove cycles and the C client got its ceiling.
    entry = next(iter(json.loads((out / "summary.json").read_text())["builds"].values()))
    assert entry["cycles_per_s"] > 0 and entry["ceiling_claims_per_s"] > 0
    assert entry["audit"]["passed"]
    meta = json.loads((out / "meta.json").read_text())
    assert any(f"{acl_server.user}:***@" in arg for arg in meta["command"])
    assert meta["servers"][0]["url"].startswith(f"redis://{acl_server.user}:***@")
    assert files_holding(out, acl_server.password) == []
    assert acl_server.password not in printed.out + printed.err


@pytest.mark.parametrize("password_server", ["valkey"], indirect=True)
def test_compare_with_a_password_writes_no_password(password_server: EmbeddedServer, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    password = password_server.connection_kwargs()["password"]
    url = f"redis://:{password}@127.0.0.1:{password_server.port}/0"
    out = tmp_path / "cmp"
    code = run_cli(monkeypatch, ["compare", "--server", f"a={url}", "--server", f"b={url}", "--trials", "2",
                                 "--duration", "300ms", "--warmup", "100ms", "--no-ceiling", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["builds"]["b"]["cycles_per_s"]["median"] > 0
    meta = json.loads((out / "meta.json").read_text())
    assert any(":***@" in arg for arg in meta["command"])
    # The context travels in the record it was written with.
    record = read_record(out)
    assert record.kind == "compare" and record.schema == SCHEMA and dict(record.meta) == meta
    assert files_holding(out, password) == []
    assert password not in printed.out + printed.err


def test_a_wrong_password_fails_cleanly_without_echoing_it(acl_server: Login, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    wrong = "wrongpass123"
    url = f"redis://{acl_server.user}:{wrong}@127.0.0.1:{acl_server.server.port}"
    out = tmp_path / "cap"
    code = run_cli(monkeypatch, ["capacity", "--server", url, "--duration", "300ms", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 2
    assert wrong not in printed.out + printed.err
    assert not out.exists()
