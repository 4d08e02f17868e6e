"""Bad input at the command line, and the password and type cases the verb
battery (test_bad_input.py) leaves out: each a clear error naming the
problem, exit 2 from the CLI, and no key changed.

CLI cases are one table of (argv, fragment the error must contain); a new
command adds its rows. `{dead}` is a URL where nothing listens, `{live}` a
server that runs, `{wrong}` that server with a wrong password.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq import EchoMQError, InvalidArgumentError, Queue, ServerUnavailableError, mint
from echomq_bench.cli import main
from echomq_bench.servers import EmbeddedServer
from tests.helpers import snapshot

WRONG = "wrong-horse-9"

CLI_CASES: list[tuple[list[str], str]] = [
    # the command line itself
    (["nosuchcommand"], "invalid choice"),
    ([], "required"),
    # --server SPEC, for every command
    *[(argv, frag) for cmd in ("check", "run", "faults") for argv, frag in [
        ([cmd, "--server", "nonsense"], "bad server spec 'nonsense'"),
        ([cmd, "--server", ""], "it is empty"),
        ([cmd, "--server", "ftp://127.0.0.1"], "unknown URL scheme 'ftp'"),
        ([cmd, "--server", "redis://127.0.0.1:99999"], "bad port"),
        ([cmd, "--server", "redis://127.0.0.1/x"], "database number"),
        ([cmd, "--server", "bad name!=redis-server"], "NAME"),
        ([cmd, "--server", "x=no-such-server-binary"], "'no-such-server-binary' is not on the system PATH"),
        ([cmd, "--server", "x=redis-server --port 7000"], "--port is set by the launcher"),
        ([cmd, "--server", "{dead}"], "does not answer"),
        ([cmd, "--server", "{wrong}"], "does not answer"),
    ]],
    # every other command parses --server the same way, before it starts anything
    *[([cmd, "--server", "nonsense"], "bad server spec 'nonsense'")
      for cmd in ("capacity", "compare", "gate", "reapcost", "lease", "peers", "failover", "reshard")],
    (["check", "--server", "x=redis-server --no-such-directive 1"], "Bad directive"),
    # faults: its own options
    (["faults", "--scenario", "meteor"], "invalid choice: 'meteor'"),
    (["faults", "--server", "redis-cluster"], "for a cluster's faults use: echomq-bench failover"),
    (["faults", "--rate", "0"], "rate must be from 1 to 20000"),
    (["faults", "--rate", "1e9"], "rate must be from 1 to 20000"),
    (["faults", "--rate", "fast"], "rate must be a number"),
    (["faults", "--seed", "x"], "invalid int value: 'x'"),
    (["faults", "--work", "gauss:mu=1"], "unknown distribution kind 'gauss'"),
    (["faults", "--work", "exp"], "bad distribution 'exp'"),
    (["faults", "--work", "exp:mean=-1"], "bad duration '-1'"),
    (["faults", "--work", "uniform:lo=30ms,hi=10ms"], "want 0 <= lo < hi"),
    (["faults", "--work", "empirical:/no/such/file.csv"], "no such file"),
    (["faults", "--server", "{live}", "--out", "/proc/no/such/dir"], "/proc/no/such/dir"),
    (["faults", "--seed", "-1"], "seed must be 0 or more, got -1"),
    (["faults", "--soak", "0s"], "argument --soak: a soak lasts from 20s"),
    (["faults", "--soak", "19s"], "argument --soak: a soak lasts from 20s"),
    (["faults", "--soak", "1441m"], "to 1440m, got '1441m'"),
    (["faults", "--soak", "10"], "duration '10' has no unit"),
    (["faults", "--soak", "1m", "--quick"], "--soak has no --quick form: drop --quick"),
    (["faults", "--soak", "1m", "--scenario", "crash"], "--soak draws its faults from every kind: drop --scenario"),
    (["faults", "--soak", "1m", "--server", "{live}"], "it needs an embedded server"),
    # durations carry their unit on every command: a bare number is refused with the accepted forms
    *[(argv, "has no unit") for argv in (
        ["capacity", "--duration", "10"], ["capacity", "--warmup", "1"], ["capacity", "--lease", "60000"],
        ["compare", "--duration", "5"], ["compare", "--slot", "0.25"], ["lease", "--duration", "60"],
        ["lease", "--reap-every", "250"], ["lease", "--recovery-tolerance", "3000"], ["lease", "--leases", "1s,2"],
        ["failover", "--before", "2"], ["failover", "--after", "2"], ["peers", "--timeout", "600"],
        ["reshard", "--moving", "3"],
        ["reapcost", "--cadence", "100"],
    )],
    (["capacity", "--duration", "10"], "10s, 1.5s, 2m"),
    (["capacity", "--duration", "soon"], "argument --duration: bad duration 'soon'"),
    (["capacity", "--duration", "10h"], "bad duration '10h'"),
    (["capacity", "--warmup=-1s"], "argument --warmup: duration '-1s' is negative"),
    (["capacity", "--lease", "100us"], "under 1ms"),
    # lists: repeated or comma-separated, every item checked
    (["gate", "--verbs", "claim,nope"], "unknown verb"),
    (["gate", "--verbs", "claim", "--verbs", "nope"], "unknown verb"),
    (["faults", "--scenario", "crash,meteor"], "invalid choice: 'meteor'"),
    (["peers", "--queue", "echomq,kafka"], "argument --queue: invalid choice: 'kafka'"),
    (["reapcost", "--caps", "10,0"], "argument --caps"),
    (["reapcost", "--verbs", ","], "empty list"),
    (["check", "--server", "redis,valkey"], "give --server once per server"),
    # --rate is jobs/s; other counts have their own ranges
    (["capacity", "--rate", "0"], "argument --rate: '0' must be from"),
    (["capacity", "--rate", "fast"], "argument --rate: 'fast' is not a number"),
    (["capacity", "--connections", "0"], "argument --connections: '0' must be at least 1"),
    (["compare", "--trials", "1"], "argument --trials: '1' must be at least 2"),
    (["capacity", "--ceiling-requests", "0"], "argument --ceiling-requests"),
    # report reads folders: it takes no --server
    (["report", "--server", "redis", "results"], "talks to no server: drop --server"),
    (["report"], "the following arguments are required: DIR"),
]


def password_of(server: EmbeddedServer) -> str:
    return str(server.connection_kwargs()["password"])


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fill(argv: list[str], server: EmbeddedServer) -> list[str]:
    port = server.port
    urls = {"{dead}": f"redis://127.0.0.1:{dead_port()}/0", "{live}": server.connection_url() + "/0",
            "{wrong}": f"redis://:{WRONG}@127.0.0.1:{port}/0"}
    return [urls.get(a, a) for a in argv]


@pytest.mark.parametrize("argv, fragment", CLI_CASES, ids=[" ".join(a) or "(nothing)" for a, _ in CLI_CASES])
def test_cli_refuses_bad_input(argv: list[str], fragment: str, password_server: EmbeddedServer, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHOMQ_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.chdir(tmp_path)
    admin = password_server.client()
    admin.set("bystander", "untouched")
    before = snapshot(admin)
    try:
        code = main(fill(argv, password_server))
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert fragment in err, err
    assert "Traceback" not in err
    assert password_of(password_server) not in err and WRONG not in err
    assert snapshot(admin) == before
    assert list(tmp_path.iterdir()) == [], "a refused command wrote files"


# --------------------------------------------------------------------------
# Passwords at the Queue level


def test_wrong_password_is_a_clear_error_that_changes_nothing(password_server: EmbeddedServer) -> None:
    admin = password_server.client()
    admin.set("bystander", "untouched")
    before = snapshot(admin)
    # redis-py retries a failed AUTH with backoff by default (seconds); the message is what is tested here.
    once = Retry(NoBackoff(), 0)
    for password, why in ((WRONG, "refused the user or password"), (None, "needs a password and none was given")):
        with pytest.raises(ServerUnavailableError) as info:
            Queue(password_server.client(password=password, retry=once), "jobs")
        text = str(info.value)
        assert f"127.0.0.1:{password_server.port}" in text and why in text, text
        assert WRONG not in text and password_of(password_server) not in text
    assert snapshot(admin) == before


def test_password_lost_mid_run_is_a_clear_error(password_server: EmbeddedServer) -> None:
    """The password changes under a running client: its next verb fails cleanly."""
    admin = password_server.client()
    q = Queue(password_server.client(retry=Retry(NoBackoff(), 0)), "rotating")
    q.enqueue(mint(), b"x")
    try:
        admin.config_set("requirepass", WRONG)
        admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        with pytest.raises(ServerUnavailableError, match="refused the user or password"):
            q.claim(1000)
    finally:
        password_server.client(password=WRONG).config_set("requirepass", password_of(password_server))


# --------------------------------------------------------------------------
# Verb arguments test_bad_input.py does not cover


def test_browse_state_must_be_pending_or_dead(queue: Queue, client: redis.Redis) -> None:
    queue.enqueue(mint(), b"x")
    before = snapshot(client)
    for state in ("active", "scheduled", "", None, 1):
        with pytest.raises(InvalidArgumentError, match="browse state"):
            queue.browse(5, state)  # type: ignore[arg-type]
    assert snapshot(client) == before


@pytest.mark.parametrize("error", [None, 42, 1.5, ["e"], {"e": 1}])
def test_retry_error_must_be_text(queue: Queue, client: redis.Redis, error: object) -> None:
    queue.enqueue(mint(), b"x")
    job = queue.claim(60_000)
    before = snapshot(client)
    with pytest.raises(InvalidArgumentError, match="error must be bytes or str"):
        queue.retry(job.id, job.token, error, 0)  # type: ignore[union-attr, arg-type]
    assert snapshot(client) == before


def test_oversized_retry_error_is_refused_never_truncated(client: redis.Redis) -> None:
    q = Queue(client, "capped", max_payload_bytes=100)
    q.enqueue(mint(), b"x")
    job = q.claim(60_000)
    before = snapshot(client)
    with pytest.raises(InvalidArgumentError, match="101 bytes, over the cap of 100"):
        q.retry(job.id, job.token, "e" * 101, 0)  # type: ignore[union-attr]
    assert snapshot(client) == before
    assert q.retry(job.id, job.token, "e" * 100, 0) == "scheduled"  # type: ignore[union-attr]


@pytest.mark.parametrize("kwargs, fragment", [
    ({"max_attempts": 0}, "max_attempts"), ({"max_attempts": 2**31}, "max_attempts"),
    ({"max_attempts": "3.0"}, "max_attempts"), ({"max_attempts": True}, "max_attempts"),
    ({"max_payload_bytes": -1}, "max_payload_bytes"), ({"max_payload_bytes": 1.5}, "max_payload_bytes"),
    ({"max_payload_bytes": (512 << 20) + 1}, "max_payload_bytes"),
])
def test_queue_settings_out_of_range(client: redis.Redis, kwargs: dict[str, object], fragment: str) -> None:
    before = snapshot(client)
    with pytest.raises(InvalidArgumentError, match=fragment):
        Queue(client, "jobs", **kwargs)  # type: ignore[arg-type]
    assert snapshot(client) == before


def test_out_of_memory_is_a_clear_error_and_writes_nothing(server: object, client: redis.Redis) -> None:
    from echomq.errors import OutOfMemoryError

    q = Queue(client, "full")
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)  # far below what is in use
    try:
        before = snapshot(client)
        jid = mint()
        with pytest.raises(OutOfMemoryError) as info:
            q.enqueue(jid, b"x")
        assert info.value.code == "OOM" and "out of memory" in str(info.value)
        assert isinstance(info.value, EchoMQError)
        assert snapshot(client) == before
    finally:
        client.config_set("maxmemory", 0)
    assert q.enqueue(jid, b"x") == "enqueued"
