"""Unit tests start no server and no process, and open no network
connection: a test that tries fails at once, so the tier stays fast and runs
where no redis-server, valkey-server, Chromium, Locust or Jupyter kernel
exists. A test that needs one belongs in tests/integration."""

from __future__ import annotations

import asyncio
import multiprocessing.process
import platform
import socket
import subprocess
from typing import NoReturn

import pytest

from echomq_bench.records import meta
from echomq_bench.servers.embedded import EmbeddedServer

# A record's meta names the checkout's commit, which `git` reads in a child;
# a unit test's record names this one instead.
UNIT_COMMIT = {"commit": "0" * 40, "dirty": False}

# Where /proc/cpuinfo names no model, a record's cpu_model falls back on
# platform.processor(), which asks `uname -p` once per process and keeps the
# answer: ask it here, before any test's guard is on.
platform.processor()


_connect = socket.socket.connect


def _refuse(what: str) -> NoReturn:
    pytest.fail(f"a unit test {what}; tests/unit needs no process, browser, server or network: "
                "it belongs in tests/integration", pytrace=False)


@pytest.fixture(autouse=True)
def unit_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse_server(self: EmbeddedServer, port: int) -> None:
        _refuse(f"started a server ({self.spec.describe()})")

    def refuse_child(self: subprocess.Popen[bytes], args: object, *rest: object, **kwargs: object) -> None:
        # Every Popen (run, check_output, asyncio's transports, nbclient's
        # kernel, a browser's launch) forks through _execute_child.
        _refuse(f"started a process ({args!r})")

    def refuse_worker(self: multiprocessing.process.BaseProcess) -> None:
        _refuse(f"started a multiprocessing process ({self.name})")

    async def refuse_async_child(program: object, *args: object, **kwargs: object) -> NoReturn:
        _refuse(f"started a process through asyncio ({program!r})")

    def refuse_network(self: socket.socket, address: object) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _refuse(f"connected to {address!r}")
        _connect(self, address)   # a Unix socket stays on this machine

    monkeypatch.setattr(EmbeddedServer, "_launch", refuse_server)
    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse_child)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse_worker)
    monkeypatch.setattr(asyncio, "create_subprocess_exec", refuse_async_child)
    monkeypatch.setattr(asyncio.subprocess, "create_subprocess_exec", refuse_async_child)
    monkeypatch.setattr(socket.socket, "connect", refuse_network)
    monkeypatch.setattr(meta, "git_commit", lambda: dict(UNIT_COMMIT))
