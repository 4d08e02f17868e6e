"""setup.sh's decisions, without installing anything: `bash setup.sh plan
MODE` prints the Debian packages it would ask apt for, one per missing
command, for a PATH the test builds from stubs. Node and npm from another
source are left alone, a venv's bin never counts as the system having a
server, and an old Node is refused before apt runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASH = "/bin/bash"
SERVERS = ["main redis-server", "main redis-tools", "backports valkey-server", "backports valkey-tools"]


def stub(folder: Path, name: str, prints: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{prints}'\n")
    path.chmod(0o755)


def plan(path: list[Path], mode: str = "test", **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PATH")}
    return subprocess.run([BASH, str(ROOT / "setup.sh"), "plan", mode], capture_output=True, text=True,
                          env={**clean, "PATH": os.pathsep.join(map(str, path)), **env}, timeout=30)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A folder with only a python3 that has venv and ensurepip."""
    folder = tmp_path / "base"
    folder.mkdir()
    (folder / "python3").symlink_to(sys.executable)
    return folder


def test_node_from_elsewhere_is_left_alone(tmp_path: Path, base: Path) -> None:
    # NodeSource's nodejs ships npm; Debian's npm conflicts with it.
    other = tmp_path / "nodesource"
    stub(other, "node", "v20.20.2")
    stub(other, "npm", "11.19.1")
    done = plan([base, other])
    assert (done.returncode, done.stdout.splitlines()) == (0, SERVERS + ["main chromium", "main valgrind"])


def test_no_node_asks_for_debians_node_and_npm(base: Path) -> None:
    done = plan([base])
    assert (done.returncode, done.stdout.splitlines()) == (
        0, SERVERS + ["main chromium", "main valgrind", "main nodejs", "main npm"])


def test_run_needs_no_browser(tmp_path: Path, base: Path) -> None:
    stub(tmp_path / "node", "node", "v18.19.0")
    stub(tmp_path / "node", "npm", "9.2.0")
    done = plan([base, tmp_path / "node"], mode="run")
    assert (done.returncode, done.stdout.splitlines()) == (0, SERVERS + ["main valgrind"])


def test_a_venv_server_does_not_count_as_the_systems(tmp_path: Path, base: Path) -> None:
    venv = tmp_path / "venv"
    stub(venv / "bin", "redis-server", "Redis server v=6.2.14 malloc=libc")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    stub(tmp_path / "node", "node", "v20.1.0")
    stub(tmp_path / "node", "npm", "10.0.0")
    activated = plan([venv / "bin", base, tmp_path / "node"], VIRTUAL_ENV=str(venv))
    assert activated.stdout.splitlines() == SERVERS + ["main chromium", "main valgrind"]
    # A venv is known by its pyvenv.cfg too, without VIRTUAL_ENV.
    assert plan([venv / "bin", base, tmp_path / "node"]).stdout == activated.stdout


def test_everything_present_asks_for_nothing(tmp_path: Path, base: Path) -> None:
    have = tmp_path / "have"
    for name in ("redis-server", "redis-benchmark", "valkey-server", "valkey-benchmark", "chromium",
                 "callgrind_control", "npm"):
        stub(have, name)
    stub(have, "node", "v22.3.0")
    done = plan([base, have])
    assert (done.returncode, done.stdout) == (0, "")


def test_an_old_node_is_refused_before_apt(tmp_path: Path, base: Path) -> None:
    stub(tmp_path / "old", "node", "v16.20.2")
    stub(tmp_path / "old", "npm", "8.19.4")
    done = plan([base, tmp_path / "old"])
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "setup.sh: node v16.20.2 is older than 18, which BullMQ needs; install Node 18 or newer, "
        "or remove it so that setup installs Debian's")


def test_an_unknown_mode_changes_nothing(tmp_path: Path) -> None:
    done = subprocess.run([BASH, str(ROOT / "setup.sh"), "tset"], capture_output=True, text=True, timeout=30,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "setup.sh: unknown mode 'tset' (want: run, test, plan, or nothing)"
    assert list(tmp_path.iterdir()) == []
