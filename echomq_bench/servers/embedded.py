"""One embedded server: a redis-server or valkey-server this process starts,
owns and stops.

An embedded server listens on a free loopback port, keeps its files in its
own temp dir and starts with the baseline settings its version knows (no
persistence, one I/O thread: `echomq_bench.servers.baseline`) unless its
ARGS say otherwise. A named build's binary is found where that build lives
(`echomq_bench.servers.builds`).

It must never outlive the process that started it, however that process
ends: the guard (`echomq_bench.servers.guard`) stops it at exit and tells
the keeper about it for the exits Python never sees.

Passwords never appear in a repr or a message: see `spec.redacted_args`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis

from echomq_bench.servers import guard
from echomq_bench.servers.base import LOOPBACK, OneServer, no_retry
from echomq_bench.servers.baseline import baseline_for
from echomq_bench.servers.builds import build_binary, identify, system_which
from echomq_bench.servers.errors import (
    ServerError,
    ServerNotFoundError,
    ServerSpecError,
    ServerStartError,
)
from echomq_bench.servers.spec import (
    SECRET_OPTIONS,
    ServerSpec,
    check_args,
    option_value,
    redacted_args,
    secrets_in,
)

__all__ = ["EmbeddedServer", "find_binary", "spec_binary", "free_port"]

START_TIMEOUT_SECONDS = 10.0
STOP_TIMEOUT_SECONDS = 5.0
PORT_ATTEMPTS = 5
POLL_SECONDS = 0.02
LOG_TAIL_LINES = 20

TEMP_PREFIX = "echomq-server-"
LOG_NAME = "server.log"
# Config errors are printed before the server opens its log file.
OUTPUT_NAME = "output.log"

REDIS_INSTALL_HINT = "install it with: apt-get install redis-server"
VALKEY_INSTALL_HINT = (
    "install it with: apt-get install -t bookworm-backports valkey-server valkey-tools "
    "(after adding the bookworm-backports suite; see README: Setup)"
)


class _PortTakenError(ServerStartError):
    """Another process won the race for the port we picked."""


def find_binary(binary: str) -> str:
    """The full path of `binary` on the system PATH (a venv's bin left out,
    see `builds.system_path`), or ServerNotFoundError saying how to install it."""
    path = system_which(binary)
    if path is None:
        raise ServerNotFoundError(_not_found_message(binary))
    return path


def spec_binary(spec: ServerSpec) -> str:
    """The full path of the binary an embedded or cluster spec runs: a named
    build's own (checked to be its version), else `spec.binary` as the system PATH finds it."""
    if spec.build is not None:
        return build_binary(spec.build)
    if spec.binary is None:
        raise ServerSpecError(f"{spec!r} names no binary")
    return find_binary(spec.binary)


def _not_found_message(binary: str) -> str:
    base = os.path.basename(binary)
    if "valkey" in base:
        hint = VALKEY_INSTALL_HINT
    elif "redis" in base:
        hint = REDIS_INSTALL_HINT
    else:
        hint = (
            "give the path of a redis-server or valkey-server binary, or "
            f"{REDIS_INSTALL_HINT}, or {VALKEY_INSTALL_HINT}"
        )
    where = "is not an executable file" if os.sep in binary else "is not on the system PATH"
    return f"server binary {binary!r} {where}; {hint}"


def free_port() -> int:
    """A loopback port that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


class EmbeddedServer(OneServer):
    """A server process this Python process started and owns.

    The constructor starts it and returns once it answers PING. `stop()`
    kills it and removes its dir; so does the exit of this process, however
    it exits. Only the process that started a server controls it: in a fork
    child, `stop()` does nothing and `restart()` raises, but `client()` works.
    """

    def __init__(self, spec: ServerSpec, *, start_timeout: float = START_TIMEOUT_SECONDS) -> None:
        if spec.kind != "embedded" or spec.binary is None:
            raise ServerSpecError(f"{spec!r} is not an embedded server spec")
        self.spec = spec
        self.name = spec.name
        self.host = LOOPBACK
        self.port = 0
        self.start_timeout = start_timeout
        self.binary = spec_binary(spec)
        self.identity = identify(self.binary)
        self.baseline = baseline_for(self.identity)
        self._owner = os.getpid()
        self._proc: subprocess.Popen[bytes] | None = None
        self._run_args = spec.args
        self._password = option_value(spec.args, "--requirepass")
        self._secrets = secrets_in(spec.args)
        self.dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=tempfile.gettempdir()))
        guard.current().track(self)
        guard.current().own_dir(self.dir)
        try:
            self._launch_on_free_port()
        except BaseException:
            self.stop()
            raise

    # -- public --------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's own pid (not a wrapper's), or None once stopped."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path:
        return self.dir / LOG_NAME

    @property
    def display_url(self) -> str:
        return self.url  # the password is in the args, never in this URL

    @property
    def args(self) -> tuple[str, ...]:
        """The ARGS of the current run (the spec's, plus restart extras),
        passwords hidden."""
        return redacted_args(self._run_args)

    def option(self, name: str) -> str | None:
        """The value the current run gives option `name` (e.g. "--cluster-port"),
        or None. Secret options are refused: the password is in connection_kwargs()."""
        if name.lower() in SECRET_OPTIONS:
            raise ServerError(f"{name} is a password; use connection_kwargs()")
        return option_value(self._run_args, name.lower())

    def connection_kwargs(self) -> dict[str, Any]:
        """host, port and, when the server has one, its password: what a
        worker process needs to log in. Never print it."""
        kwargs: dict[str, Any] = {"host": self.host, "port": self.port}
        if self._password is not None:
            kwargs["password"] = self._password
        return kwargs

    def connection_url(self) -> str:
        """redis://[:PASSWORD@]HOST:PORT, for processes that take a URL. Never print it."""
        auth = f":{quote(self._password, safe='')}@" if self._password is not None else ""
        return f"redis://{auth}{self.host}:{self.port}"

    def client(self, **kwargs: Any) -> redis.Redis:
        options: dict[str, Any] = {
            **self.connection_kwargs(),
            "decode_responses": False,
            "socket_connect_timeout": 5,
        }
        options.update(kwargs)
        return redis.Redis(**options)

    def stop(self) -> None:
        """Kill the server and remove its dir. Safe to call twice."""
        if os.getpid() != self._owner:
            return
        self._stop_process()
        shutil.rmtree(self.dir, ignore_errors=True)
        guard.current().drop_dir(self.dir)
        guard.current().untrack(self)

    def restart(self, extra_args: tuple[str, ...] = ()) -> None:
        """Stop and start again on the same port and dir, so an AOF survives.

        `extra_args` apply to this run only, after the spec's own args. If the
        server does not come back, ServerStartError is raised and the dir is
        kept for another restart(); stop() or process exit removes it.
        """
        if os.getpid() != self._owner:
            raise ServerError(f"server {self.name!r} belongs to process {self._owner}")
        if not self.dir.is_dir():
            raise ServerError(f"server {self.name!r} was stopped; start a new one")
        extra = tuple(extra_args)
        check_args(shlex.join(extra), extra)
        self._stop_process()
        self._run_args = (*self.spec.args, *extra)
        self._password = option_value(self._run_args, "--requirepass")
        self._secrets = secrets_in(self._run_args)
        self._launch(self.port)

    def __enter__(self) -> EmbeddedServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running else "stopped"
        return f"EmbeddedServer(name={self.name!r}, url={self.url!r}, {state})"

    # -- starting ------------------------------------------------------------

    def _launch_on_free_port(self) -> None:
        for _ in range(PORT_ATTEMPTS):
            port = free_port()
            try:
                self._launch(port)
            except _PortTakenError:
                continue
            self.port = port
            return
        raise ServerStartError(f"server {self.name!r}: no free port after {PORT_ATTEMPTS} attempts")

    def _command(self, port: int) -> list[str]:
        base = [
            self.binary,
            "--port", str(port),
            "--bind", LOOPBACK,
            "--dir", str(self.dir),
            "--daemonize", "no",
            "--logfile", str(self.log_path),
        ]  # fmt: skip
        # The spec's args last, so that a user's `--appendonly yes` wins.
        return base + self.baseline.args() + list(self._run_args)

    def _environment(self) -> dict[str, str] | None:
        """The server's environment: this process's own (None), unless a subclass needs another."""
        return None

    def _launch(self, port: int) -> None:
        with open(self.dir / OUTPUT_NAME, "ab") as output:
            proc = subprocess.Popen(
                self._command(port),
                stdin=subprocess.DEVNULL,
                env=self._environment(),
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                close_fds=True,
                # Out of the terminal's process group: a Ctrl-C reaches Python,
                # which then stops servers in order, instead of killing them
                # under a benchmark that is still measuring.
                start_new_session=True,
            )
        self._proc = proc
        guard.current().own_pid(proc.pid)
        try:
            self._wait_ready(proc, port)
        except BaseException:
            self._stop_process()
            raise

    def _wait_ready(self, proc: subprocess.Popen[bytes], port: int) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if proc.poll() is not None:
                raise self._start_failure(port, f"exited with code {proc.returncode}")
            answer = self._probe(port)
            if answer == proc.pid:
                return
            if answer is not None:
                # Someone else bound the port between free_port() and us.
                raise _PortTakenError(f"port {port} is served by pid {answer}")
            if time.monotonic() > deadline:
                raise self._start_failure(port, f"did not answer PING within {self.start_timeout:g} s")
            time.sleep(POLL_SECONDS)

    def _probe(self, port: int) -> int | None:
        """The pid of whatever answers PING on `port`, or None if nothing does yet."""
        assert self._proc is not None
        try:
            with self.client(
                port=port, socket_connect_timeout=0.5, socket_timeout=2, retry=no_retry()
            ) as client:
                client.ping()
                try:
                    return int(client.info("server")["process_id"])
                except redis.ResponseError:
                    # INFO renamed away by the user's args: trust the PING.
                    return self._proc.pid
        except redis.AuthenticationError:
            # It answered but wants credentials we lack; our process is the
            # only one started with these args on this port.
            return self._proc.pid
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError, OSError):
            # ConnectionError covers LOADING (BusyLoadingError): still starting.
            return None

    def _start_failure(self, port: int, why: str) -> ServerStartError:
        log = _tail(self.log_path)
        output = _tail(self.dir / OUTPUT_NAME)
        if "Address already in use" in log + output:
            return _PortTakenError(f"port {port} is taken")
        details = "\n".join(part for part in (output, log) if part) or "(no output)"
        for secret in self._secrets:
            details = details.replace(secret, "***")
        command = shlex.join(redacted_args(self._command(port)))
        return ServerStartError(
            f"server {self.name!r} {why}.\ncommand: {command}\nlast lines of its log:\n{details}"
        )

    # -- stopping ------------------------------------------------------------

    def _stop_process(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            # A caller may have SIGSTOPped it to simulate a hang.
            _signal(proc.pid, signal.SIGCONT)
            try:
                proc.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        guard.current().drop_pid(proc.pid)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass

