"""What this process must clean up, however it ends.

Each process that starts embedded servers also starts one small keeper
(`echomq_bench.servers.keeper`), which holds the read end of a pipe whose
write end only this process holds. The kernel closes that pipe when this
process dies, even by SIGKILL, and the keeper then kills the servers it was
told about and removes their dirs. A clean exit stops them here first.

`current()` is this process's `Guard`; a fork child gets a fresh one, so it
never stops its parent's servers nor keeps the parent's keeper waiting.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from echomq_bench.servers.keeper import process_start_time

__all__ = ["Guard", "current", "stop_all", "keeper_pid"]

STOP_TIMEOUT_SECONDS = 5.0
KEEPER_SCRIPT = Path(__file__).with_name("keeper.py")


class Owned(Protocol):
    """A server the guard stops at exit."""

    name: str

    def stop(self) -> None: ...


class Guard:
    """What this process must clean up at exit, mirrored to its keeper.

    The pids and dirs held here are the truth; the keeper gets a copy so it
    can act when this process cannot. If the keeper dies, the next message
    starts a new one and replays the whole copy.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.owner = os.getpid()
        self.servers: dict[int, Owned] = {}
        self.pids: dict[int, int | None] = {}
        self.dirs: set[str] = set()
        self.keeper: subprocess.Popen[bytes] | None = None
        self.pipe: int | None = None
        self.keeper_failed = False

    def track(self, server: Owned) -> None:
        with self.lock:
            self.servers[id(server)] = server

    def untrack(self, server: Owned) -> None:
        with self.lock:
            self.servers.pop(id(server), None)

    def own_pid(self, pid: int) -> None:
        with self.lock:
            self.pids[pid] = process_start_time(pid)
            self._send({"op": "add_pid", "pid": pid, "start": self.pids[pid]})

    def drop_pid(self, pid: int) -> None:
        with self.lock:
            if pid in self.pids:
                del self.pids[pid]
                self._send({"op": "drop_pid", "pid": pid})

    def own_dir(self, path: Path) -> None:
        with self.lock:
            self.dirs.add(str(path))
            self._send({"op": "add_dir", "path": str(path)})

    def drop_dir(self, path: Path) -> None:
        with self.lock:
            if str(path) in self.dirs:
                self.dirs.discard(str(path))
                self._send({"op": "drop_dir", "path": str(path)})

    def keeper_pid(self) -> int | None:
        with self.lock:
            return self.keeper.pid if self.keeper is not None else None

    def _send(self, message: Mapping[str, object]) -> None:
        """Tell the keeper; callers update self.pids/self.dirs first."""
        if self.keeper_failed:
            return
        if self.pipe is not None:
            try:
                os.write(self.pipe, _encode(message))
                return
            except OSError:
                # The keeper died (EPIPE); a new one gets the full state below.
                self._close_pipe()
        self._start_keeper()

    def _start_keeper(self) -> None:
        if self.keeper is not None:
            self.keeper.poll()  # reap a dead keeper
        try:
            self.keeper, self.pipe = _spawn_keeper()
        except OSError as exc:
            # Cleanup at exit still works; only a hard crash would leak.
            self.keeper_failed = True
            # stacklevel 1: the fault is here, not in whoever started a server.
            warnings.warn(f"echomq: cannot start the server keeper ({exc})", RuntimeWarning, stacklevel=1)
            return
        state = [{"op": "add_pid", "pid": pid, "start": start} for pid, start in self.pids.items()]
        state += [{"op": "add_dir", "path": path} for path in self.dirs]
        try:
            os.write(self.pipe, b"".join(_encode(message) for message in state))
        except OSError:
            self._close_pipe()  # the next message tries a new keeper

    def _close_pipe(self) -> None:
        if self.pipe is not None:
            try:
                os.close(self.pipe)
            except OSError:
                pass
            self.pipe = None

    def stop_all(self) -> None:
        """Stop every server this process started, then let the keeper go."""
        if os.getpid() != self.owner:
            return
        with self.lock:
            servers = list(self.servers.values())
        for server in servers:
            try:
                server.stop()
            except Exception as exc:  # one bad server must not keep others running
                warnings.warn(f"echomq: stopping {server.name} failed: {exc}", RuntimeWarning, stacklevel=1)
        with self.lock:
            self._close_pipe()
            keeper, self.keeper = self.keeper, None
        if keeper is not None:
            # EOF with nothing owned: the keeper exits at once; reap it.
            try:
                keeper.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                pass

    def abandon(self) -> None:
        """In a fork child: let go of the parent's keeper without touching it.

        Closing our copy of the write end matters: while a fork child holds
        it, the keeper would not see EOF when the parent dies.
        """
        self._close_pipe()


def _encode(message: Mapping[str, object]) -> bytes:
    # One short line per write: pipe writes under PIPE_BUF are atomic.
    return (json.dumps(message) + "\n").encode()


def _spawn_keeper() -> tuple[subprocess.Popen[bytes], int]:
    read_end, write_end = os.pipe()
    try:
        keeper = subprocess.Popen(
            # -I -S: the keeper needs only the standard library, and must not
            # depend on how this process found the echomq package.
            [sys.executable, "-I", "-S", str(KEEPER_SCRIPT)],
            stdin=read_end,
            # Never hold a caller's stdout/stderr pipes open past our exit.
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # close_fds keeps the write end out of the keeper, or it would
            # never see EOF.
            close_fds=True,
            start_new_session=True,
            cwd="/",
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return keeper, write_end


_guard = Guard()
# Fork children keep the parent's guard object alive here, so its Popen for
# the parent's keeper is never finalised (and never waited on) in the child.
_abandoned: list[Guard] = []


def current() -> Guard:
    """This process's guard (a fork child has its own)."""
    return _guard


def _reset_after_fork() -> None:
    global _guard
    _guard.abandon()
    _abandoned.append(_guard)
    _guard = Guard()


def stop_all() -> None:
    """Stop every server this process started (atexit does this too, but a
    host such as Locust may close its files before atexit runs)."""
    _stop_all_at_exit()


def _stop_all_at_exit() -> None:
    _guard.stop_all()


def keeper_pid() -> int | None:
    """The pid of this process's keeper, or None before it first starts a server."""
    return _guard.keeper_pid()


os.register_at_fork(after_in_child=_reset_after_fork)
atexit.register(_stop_all_at_exit)
