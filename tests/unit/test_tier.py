"""The unit tier holds itself to what it is: a test that starts a process,
a server or a network connection fails at once, naming the tier."""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import subprocess
import sys

import pytest

from echomq_bench.servers import start

REFUSED = "tests/unit needs no process, browser, server or network: it belongs in tests/integration"


def test_a_child_process_is_refused() -> None:
    with pytest.raises(pytest.fail.Exception, match=REFUSED):
        subprocess.run(["true"], check=False)


def test_a_multiprocessing_worker_is_refused() -> None:
    with pytest.raises(pytest.fail.Exception, match=REFUSED):
        multiprocessing.get_context("spawn").Process(target=print).start()


def test_an_asyncio_child_is_refused() -> None:
    with pytest.raises(pytest.fail.Exception, match=REFUSED):
        asyncio.run(asyncio.create_subprocess_exec("true"))


def test_a_server_is_refused() -> None:
    # A binary every machine has: whether it is asked its version or launched, it never runs.
    with pytest.raises(pytest.fail.Exception, match=REFUSED):
        start(f"any={sys.executable}")


def test_a_tcp_connection_is_refused_and_a_unix_socket_pair_is_not() -> None:
    with socket.socket() as s, pytest.raises(pytest.fail.Exception, match=REFUSED):
        s.connect(("127.0.0.1", 9))
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"x")
        assert b.recv(1) == b"x"
