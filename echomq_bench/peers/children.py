"""The child processes of a peers run and the line protocol they speak on stdout.

Each child is one producer or one consumer of one adapter, run as the
adapter's command (`python -m echomq_bench.peers`, or node for BullMQ on
Node); it answers `ready`, `progress N`, `done T`, `result {...}`,
or `missing`/`error` when it cannot run.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from pathlib import Path
from typing import IO, Any, Callable

from echomq_bench.peers.base import PeerMissingError

__all__ = ["Child", "RunnerError", "pump", "SETUP_TIMEOUT_S"]

SETUP_TIMEOUT_S = 60.0
LOG_TAIL = 15


class RunnerError(RuntimeError):
    """A peer's run went wrong; the message says what and where its log is."""


class Child:
    """One child process running `command`; its stderr goes to a log file."""

    def __init__(self, config: dict[str, Any], log_path: Path, command: tuple[str, ...]) -> None:
        self.label = f"{config['peer']} ({config['mode']}) {config['role']}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env,
            cwd=os.getcwd(),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        # Kept narrowed: the selector registers and unregisters this very stream.
        self.stdout: IO[bytes] = self.proc.stdout
        self.proc.stdin.write((json.dumps(config) + "\n").encode())
        self.proc.stdin.flush()
        self._buf = b""
        self.progress = 0
        self.done_at: float | None = None
        self.result: dict[str, Any] | None = None
        self.ready = False
        self.eof = False

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        """Tell a consumer that every job has run; one that already exited needs no telling."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"stop\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def feed(self) -> list[tuple[str, str]]:
        """Read what is there; return the complete protocol lines."""
        chunk = os.read(self.stdout.fileno(), 65536)
        if not chunk:
            self.eof = True
            return []
        self._buf += chunk
        lines = []
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            word, _, rest = line.decode("utf-8", "replace").partition(" ")
            lines.append((word, rest))
        return lines

    def log_tail(self) -> str:
        self._log.flush()
        try:
            text = self.log_path.read_text(errors="replace").rstrip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-LOG_TAIL:])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is None:
                continue
            try:
                stream.close()
            except BrokenPipeError:
                # A `stop` sent to a consumer that had already exited (a burst worker done
                # first) is still buffered: closing flushes it to the closed pipe. The pipe closes all the same.
                pass
        self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.close()


def pump(children: list[Child], until: Callable[[Child], bool], timeout: float, what: str,
         tick: Callable[[], None] = lambda: None) -> None:
    """Read every child's lines until `until` holds for all of them."""
    sel = selectors.DefaultSelector()
    for child in children:
        if not until(child):
            sel.register(child.stdout, selectors.EVENT_READ, child)
    deadline = time.monotonic() + timeout
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                waiting = ", ".join(key.data.label for key in sel.get_map().values())
                raise RunnerError(f"timed out after {timeout:.0f} s waiting for {waiting} to {what}")
            for key, _ in sel.select(timeout=min(left, 0.2)):
                ready: Child = key.data
                for word, rest in ready.feed():
                    _handle(ready, word, rest)
                if ready.eof and not until(ready):
                    raise RunnerError(f"{ready.label} exited early (code {ready.proc.wait()}); "
                                      f"last lines of {ready.log_path}:\n{ready.log_tail()}")
                if until(ready):
                    sel.unregister(ready.stdout)
            tick()
    finally:
        sel.close()


def _handle(child: Child, word: str, rest: str) -> None:
    if word == "ready":
        child.ready = True
    elif word == "progress":
        child.progress = int(rest)
    elif word == "done":
        child.done_at = float(rest)
    elif word == "result":
        child.result = json.loads(rest)
    elif word == "missing":
        raise PeerMissingError(rest)
    elif word == "error":
        raise RunnerError(f"{child.label} failed: {rest}\nlast lines of {child.log_path}:\n{child.log_tail()}")

