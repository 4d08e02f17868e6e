"""The one harness for a run's worker processes: each started, all of them
ready, one window opened for all at once, each one's result collected, and
every one of them gone when the block ends.

    with Harness(error=CapacityError) as harness:
        for plan in plans:
            harness.fork(f"driver worker {plan.index}", worker_main, plan)
        harness.ready(timeout_s=30)
        harness.go(window)                      # the same message to every child
        results = harness.results(timeout_s=120)

Children speak in words, each with a payload: `ready`, `result`, `error`,
and whatever else a protocol adds (`progress`, `done`). The parent keeps
the last payload of each word per child (`Child.heard`) and waits for a
word from every child with `wait_for`.

A forked child (`fork`) gets its end of a pipe, a `Line`, as its first
argument: it says ready, waits for the go, sends its result; an exception
that escapes it reaches the parent as `error`. A child run from a command
(`spawn`: another interpreter, or node) gets a JSON line on stdin and then
`go`/`stop` lines, and answers one `WORD payload` line each on stdout; its
stderr goes to a log whose last lines name what went wrong.

Leaving the block joins every child: a grace period when it ends normally
(they exit once they have reported), none on an exception or Ctrl-C (kill).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Mapping, Sequence

from echomq_bench.errors import MeasurementError

__all__ = ["Harness", "HarnessError", "Child", "Line", "LOG_TAIL"]

LOG_TAIL = 15
GRACE_S = 5.0


class HarnessError(MeasurementError):
    """A child did not get ready, failed, died or did not report in time; the message names it."""


class Line:
    """A forked child's end of its pipe to the parent."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def send(self, word: str, payload: Any = None) -> None:
        self.conn.send((word, payload))

    def ready(self, payload: Any = None) -> Any:
        """Say ready, and wait for the parent's go: return what it sent (the window)."""
        self.send("ready", payload)
        return self.conn.recv()

    def result(self, payload: Any) -> None:
        self.send("result", payload)


class Child:
    """One child process as the parent sees it: its label, what it has said, how it ended."""

    def __init__(self, label: str, process: Any, stream: Any, log_path: Path | None = None) -> None:
        self.label = label
        self.process = process        # a multiprocessing Process, or a subprocess Popen
        self.stream = stream          # what the parent reads: a Connection, the child's stdout, or None
        self.log_path = log_path
        self.heard: dict[str, Any] = {}
        self.eof = stream is None
        self._buf = b""

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    @property
    def forked(self) -> bool:
        return not isinstance(self.process, subprocess.Popen)

    def alive(self) -> bool:
        if self.forked:
            return bool(self.process.is_alive())
        return self.process.poll() is None

    def exit_code(self, timeout_s: float = 5.0) -> int | None:
        """How the child ended (a negative code: the signal that ended it), waiting a little for it."""
        if self.forked:
            self.process.join(timeout_s)
            return self.process.exitcode  # type: ignore[no-any-return]
        try:
            return int(self.process.wait(timeout=timeout_s))
        except subprocess.TimeoutExpired:
            return None

    def send(self, word: str, payload: Any = None) -> None:
        """A word to the child; one that has already exited needs no telling."""
        try:
            if self.forked:
                self.stream.send(payload if word == "go" else (word, payload))
            else:
                self.process.stdin.write(f"{word}\n".encode())
                self.process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the wait that follows names the child and how it ended

    def read(self) -> list[tuple[str, Any]]:
        """The words that have arrived (call when the stream is readable); [] and `eof` at its end."""
        if self.forked:
            try:
                word, payload = self.stream.recv()
            except (EOFError, OSError):
                self.eof = True
                return []
            return [(word, payload)]
        chunk = os.read(self.stream.fileno(), 65536)
        if not chunk:
            self.eof = True
            return []
        self._buf += chunk
        words = []
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            word, _, rest = line.decode("utf-8", "replace").partition(" ")
            words.append((word, rest))
        return words

    def log_tail(self) -> str:
        """The last lines of the child's stderr log (a child run from a command), or ''."""
        if self.log_path is None:
            return ""
        try:
            text = self.log_path.read_text(errors="replace").rstrip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-LOG_TAIL:])

    def ended(self) -> str:
        """How the child ended, for an error message: its exit code, and its log's last lines."""
        tail = self.log_tail()
        where = f"; last lines of {self.log_path}:\n{tail}" if tail else ""
        return f"exit code {self.exit_code()}{where}"

    def finish(self, deadline: float) -> None:
        """Wait for the child until `deadline` (monotonic), then kill it; close what the parent holds."""
        left = max(0.0, deadline - time.monotonic())
        if self.forked:
            self.process.join(left)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        else:
            try:
                self.process.wait(timeout=left)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close_streams()

    def _close_streams(self) -> None:
        streams = [self.stream] if self.forked else [self.process.stdin, self.process.stdout]
        for stream in streams:
            if stream is None:
                continue
            try:
                stream.close()
            except (BrokenPipeError, OSError):
                # A `stop` sent to a child that had already exited is still buffered:
                # closing flushes it to the closed pipe. The pipe closes all the same.
                pass


class Harness:
    """The children of one run; a context manager that leaves none behind.

    `error` builds the exception raised when a child fails (the caller's own
    error class, so the CLI ends the run with its message); `fatal` maps
    other words a child may send to the exception each means."""

    def __init__(self, error: Callable[[str], Exception] = HarnessError, *, grace_s: float = GRACE_S,
                 fatal: Mapping[str, Callable[[str], Exception]] | None = None) -> None:
        self.error = error
        self.grace_s = grace_s
        self.fatal = dict(fatal or {})
        self.children: list[Child] = []
        # fork: a child needs nothing re-imported, starts in milliseconds, and never
        # re-runs a caller's script that lacks a __main__ guard.
        self.ctx = multiprocessing.get_context("fork")

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.finish(self.children, self.grace_s if kind is None else 0.0)

    # -- starting ---------------------------------------------------------

    def fork(self, label: str, target: Callable[..., Any], *args: Any, talk: bool = True) -> Child:
        """Fork a child running `target(line, *args)`; with talk=False, `target(*args)` and no pipe."""
        if not talk:
            process = self.ctx.Process(target=target, args=args, name=label, daemon=True)
            process.start()
            return self._add(Child(label, process, None))
        parent, end = self.ctx.Pipe()
        process = self.ctx.Process(target=_forked_main, args=(end, target, args), name=label, daemon=True)
        process.start()
        end.close()
        return self._add(Child(label, process, parent))

    def _add(self, child: Child) -> Child:
        self.children.append(child)
        return child

    def spawn(self, label: str, command: Sequence[str], config: dict[str, Any], log_path: Path) -> Child:
        """Run `command` with `config` as one JSON line on its stdin (never in its argv, where a
        password would show in a process listing); its stderr goes to `log_path`."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(log_path, "wb") as log:
            process = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                       env=env, cwd=os.getcwd())
        child = Child(label, process, process.stdout, log_path)
        self.children.append(child)
        assert process.stdin is not None
        process.stdin.write((json.dumps(config) + "\n").encode())
        process.stdin.flush()
        return child

    # -- the run ----------------------------------------------------------

    def ready(self, timeout_s: float, children: Sequence[Child] | None = None) -> list[Any]:
        """Wait until every child has said ready; what each said with it."""
        return self.wait_for("ready", timeout_s, "get ready", children)

    def go(self, message: Any = None, children: Sequence[Child] | None = None) -> None:
        """Send every child the go (a forked child gets `message`, the window)."""
        for child in self.children if children is None else children:
            child.send("go", message)

    def results(self, timeout_s: float, children: Sequence[Child] | None = None,
                tick: Callable[[], None] | None = None, every_s: float = 0.2) -> list[Any]:
        """Each child's result, in the order they were started."""
        return self.wait_for("result", timeout_s, "report", children, tick, every_s)

    def wait_for(self, word: str, timeout_s: float, what: str, children: Sequence[Child] | None = None,
                 tick: Callable[[], None] | None = None, every_s: float = 0.2) -> list[Any]:
        """Read every child's words until each has said `word`; `tick` runs after each
        look (at least every `every_s` seconds). Returns what each said with `word`."""
        chosen = list(self.children if children is None else children)
        deadline = time.monotonic() + timeout_s
        while waiting := [c for c in chosen if word not in c.heard]:
            left = deadline - time.monotonic()
            if left <= 0:
                names = ", ".join(c.label for c in waiting)
                raise self.error(f"timed out after {timeout_s:g} s waiting for {names} to {what}")
            for child in _readable(waiting, min(left, every_s)):
                self._hear(child)
            for child in waiting:
                if child.eof and word not in child.heard:
                    raise self.error(f"{child.label} exited before it could {what} ({child.ended()})")
            if tick is not None:
                tick()
        return [c.heard[word] for c in chosen]

    def _hear(self, child: Child) -> None:
        for word, payload in child.read():
            if word == "error":
                tail = child.log_tail()
                where = f"\nlast lines of {child.log_path}:\n{tail}" if tail else ""
                raise self.error(f"{child.label} failed: {payload}{where}")
            if word in self.fatal:
                raise self.fatal[word](payload)
            child.heard[word] = payload

    # -- the end ----------------------------------------------------------

    def finish(self, children: Sequence[Child], grace_s: float) -> None:
        """Join `children`, killing any still running after `grace_s` in all."""
        deadline = time.monotonic() + grace_s
        for child in children:
            child.finish(deadline)


def _readable(children: list[Child], timeout_s: float) -> list[Child]:
    open_ = {id(c.stream): c for c in children if not c.eof}
    if not open_:
        return []
    return [open_[id(stream)] for stream in wait([c.stream for c in open_.values()], timeout_s)]


def _forked_main(end: Connection, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """A forked child's entry: the target on its line; what stops it goes to the parent, which names the child."""
    try:
        target(Line(end), *args)
    except BaseException as exc:
        try:
            end.send(("error", f"{type(exc).__name__}: {exc}"))
        except Exception:
            pass
    finally:
        end.close()
