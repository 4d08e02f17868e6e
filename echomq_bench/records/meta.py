"""The context every number carries: machine, software, commit, command,
servers. Passwords never reach it: URLs and argv pass through redaction."""

from __future__ import annotations

import datetime as dt
import os
import platform
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping

from echomq_bench.records.fingerprint import cpu_model, fingerprint
from echomq_bench.servers import redacted_args, redacted_url, server_allocator, server_executable

__all__ = ["collect", "cpu_model", "git_commit", "server_settings", "redacted_argv", "describe_server", "build_text",
           "COMMIT_LABEL_ENV"]

PACKAGES = ("echomq-bench", "redis", "hiredis", "locust", "numpy", "pandas", "hdrhistogram",
            "pytest-benchmark", "matplotlib")
# Names the run's revision in the results history in place of its commit,
# for a measurement script that stands in for commits it cannot make
# (docs/measurements/scripts/history_step.py). The real commit is still
# recorded beside it; the label is kept as a label, never as a commit.
COMMIT_LABEL_ENV = "ECHOMQ_COMMIT_LABEL"
SETTINGS = ("io-threads", "appendonly", "appendfsync", "save", "maxmemory", "maxmemory-policy",
            "lua-time-limit", "busy-reply-threshold", "hz")


def git_commit() -> dict[str, Any]:
    """The checkout's commit and whether its tracked files differ from it;
    with ECHOMQ_COMMIT_LABEL set, also that label (see COMMIT_LABEL_ENV)."""
    root = Path(__file__).resolve().parent.parent
    label = os.environ.get(COMMIT_LABEL_ENV) or None
    extra = {"label": label} if label else {}
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, **extra}
    return {"commit": sha or None, "dirty": dirty if sha else None, **extra}


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def server_settings(client: Any) -> dict[str, str]:
    """The settings that change what a benchmark measures, as the server reports them."""
    out: dict[str, str] = {}
    for name in SETTINGS:
        try:
            got = client.config_get(name)
        except Exception:  # a restricted ACL user or a managed server may refuse CONFIG
            continue
        for key, value in got.items():
            key = key.decode() if isinstance(key, bytes) else key
            out[key] = value.decode() if isinstance(value, bytes) else str(value)
    return out


def describe_server(server: Any) -> dict[str, Any]:
    """A server's entry in meta.json: its name and spec, version, allocator and
    binary (the build's identity: the allocator confounds any comparison across
    builds that link different ones), its settings, and for an embedded server
    the baseline settings it was started with and those its version lacked."""
    info: dict[str, Any] = {"name": server.name, "spec": str(server.spec) if hasattr(server, "spec") else None}
    try:
        info["version"] = server.version()
        client = server.client()
        info["allocator"] = server_allocator(client)
        # The path this process ran; a server it only reached says its own.
        info["binary"] = getattr(server, "binary", None) or server_executable(client)
        info["settings"] = server_settings(client)
        try:
            # What the run's figures can be compared across (the results history draws a line per fingerprint).
            info["fingerprint"] = fingerprint(client)
        except Exception as exc:  # a client that cannot say the version or allocator (a cluster's): named, not fatal
            info["fingerprint_error"] = type(exc).__name__
    except Exception as exc:  # recorded, not fatal: meta is context, not the measurement
        info["error"] = type(exc).__name__
    baseline = getattr(server, "baseline", None)
    if baseline is not None:
        info["baseline"] = baseline.record()
    url = getattr(server, "url", None)
    if url:
        info["url"] = redacted_url(url)
    return info


def build_text(described: Mapping[str, Any]) -> str:
    """`redis 6.2.14, malloc libc, /path/to/redis-server` from a `describe_server` entry."""
    text = f"{described.get('version', '?')}, malloc {described.get('allocator', '?')}"
    binary = described.get("binary")
    return f"{text}, {binary}" if binary else text


def redacted_argv(argv: Iterable[str]) -> list[str]:
    """argv with passwords hidden, also inside one-word server specs such as
    `--server "pw=redis-server --requirepass SECRET"`."""
    out = []
    for arg in redacted_args([redacted_url(a) for a in argv]):
        if any(c.isspace() for c in arg):
            try:
                words = shlex.split(arg)
            except ValueError:
                words = [arg]
            hidden = redacted_args(words)
            if hidden != tuple(words):
                arg = " ".join(hidden)
        out.append(arg)
    return out


def collect(servers: Iterable[Any] = (), argv: list[str] | None = None, **settings: Any) -> dict[str, Any]:
    argv = list(sys.argv if argv is None else argv)
    return {
        "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": redacted_argv(argv),
        "git": git_commit(),
        "python": sys.version.split()[0],
        "packages": _versions(),
        "machine": {
            "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "hostname": platform.node(),
        },
        "servers": [describe_server(s) for s in servers],
        "settings": settings,
    }
