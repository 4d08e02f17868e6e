"""Watchdog that reaps embedded servers when the process that started them dies.

`echomq_bench.servers.guard` starts one keeper per parent process and keeps the write end
of a pipe whose read end is the keeper's stdin. The parent sends one JSON
object per line:

    {"op": "add_pid", "pid": 123, "start": 456}   own a server process
    {"op": "drop_pid", "pid": 123}                 the parent stopped it
    {"op": "add_dir", "path": "/tmp/echomq-..."}   own a temp dir
    {"op": "drop_dir", "path": "/tmp/echomq-..."}  the parent removed it

When stdin hits EOF the parent is gone (a clean exit, an exception, SIGKILL:
the kernel closes the pipe in every case), so the keeper SIGTERMs the servers
it still owns, SIGKILLs whatever ignores that, and removes the dirs.

This file runs as a script under `python -I -S`, so it imports only the
standard library and never the echomq package.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from typing import TypedDict

TERM_GRACE_SECONDS = 3.0
KILL_GRACE_SECONDS = 2.0
POLL_SECONDS = 0.05


def process_start_time(pid: int) -> int | None:
    """Return the kernel start time of `pid` (clock ticks since boot), or None.

    Comparing it with the value sent at registration tells the keeper whether
    a pid still names the same server or was reused by an unrelated process.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def is_alive(pid: int, start: int | None) -> bool:
    """True if `pid` is still the process that was registered."""
    if os.path.isdir("/proc/self"):
        current = process_start_time(pid)
        return current is not None and (start is None or current == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def send(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def wait_gone(pids: dict[int, int | None], seconds: float) -> dict[int, int | None]:
    """Poll until every pid is gone or `seconds` pass; return the survivors."""
    deadline = time.monotonic() + seconds
    alive = {pid: start for pid, start in pids.items() if is_alive(pid, start)}
    while alive and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        alive = {pid: start for pid, start in alive.items() if is_alive(pid, start)}
    return alive


def reap(pids: dict[int, int | None], dirs: set[str]) -> None:
    """Stop the owned servers, then delete their dirs once nothing writes there."""
    alive = {pid: start for pid, start in pids.items() if is_alive(pid, start)}
    for pid in alive:
        send(pid, signal.SIGTERM)
        # A caller may have SIGSTOPped the server; it acts on SIGTERM only
        # once it runs again.
        send(pid, signal.SIGCONT)
    alive = wait_gone(alive, TERM_GRACE_SECONDS)
    for pid in alive:
        send(pid, signal.SIGKILL)
    wait_gone(alive, KILL_GRACE_SECONDS)
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


class Message(TypedDict, total=False):
    """One line from the parent; which keys it holds depends on `op`."""

    op: str
    pid: int
    start: int | None
    path: str


def apply(message: Message, pids: dict[int, int | None], dirs: set[str]) -> None:
    op = message.get("op")
    if op == "add_pid":
        start = message.get("start")
        pids[int(message["pid"])] = int(start) if start is not None else None
    elif op == "drop_pid":
        pids.pop(int(message["pid"]), None)
    elif op == "add_dir":
        dirs.add(str(message["path"]))
    elif op == "drop_dir":
        dirs.discard(str(message["path"]))


def read_until_eof(fd: int, pids: dict[int, int | None], dirs: set[str]) -> None:
    """Apply messages from `fd` until the parent closes its end."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            return
        if not chunk:
            # A partial last line means the parent died mid-write; drop it.
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            try:
                apply(json.loads(line), pids, dirs)
            except (ValueError, KeyError, TypeError):
                continue


def main() -> int:
    # The keeper runs in its own session, but a stray Ctrl-C or hangup must
    # still not kill it before it has done its one job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    pids: dict[int, int | None] = {}
    dirs: set[str] = set()
    read_until_eof(sys.stdin.fileno(), pids, dirs)
    reap(pids, dirs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
