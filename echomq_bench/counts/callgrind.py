"""A server run under callgrind, and the instructions of a window of its scripts.

Collection is on only inside `evalShaCommand`: the scripts the verbs run,
with every server command they call, and nothing of the network, the event
loop or the server's cron. A window zeroes the counters, runs its calls and
dumps them (`callgrind_control -z`, `-d`); the dump is read here.

What a dump gives, per window:

    instructions      every instruction inside EVALSHA (callgrind's Ir)
    commands          per server command a script called (the callees of the
                      server's `call()`, the one door every command goes
                      through): its calls and inclusive instructions
    lua               the rest: the Lua interpreter, argument conversion and
                      the scripting glue

Each server draws a hash seed from /dev/urandom when it starts; the seed
sets where every key lands in the server's tables, and so how many
entries each lookup of the same few queue keys walks past, call after
call: an offset per server that no number of calls averages away. The
server starts in its own user and mount namespace with /dev/urandom bound
to a file of fixed bytes, so every server draws the same seed.

glibc picks memcpy, strlen and their kin by the CPU's features when it
loads. The server starts with those features masked (GLIBC_TUNABLES), so
it runs the SSE2 versions every x86-64 CPU has and a count does not depend
on which CPU ran it; and with jemalloc's clock-driven purging off, whose
work would land in whichever window the clock chose.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping

from echomq_bench.errors import MeasurementError
from echomq_bench.servers.embedded import EmbeddedServer
from echomq_bench.servers.errors import ServerStartError
from echomq_bench.servers.spec import ServerSpec

__all__ = ["CountingServer", "Window", "read_dump", "command_name", "valgrind_version", "CallgrindError",
           "COLLECTED", "PINNED_CPU_FEATURES"]

COLLECTED = "evalShaCommand"
# The function every command passes through (server.c), in Redis and Valkey alike.
DISPATCH = "call"
# Commands whose cost is the script itself, not a command a script called.
SCRIPT_ENTRIES = frozenset({"evalShaCommand", "evalCommand", "evalRoCommand", "evalShaRoCommand", "fcallCommand"})
PINNED_CPU_FEATURES = ("AVX512F", "AVX512VL", "AVX512BW", "AVX512DQ", "AVX2", "AVX", "FMA", "BMI1", "BMI2",
                       "LZCNT", "MOVBE", "ERMS", "FSRM", "SSE4_2", "SSE4_1", "SSSE3", "POPCNT", "RTM",
                       "AVX_Fast_Unaligned_Load")
# Run the rest of the command with /dev/urandom bound to the file given first ($0).
_PINNED_SEED_PREFIX = ("unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                       'mount --bind "$0" /dev/urandom && exec "$@"')
SEED_BYTES = bytes(range(64))
START_TIMEOUT_S = 120.0   # valgrind's start, reading the server's symbols, takes seconds
CONTROL_TIMEOUT_S = 120.0
REHASH_TIMEOUT_S = 120.0


class CallgrindError(MeasurementError):
    """valgrind is missing, or a dump could not be taken or read; the message says which."""


def valgrind_version() -> str:
    """`valgrind-3.19.0`, or CallgrindError naming how to install it or what else is missing."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise CallgrindError("valgrind is not installed; instruction counts run the server under callgrind: "
                             "apt-get install valgrind")
    _check_namespaces()
    done = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


@lru_cache(maxsize=1)
def _check_namespaces() -> None:
    """CallgrindError unless this user may start a process in its own user and mount namespace."""
    try:
        done = subprocess.run([*_PINNED_SEED_PREFIX, "/dev/null", "true"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        done = subprocess.CompletedProcess([], 1, "", str(exc))
    if done.returncode != 0:
        raise CallgrindError(
            "cannot pin the server's hash seed: starting it in its own user and mount namespace failed "
            f"({(done.stderr or '').strip()[:200] or 'exit ' + str(done.returncode)}); unprivileged user "
            "namespaces must be on (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)")


def command_name(function: str) -> str:
    """The command a server function implements, as a script calls it: zpopminCommand -> ZPOPMIN."""
    return function[:-len("Command")].upper() if function.endswith("Command") else function


@dataclass(frozen=True)
class Window:
    """What one dump holds: every collected instruction and, per server command, (calls, instructions)."""

    instructions: int
    commands: Mapping[str, tuple[int, int]]

    @property
    def lua(self) -> int:
        """Instructions outside every server command: the interpreter and the scripting glue."""
        return self.instructions - sum(cost for _, cost in self.commands.values())


_NAME = re.compile(r"^\((\d+)\)(?: (.*))?$")
_RECURSION = re.compile(r"'\d+$")


def read_dump(text: str, known: frozenset[str] | None = None) -> Window:
    """The totals and the dispatcher's callees of one callgrind dump (its
    documented text format, names compressed or not). With `known`, only
    the commands it names count as commands: a callee such as Valkey's
    afterCommand is the dispatcher's own work."""
    names: dict[str, str] = {}

    def name(spec: str) -> str:
        match = _NAME.match(spec.strip())
        if match:
            key, given = match.groups()
            if given:
                names[key] = given
            spec = names.get(key, spec)
        return _RECURSION.sub("", spec.strip())  # call'2: callgrind's name for a nested level of call

    total = None
    fn = callee = ""
    pending_calls = None
    commands: dict[str, list[int]] = {}
    for line in text.splitlines():
        if pending_calls is not None:  # the line after calls= holds the call's inclusive cost
            cost = int(line.split()[1]) if len(line.split()) > 1 else 0
            if (fn == DISPATCH and callee.endswith("Command") and callee not in SCRIPT_ENTRIES
                    and (known is None or command_name(callee) in known)):
                entry = commands.setdefault(command_name(callee), [0, 0])
                entry[0] += pending_calls
                entry[1] += cost
            pending_calls = None
        elif line.startswith("fn="):
            fn = name(line[3:])
        elif line.startswith("cfn="):
            callee = name(line[4:])
        elif line.startswith("calls="):
            pending_calls = int(line[6:].split()[0])
        elif line.startswith(("summary:", "totals:")):
            total = int(line.split(":", 1)[1].split()[0])
    if total is None:
        raise CallgrindError("the callgrind dump has no summary or totals line")
    return Window(total, {k: (v[0], v[1]) for k, v in sorted(commands.items())})


class CountingServer(EmbeddedServer):
    """An embedded server run under callgrind, collecting inside EVALSHA only."""

    def __init__(self, spec: ServerSpec, *, start_timeout: float = START_TIMEOUT_S) -> None:
        self.valgrind = valgrind_version()
        try:
            super().__init__(spec, start_timeout=start_timeout)
        except ServerStartError as exc:
            raise CallgrindError(f"{spec.name}: the server did not start under callgrind: {exc}") from None

    def _command(self, port: int) -> list[str]:
        # exec all the way down: the pid this process started is the server's.
        seed = self.dir / "fixed-random"
        seed.write_bytes(SEED_BYTES)
        return [*_PINNED_SEED_PREFIX, str(seed),
                "valgrind", "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={COLLECTED}",
                "--compress-strings=no", f"--callgrind-out-file={self.dir / 'callgrind.out'}",
                *super()._command(port), *self._debug_args()]

    def _debug_args(self) -> tuple[str, ...]:
        # DEBUG HTSTATS tells when the keyspace's rehash is done (rehash_done). Redis 6.2
        # allows DEBUG from anywhere and knows no such option; later servers need it.
        ident = self.identity
        if ident is not None and ident.product == "redis" and int(ident.version.split(".")[0]) < 7:
            return ()
        return ("--enable-debug-command", "local")

    def rehash_done(self, client: Any, timeout: float = REHASH_TIMEOUT_S) -> None:
        """Wait until no table of the keyspace is being rehashed: the server's
        cron finishes a rehash a step per tick, and no window may hold that work
        (a fixed pause of 1 s was short on a loaded machine under valgrind)."""
        deadline = time.monotonic() + timeout
        while b"rehashing target" in client.execute_command("DEBUG", "HTSTATS", "0"):
            if time.monotonic() > deadline:
                raise CallgrindError(f"{self.name}: the keyspace was still rehashing after {timeout:.0f} s")
            time.sleep(0.1)

    def _environment(self) -> dict[str, str]:
        # glibc's CPU-specific string functions pinned to the baseline ones (see the module's docstring).
        tunables = "glibc.cpu.hwcaps=" + ",".join(f"-{f}" for f in PINNED_CPU_FEATURES)
        # jemalloc returns freed pages on a clock (its decay); with decay off that work never lands in a window.
        # Debian links the system jemalloc (MALLOC_CONF); a bundled one reads JE_MALLOC_CONF.
        no_decay = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
        return {**os.environ, "GLIBC_TUNABLES": tunables, "MALLOC_CONF": no_decay, "JE_MALLOC_CONF": no_decay}

    def window(self, calls: Callable[[], Any]) -> Window:
        """Zero the counters, run `calls()`, dump and read what it cost."""
        self._control("-z")
        calls()
        before = set(self.dir.glob("callgrind.out*"))
        self._control("-d")
        dumps = sorted(set(self.dir.glob("callgrind.out*")) - before, key=lambda p: p.stat().st_mtime_ns)
        if not dumps:
            raise CallgrindError(f"{self.name}: callgrind_control -d wrote no dump in {self.dir}")
        window = read_dump(dumps[-1].read_text(), self.command_names())
        for dump in dumps:
            dump.unlink()
        return window

    def command_names(self) -> frozenset[str]:
        """Every command this server knows, upper case (COMMAND LIST)."""
        if not hasattr(self, "_commands"):
            import redis

            with self.client() as client:
                try:
                    names = client.command_list()
                except redis.ResponseError:   # Redis 6.2 has no COMMAND LIST; COMMAND is keyed by name
                    names = list(client.command())
            self._commands = frozenset((n.decode() if isinstance(n, bytes) else str(n)).upper() for n in names)
        return self._commands

    def _control(self, flag: str) -> None:
        try:
            done = subprocess.run(["callgrind_control", flag, str(self.pid)], capture_output=True, text=True,
                                  timeout=CONTROL_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise CallgrindError(f"{self.name}: callgrind_control {flag} did not answer in "
                                 f"{CONTROL_TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            raise CallgrindError(f"{self.name}: callgrind_control {flag} failed: "
                                 f"{(done.stderr or done.stdout).strip()[:300]}")
