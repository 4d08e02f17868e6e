"""Bad input at the command line, and the password and type cases the verb
battery (test_bad_input.py) leaves out: each a clear error naming the
problem, exit 2 from the CLI, and no key changed.

CLI cases are one table of (argv, fragment the error must contain); a new
command adds its rows. `{dead}` is a URL where nothing listens, `{live}` a
server that runs, `{wrong}` that server with a wrong password.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from conftest import snapshot
from echomq import EchoMQError, InvalidArgumentError, Queue, ServerUnavailableError, mint
from echomq_bench.cli import COMMANDS, build_parser, main
from echomq_bench.records.files import ResultsError, load
from echomq_bench.servers import start

PASSWORD = "correct-horse-7"
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
        ([cmd, "--server", "x=no-such-server-binary"], "'no-such-server-binary' is not on PATH"),
        ([cmd, "--server", "x=redis-server --port 7000"], "--port is set by the launcher"),
        ([cmd, "--server", "{dead}"], "does not answer"),
        ([cmd, "--server", "{wrong}"], "does not answer"),
    ]],
    # every other command parses --server the same way, before it starts anything
    *[([cmd, "--server", "nonsense"], "bad server spec 'nonsense'")
      for cmd in ("capacity", "compare", "gate", "reapcost", "lease", "peers", "failover")],
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
    # durations carry their unit on every command: a bare number is refused with the accepted forms
    *[(argv, "has no unit") for argv in (
        ["capacity", "--duration", "10"], ["capacity", "--warmup", "1"], ["capacity", "--lease", "60000"],
        ["compare", "--duration", "5"], ["compare", "--slot", "0.25"], ["lease", "--duration", "60"],
        ["lease", "--reap-every", "250"], ["lease", "--recovery-tolerance", "3000"], ["lease", "--leases", "1s,2"],
        ["failover", "--before", "2"], ["failover", "--after", "2"], ["peers", "--timeout", "600"],
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
    (["peers", "--queue", "echomq,celery"], "argument --queue: invalid choice: 'celery'"),
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


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def locked() -> Iterator[object]:
    """A server that wants a password; `admin` below holds it."""
    srv = start(f"locked=redis-server --requirepass {PASSWORD}")
    yield srv
    srv.stop()


def fill(argv: list[str], port: int) -> list[str]:
    urls = {"{dead}": f"redis://127.0.0.1:{dead_port()}/0", "{live}": f"redis://:{PASSWORD}@127.0.0.1:{port}/0",
            "{wrong}": f"redis://:{WRONG}@127.0.0.1:{port}/0"}
    return [urls.get(a, a) for a in argv]


@pytest.mark.parametrize("argv, fragment", CLI_CASES, ids=[" ".join(a) or "(nothing)" for a, _ in CLI_CASES])
def test_cli_refuses_bad_input(argv: list[str], fragment: str, locked: object, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHOMQ_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.chdir(tmp_path)
    admin = locked.client()  # type: ignore[attr-defined]
    admin.set("bystander", "untouched")
    before = snapshot(admin)
    try:
        code = main(fill(argv, locked.port))  # type: ignore[attr-defined]
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert fragment in err, err
    assert "Traceback" not in err
    assert PASSWORD not in err and WRONG not in err
    assert snapshot(admin) == before
    assert list(tmp_path.iterdir()) == [], "a refused command wrote files"


# --------------------------------------------------------------------------
# The command line's shared rules (echomq_bench.options), read from the parser


LONG_COMMANDS = ("capacity", "compare", "faults", "failover", "gate", "lease", "peers", "reapcost", "run")


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser(argv).parse_args(argv)


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv, dest, value", [
    (["capacity", "--duration", "1.5s"], "duration", 1.5),
    (["capacity", "--duration", "500ms"], "duration", 0.5),
    (["capacity", "--duration", "2m"], "duration", 120.0),
    (["capacity", "--warmup", "0"], "warmup", 0.0),
    (["capacity", "--lease", "2m"], "lease", 120_000),
    (["compare", "--slot", "250ms"], "slot", 0.25),
    (["lease", "--duration", "1.5s"], "duration", 1.5),
    (["lease", "--reap-every", "1.5s"], "reap_every", 1500.0),
    (["lease", "--recovery-tolerance", "250us"], "recovery_tolerance", 0.25),
    (["failover", "--before", "500ms", "--after", "1s"], "after", 1.0),
    (["peers", "--timeout", "10m"], "timeout", 600.0),
    (["reapcost", "--cadence", "100ms,1s"], "cadence_ms", [100, 1000]),
    (["reapcost", "--cadence-ms", "100,1000"], "cadence_ms", [100, 1000]),  # the old spelling, ms by its name
])
def test_durations_take_their_unit_the_same_way_everywhere(argv: list[str], dest: str, value: object) -> None:
    assert getattr(parse(argv), dest) == pytest.approx(value)


@pytest.mark.parametrize("repeated, comma, dest, value", [
    (["gate", "--verbs", "claim", "--verbs", "reap_0"], ["gate", "--verbs", "claim,reap_0"], "verbs",
     ["claim", "reap_0"]),
    (["reapcost", "--caps", "10", "--caps", "100"], ["reapcost", "--caps", "10,100"], "caps", [10, 100]),
    (["faults", "--scenario", "crash", "--scenario", "oom"], ["faults", "--scenario", "crash,oom"], "scenario",
     ["crash", "oom"]),
    (["peers", "--queue", "echomq", "--queue", "rq"], ["peers", "--queue", "echomq,rq"], "queue", ["echomq", "rq"]),
    (["lease", "--leases", "1s", "--leases", "2s"], ["lease", "--leases", "1s,2s"], "leases", [1000.0, 2000.0]),
])
def test_a_list_is_the_same_repeated_or_comma_separated(repeated: list[str], comma: list[str], dest: str,
                                                        value: list[object]) -> None:
    assert getattr(parse(repeated), dest) == getattr(parse(comma), dest) == value


@pytest.mark.parametrize("command", LONG_COMMANDS)
def test_every_long_command_has_quick(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(help_of([command], capsys).split())
    assert "--quick the short form" in text or "--quick the 60-second form" in text, text
    assert parse([command, "--quick"]).quick is True and parse([command]).quick is False


def test_quick_shortens_capacity_unless_a_flag_says_otherwise() -> None:
    from echomq_bench.capacity.workload import settings_from_args

    quick = settings_from_args(parse(["capacity", "--quick"]))
    assert (quick.duration_s, quick.warmup_s, quick.ceiling_requests) == (2.0, 0.5, 20_000)
    assert settings_from_args(parse(["capacity", "--quick", "--duration", "3s"])).duration_s == 3.0
    full = settings_from_args(parse(["capacity"]))
    assert (full.duration_s, full.warmup_s, full.ceiling_requests) == (10.0, 1.0, 100_000)


@pytest.mark.parametrize("command", ["capacity", "compare"])
def test_ceiling_is_one_flag_pair_on_by_default(command: str) -> None:
    assert parse([command]).ceiling is True
    assert parse([command, "--no-ceiling"]).ceiling is False
    assert parse([command, "--no-ceiling", "--ceiling"]).ceiling is True


def test_rate_is_jobs_per_second_over_the_whole_run(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("capacity", "compare", "faults", "failover"):
        text = " ".join(help_of([command], capsys).split())
        assert "--rate JOBS_PER_S jobs/s offered over" in text, text
    assert parse(["faults", "--rate", "300"]).rate == 300.0


def test_report_takes_no_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--server" not in help_of(["report"], capsys)
    assert "--server SPEC" in help_of(["check"], capsys)
    assert not hasattr(parse(["report", "some-dir"]), "server") or parse(["report", "some-dir"]).server is None


def test_top_level_help_shows_a_whole_sentence_per_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, command in COMMANDS.items():
        summary = command.summary
        assert summary[0].isupper() and summary.endswith(".") and summary.count(". ") == 0, summary
        assert f"{name} {summary}" in text, f"{name}: {summary!r} not whole in the help"


def test_check_help_imports_no_command_module_but_its_own() -> None:
    code = ("import sys\n"
            "from echomq_bench.cli import main\n"
            "try:\n    main(['check', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'matplotlib') "
            "or m.startswith('echomq_bench.commands.')), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert done.returncode == 0, done.stderr
    assert "usage: echomq-bench check" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "['echomq_bench.commands.check']", done.stderr


# --------------------------------------------------------------------------
# Passwords at the Queue level


def test_wrong_password_is_a_clear_error_that_changes_nothing(locked: object) -> None:
    admin = locked.client()  # type: ignore[attr-defined]
    admin.set("bystander", "untouched")
    before = snapshot(admin)
    # redis-py retries a failed AUTH with backoff by default (seconds); the message is what is tested here.
    once = Retry(NoBackoff(), 0)
    for password, why in ((WRONG, "refused the user or password"), (None, "needs a password and none was given")):
        with pytest.raises(ServerUnavailableError) as info:
            Queue(locked.client(password=password, retry=once), "jobs")  # type: ignore[attr-defined]
        text = str(info.value)
        assert f"127.0.0.1:{locked.port}" in text and why in text, text  # type: ignore[attr-defined]
        assert WRONG not in text and PASSWORD not in text
    assert snapshot(admin) == before


def test_password_lost_mid_run_is_a_clear_error(locked: object) -> None:
    """The password changes under a running client: its next verb fails cleanly."""
    admin = locked.client()  # type: ignore[attr-defined]
    q = Queue(locked.client(retry=Retry(NoBackoff(), 0)), "rotating")  # type: ignore[attr-defined]
    q.enqueue(mint(), b"x")
    try:
        admin.config_set("requirepass", WRONG)
        admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        with pytest.raises(ServerUnavailableError, match="refused the user or password"):
            q.claim(1000)
    finally:
        locked.client(password=WRONG).config_set("requirepass", PASSWORD)  # type: ignore[attr-defined]


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
    ({"max_attempts": "3"}, "max_attempts"), ({"max_attempts": True}, "max_attempts"),
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


# --------------------------------------------------------------------------
# Results folders: the library every reading command uses


def test_unreadable_results_folders(tmp_path: Path) -> None:
    cases: list[tuple[Path, str]] = [(tmp_path / "missing", "no such directory")]
    empty = tmp_path / "empty"
    empty.mkdir()
    cases.append((empty, "no meta.json"))
    bad_json = tmp_path / "bad-json"
    bad_json.mkdir()
    (bad_json / "meta.json").write_text("{not json")
    cases.append((bad_json, "not valid JSON"))
    not_object = tmp_path / "list"
    not_object.mkdir()
    (not_object / "meta.json").write_text(json.dumps([1, 2]))
    cases.append((not_object, "expected a JSON object"))
    bad_csv = tmp_path / "bad-csv"
    bad_csv.mkdir()
    (bad_csv / "meta.json").write_text("{}")
    (bad_csv / "t.csv").write_bytes(b"")
    cases.append((bad_csv, "not a readable CSV"))
    unreadable = tmp_path / "unreadable"
    unreadable.mkdir()
    (unreadable / "meta.json").mkdir()  # a folder where a file should be
    cases.append((unreadable, "no meta.json"))
    for path, fragment in cases:
        with pytest.raises(ResultsError) as info:
            load(path)
        assert fragment in str(info.value) and str(path.name) in str(info.value)
        assert isinstance(info.value, EchoMQError)  # so the CLI prints one line and exits 2
