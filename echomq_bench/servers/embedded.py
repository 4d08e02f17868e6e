"""The servers that tests, benchmarks and the CLI talk to.

Every command takes `--server SPEC`; `parse_server_spec` (echomq_bench.servers.spec,
re-exported here) turns SPEC into a `ServerSpec` and `start` turns that into a
running server: an `EmbeddedServer`, a `UrlServer`, or a cluster
(echomq_bench.servers.cluster).

An embedded server listens on a free loopback port, keeps its files in its own
temp dir and has no persistence unless its ARGS ask for it. It must never
outlive the process that started it, however that process ends, so each
process that starts servers also starts one small keeper (`echomq_bench.servers.keeper`)
which holds the read end of a pipe whose write end only this process holds.
The kernel closes that pipe when this process dies, even by SIGKILL, and the
keeper then kills the servers it was told about and removes their dirs.

Passwords never appear in a repr or a message: see `serverspec.redacted_url`.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq_bench.servers.keeper import process_start_time
from echomq_bench.servers.spec import (  # noqa: F401 - re-exported: callers import spec names from here
    BUILTIN_BINARIES,
    DEFAULT_SPECS,
    DEFAULT_URL_PORT,
    ServerError,
    ServerSpec,
    ServerSpecError,
    _check_args,
    _option_value,
    _secrets_in,
    parse_server_spec,
    redacted_args,
    redacted_url,
)

__all__ = [
    "DEFAULT_SPECS",
    "ServerSpec",
    "ServerError",
    "ServerSpecError",
    "ServerStartError",
    "ServerNotFoundError",
    "EmbeddedServer",
    "UrlServer",
    "Server",
    "parse_server_spec",
    "redacted_url",
    "redacted_args",
    "server_version",
    "find_binary",
    "free_port",
    "keeper_pid",
    "start",
    "running",
]

LOOPBACK = "127.0.0.1"

START_TIMEOUT_SECONDS = 10.0
STOP_TIMEOUT_SECONDS = 5.0
URL_CHECK_TIMEOUT_SECONDS = 5.0
PORT_ATTEMPTS = 5
POLL_SECONDS = 0.02
LOG_TAIL_LINES = 20

TEMP_PREFIX = "echomq-server-"
LOG_NAME = "server.log"
# Config errors are printed before the server opens its log file.
OUTPUT_NAME = "output.log"
KEEPER_SCRIPT = Path(__file__).with_name("keeper.py")

REDIS_INSTALL_HINT = "install it with: apt-get install redis-server"
VALKEY_INSTALL_HINT = (
    "install it with: apt-get install -t bookworm-backports valkey-server valkey-tools "
    "(after adding the bookworm-backports suite; see README: Setup)"
)


class ServerStartError(ServerError):
    """An embedded server did not come up, or a URL server did not answer."""


class ServerNotFoundError(ServerStartError):
    """The server binary is not installed or not on PATH."""


class _PortTakenError(ServerStartError):
    """Another process won the race for the port we picked."""




# --------------------------------------------------------------------------
# Cleanup of what this process owns


class _Guard:
    """What this process must clean up at exit, mirrored to its keeper.

    The pids and dirs held here are the truth; the keeper gets a copy so it
    can act when this process cannot. If the keeper dies, the next message
    starts a new one and replays the whole copy.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.owner = os.getpid()
        self.servers: dict[int, EmbeddedServer] = {}
        self.pids: dict[int, int | None] = {}
        self.dirs: set[str] = set()
        self.keeper: subprocess.Popen[bytes] | None = None
        self.pipe: int | None = None
        self.keeper_failed = False

    def track(self, server: EmbeddedServer) -> None:
        with self.lock:
            self.servers[id(server)] = server

    def untrack(self, server: EmbeddedServer) -> None:
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

    def _send(self, message: dict[str, object]) -> None:
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
            warnings.warn(f"echomq: cannot start the server keeper ({exc})", RuntimeWarning)
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
                warnings.warn(f"echomq: stopping {server.name} failed: {exc}", RuntimeWarning)
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


def _encode(message: dict[str, object]) -> bytes:
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


_guard = _Guard()
# Fork children keep the parent's guard object alive here, so its Popen for
# the parent's keeper is never finalised (and never waited on) in the child.
_abandoned: list[_Guard] = []


def _reset_after_fork() -> None:
    global _guard
    _guard.abandon()
    _abandoned.append(_guard)
    _guard = _Guard()


def stop_all() -> None:
    """Stop every server this process started (atexit does this too, but a
    host such as Locust may close its files before atexit runs)."""
    _stop_all_at_exit()


def _stop_all_at_exit() -> None:
    _guard.stop_all()


os.register_at_fork(after_in_child=_reset_after_fork)
atexit.register(_stop_all_at_exit)


# --------------------------------------------------------------------------
# Servers


def _no_retry() -> Retry:
    # redis-py retries a refused connection with backoff for seconds; a
    # readiness poll or a reachability check wants the first answer.
    return Retry(NoBackoff(), 0)


def server_version(client: redis.Redis) -> str:
    """`valkey 8.0.1` or `redis 7.0.15`, from INFO server."""
    info = client.info("server")
    valkey = info.get("valkey_version")
    if valkey:
        return f"valkey {valkey}"
    return f"redis {info['redis_version']}"


def find_binary(binary: str) -> str:
    """The full path of `binary`, or ServerNotFoundError saying how to install it."""
    path = shutil.which(binary)
    if path is None:
        raise ServerNotFoundError(_not_found_message(binary))
    return path


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
    where = "is not an executable file" if os.sep in binary else "is not on PATH"
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


class EmbeddedServer:
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
        self.binary = find_binary(spec.binary)
        self._owner = os.getpid()
        self._proc: subprocess.Popen[bytes] | None = None
        self._run_args = spec.args
        self._password = _option_value(spec.args, "--requirepass")
        self._secrets = _secrets_in(spec.args)
        self.dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=tempfile.gettempdir()))
        _guard.track(self)
        _guard.own_dir(self.dir)
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

    def client(self, **kwargs: Any) -> redis.Redis:
        options: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "decode_responses": False,
            "socket_connect_timeout": 5,
        }
        if self._password is not None:
            options["password"] = self._password
        options.update(kwargs)
        return redis.Redis(**options)

    def version(self) -> str:
        with self.client() as client:
            return server_version(client)

    def describe(self) -> str:
        return self.spec.describe()

    def stop(self) -> None:
        """Kill the server and remove its dir. Safe to call twice."""
        if os.getpid() != self._owner:
            return
        self._stop_process()
        shutil.rmtree(self.dir, ignore_errors=True)
        _guard.drop_dir(self.dir)
        _guard.untrack(self)

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
        _check_args(shlex.join(extra), extra)
        self._stop_process()
        self._run_args = (*self.spec.args, *extra)
        self._password = _option_value(self._run_args, "--requirepass")
        self._secrets = _secrets_in(self._run_args)
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
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--logfile", str(self.log_path),
            "--protected-mode", "yes",
        ]  # fmt: skip
        # Last, so that a user's `--appendonly yes` wins.
        return base + list(self._run_args)

    def _launch(self, port: int) -> None:
        with open(self.dir / OUTPUT_NAME, "ab") as output:
            proc = subprocess.Popen(
                self._command(port),
                stdin=subprocess.DEVNULL,
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
        _guard.own_pid(proc.pid)
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
                port=port, socket_connect_timeout=0.5, socket_timeout=2, retry=_no_retry()
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
        _guard.drop_pid(proc.pid)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


class UrlServer:
    """A server that already runs somewhere: the EmbeddedServer interface
    without process control."""

    def __init__(self, spec: ServerSpec) -> None:
        if spec.kind != "url" or spec.url is None:
            raise ServerSpecError(f"{spec!r} is not a URL server spec")
        parts = urlsplit(spec.url)
        self.spec = spec
        self.name = spec.name
        self.url = spec.url
        self.host = parts.hostname or ""
        self.port = parts.port or DEFAULT_URL_PORT
        self.pid: int | None = None
        self.dir: Path | None = None
        self.running = True

    def client(self, **kwargs: Any) -> redis.Redis:
        options: dict[str, Any] = {"socket_connect_timeout": 5, "decode_responses": False}
        options.update(kwargs)
        return redis.Redis.from_url(self.url, **options)

    def check(self, timeout: float = URL_CHECK_TIMEOUT_SECONDS) -> None:
        """Raise ServerStartError unless the server answers PING."""
        try:
            with self.client(
                socket_connect_timeout=timeout, socket_timeout=timeout, retry=_no_retry()
            ) as client:
                client.ping()
        except (redis.RedisError, OSError) as exc:
            reason = redacted_url(f"{type(exc).__name__}: {exc}")
            raise ServerStartError(
                f"server {self.name!r} at {redacted_url(self.url)} does not answer: {reason}"
            ) from None

    def version(self) -> str:
        with self.client() as client:
            return server_version(client)

    def describe(self) -> str:
        return self.spec.describe()

    def stop(self) -> None:
        """Nothing to stop: this process did not start the server."""

    def restart(self, extra_args: tuple[str, ...] = ()) -> None:
        raise ServerError(f"server {self.name!r} runs elsewhere; only embedded servers restart")

    def __enter__(self) -> UrlServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"UrlServer(name={self.name!r}, url={redacted_url(self.url)!r})"


Server = EmbeddedServer | UrlServer


def start(spec: ServerSpec | str, *, check: bool = True) -> Server:
    """Start an embedded server, or connect to a URL one (PINGing it unless check=False).

    A cluster spec gives an `echomq_bench.servers.cluster` EmbeddedCluster or UrlCluster:
    the same name, url, version(), client() and stop(), plus `nodes`.
    """
    if isinstance(spec, str):
        spec = parse_server_spec(spec)
    if spec.kind == "cluster":
        from echomq_bench.servers.cluster import start_cluster

        return start_cluster(spec, check=check)  # type: ignore[return-value]
    if spec.kind == "embedded":
        return EmbeddedServer(spec)
    server = UrlServer(spec)
    if check:
        server.check()
    return server


@contextmanager
def running(*specs: ServerSpec | str) -> Iterator[tuple[Server, ...]]:
    """Start every spec in order; stop them all on the way out, even on error."""
    with ExitStack() as stack:
        servers: list[Server] = []
        for spec in specs:
            server = start(spec)
            stack.callback(server.stop)
            servers.append(server)
        yield tuple(servers)


def keeper_pid() -> int | None:
    """The pid of this process's keeper, or None before it first starts a server."""
    return _guard.keeper_pid()
