"""Security: loopback-only servers, AUTH, a least-privilege ACL user, TLS,
and passwords that never reach output, logs, meta.json or reports."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq import EchoMQError, Queue, ServerReplyError, mint
from echomq._instrument import QueueKeys, verbs
from echomq_bench.cli import main
from echomq._instrument import discover
from echomq_bench.servers import DEFAULT_SPECS, EmbeddedServer, Server, UrlServer, free_port, start
from echomq_bench.conformance.stories import STORIES
from tests.helpers import ROOT, server_ms, snapshot, wait_past
from tests.integration.conftest import TlsServer

LOOPBACK_V4 = "0100007F"        # 127.0.0.1 as /proc/net/tcp writes it
LOOPBACK_V6 = "0" * 24 + "01000000"  # ::1


# --------------------------------------------------------------------------
# Loopback only


def listening(pid: int) -> list[tuple[str, int]]:
    """(hex address, port) of every TCP socket this process listens on, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            address, port = f[1].split(":")
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                found.append((address, int(port, 16)))
    return found


def assert_loopback_only(server: EmbeddedServer, ports: set[int]) -> None:
    assert server.pid is not None
    sockets = listening(server.pid)
    assert {port for _, port in sockets} == ports, sockets
    assert all(address in (LOOPBACK_V4, LOOPBACK_V6) for address, _ in sockets), sockets


def test_embedded_servers_listen_on_loopback_only(server: EmbeddedServer, client: redis.Redis) -> None:
    assert_loopback_only(server, {server.port})
    assert client.config_get("bind") == {"bind": "127.0.0.1"}
    assert client.config_get("protected-mode") == {"protected-mode": "yes"}


def test_restarted_and_tls_servers_stay_on_loopback(tls_server: TlsServer) -> None:
    srv = tls_server.server
    assert_loopback_only(srv, {srv.port, tls_server.port})
    srv.restart(("--appendonly", "yes"))
    assert_loopback_only(srv, {srv.port, tls_server.port})


# --------------------------------------------------------------------------
# AUTH and a least-privilege ACL user


def every_verb(q: Queue, flush: Callable[[], None] | None = None, clock: redis.Redis | None = None) -> None:
    """All eight verbs down every script path, with a script flush in the middle.
    `clock` reads the server's TIME where q's user may not (default: q's client)."""
    a, b, c = mint(), mint(), mint()
    for jid in (a, b, c):
        assert q.enqueue(jid, b"p") == "enqueued"
    assert q.enqueue(a, b"again") == "duplicate"
    assert q.browse(5) == [c, b, a] and q.pending_size() == 3
    if flush:
        flush()
    job = q.claim(60_000)
    assert q.complete(job.id, job.token) == "ok"  # type: ignore[union-attr]
    job = q.claim(60_000)
    assert q.retry(job.id, job.token, "boom", 0) == "scheduled"  # type: ignore[union-attr]
    assert q.promote(10) == 1
    q.claim(1)
    clock = clock or q.client
    wait_past(clock, server_ms(clock) + 1)
    assert q.reap(10) == 1
    job = q.claim(60_000)
    # b comes back after its lease expired: claimed three times, it is at the
    # default max_attempts of 3, so its retry buries it.
    assert job is not None and (job.id, job.token) == (b, 3)
    assert q.retry(job.id, job.token, "boom", 0) == "dead"
    assert q.browse(5, "dead") == [b]
    q.browse(5, "dead")


@pytest.mark.parametrize("password_server", DEFAULT_SPECS, indirect=True)
def test_password_auth_embedded_and_url(password_server: EmbeddedServer) -> None:
    every_verb(Queue(password_server.client(), "auth-embedded"))
    url = start(password_server.connection_url() + "/0")
    every_verb(Queue(url.client(), "auth-url"))


def script_commands() -> set[str]:
    """Every command the scripts call, read from their text."""
    found: set[str] = set()
    for source in discover().values():
        found |= {c.lower() for c in re.findall(r"(?:rcall|redis\.p?call)\('([A-Za-z]+)'", source.text)}
    return found


# What the client itself sends: EVALSHA for every verb (SCRIPT LOAD when a
# Queue is made and after NOSCRIPT), ZRANGE for browse, ZCARD for pending_size.
CLIENT_COMMANDS = {"evalsha", "script|load", "zrange", "zcard"}


def acl_rule(commands: set[str], keys: str = "~emq:*") -> list[str]:
    return ["on", ">emq-pw", keys, "resetchannels", "-@all", *sorted(f"+{c}" for c in commands)]


@pytest.fixture
def acl_user(server: EmbeddedServer, client: redis.Redis) -> Iterator[Callable[..., redis.Redis]]:
    """A user on the plain server allowed exactly the given commands, on emq:* keys
    only, or on the keys of the given ACL key pattern."""
    def user(commands: set[str], keys: str = "~emq:*") -> redis.Redis:
        client.execute_command("ACL", "SETUSER", "emq", "reset", *acl_rule(commands, keys))
        return server.client(username="emq", password="emq-pw")

    yield user
    client.execute_command("ACL", "DELUSER", "emq")


def test_acl_user_restricted_to_queue_keys_runs_every_verb(acl_user: Callable[..., redis.Redis],
                                                           client: redis.Redis) -> None:
    needed = CLIENT_COMMANDS | script_commands()
    emq = acl_user(needed)
    every_verb(Queue(emq, "acl"), flush=client.script_flush, clock=client)  # the reload after NOSCRIPT works too


# Called only for a row found missing: whether the slot is moving (rowInFlight).
MISSING_ROW_ONLY = {"cluster"}


def test_acl_command_set_is_minimal(acl_user: Callable[..., redis.Redis], client: redis.Redis) -> None:
    needed = CLIENT_COMMANDS | script_commands()
    assert MISSING_ROW_ONLY <= needed
    for missing in sorted(needed - MISSING_ROW_ONLY):
        emq = acl_user(needed - {missing})
        with pytest.raises((redis.RedisError, EchoMQError)):
            every_verb(Queue(emq, f"acl-no-{missing.replace('|', '-')}"), clock=client)


def test_without_cluster_a_missing_row_is_refused_not_buried(acl_user: Callable[..., redis.Redis],
                                                             client: redis.Redis) -> None:
    """A plain server answers CLUSTER NODES with 'cluster support disabled',
    and a missing row is damage; an ACL that refuses CLUSTER leaves open
    whether the slot moves, so claim refuses (the server's ACL error) and puts the id back."""
    needed = CLIENT_COMMANDS | script_commands()
    for granted, buried in ((needed, True), (needed - MISSING_ROW_ONLY, False)):
        q = Queue(acl_user(granted), f"acl-missing-{secrets.token_hex(3)}")
        jid = mint()
        q.enqueue(jid, b"p")
        client.delete(q.keys.job(jid))
        if buried:
            assert q.claim(60_000) is None and client.zrange(q.keys.dead, 0, -1) == [jid.encode()]
        else:
            # The server's own refusal, in its own words: Redis 7.0 and Valkey 8.0 word it apart.
            with pytest.raises(ServerReplyError, match="can't run this command|no permissions to run"):
                q.claim(60_000)
            assert client.zrange(q.keys.pending, 0, -1) == [jid.encode()] and client.zcard(q.keys.dead) == 0


def test_acl_user_cannot_touch_other_keys(acl_user: Callable[..., redis.Redis], client: redis.Redis) -> None:
    emq = acl_user(CLIENT_COMMANDS | script_commands())
    q = Queue(emq, "acl")
    client.set("secret", "mine")
    client.hset("other:job:x", "state", "pending")
    before = {k: client.dump(k) for k in client.keys("*") if not k.startswith(b"emq:")}
    for command in (("GET", "secret"), ("SET", "secret", "x"), ("DEL", "secret"), ("KEYS", "*"), ("FLUSHALL",),
                    ("CONFIG", "SET", "maxmemory", "1"), ("SCRIPT", "FLUSH"), ("EVAL", "return 1", "0"),
                    ("ZRANGE", "secret", "0", "-1"), ("ACL", "WHOAMI")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            emq.execute_command(*command)
    k, s = q.keys, q.scripts
    other = mint()
    # Keys outside emq:* named to a script: refused before the script runs.
    call = verbs.enqueue(k, other, b"x")
    outside = replace(call, keys=tuple(key.replace(k.base, "other:") for key in call.keys))
    with pytest.raises(redis.exceptions.NoPermissionError):
        emq.execute_command(*outside.evalsha(s.sha("enqueue")))
    # A forged row prefix would reach other keys only from inside the script:
    # the script refuses it before it pops anything.
    waiting = mint()
    q.enqueue(waiting, b"x")
    call = verbs.claim(k, 1000)
    forged = replace(call, args=tuple("other:job:" if arg == k.job_prefix else arg for arg in call.args))
    with pytest.raises(redis.ResponseError) as info:
        emq.execute_command(*forged.evalsha(s.sha("claim")))
    assert str(info.value) == f"EMQARG job key prefix must be {k.job_prefix}, the rows of {k.pending}"
    assert client.zrange(k.pending, 0, -1) == [waiting.encode()]
    assert {k: client.dump(k) for k in client.keys("*") if not k.startswith(b"emq:")} == before


def queue_with_due_work(q: Queue, clock: redis.Redis) -> tuple[str, str, str]:
    """Three jobs, one where each of claim, promote and reap would take it now:
    (scheduled and due, lease expired, pending). `clock` may read TIME."""
    a, b, c = mint(), mint(), mint()
    for jid in (a, b, c):
        q.enqueue(jid, b"p")
    job = q.claim(60_000)
    assert job is not None and q.retry(job.id, job.token, "e", 0) == "scheduled"
    assert q.claim(1) is not None
    wait_past(clock, server_ms(clock) + 1)
    return a, b, c


def test_foreign_job_prefix_is_refused_before_any_pop_under_a_one_queue_acl(
        acl_user: Callable[..., redis.Redis], client: redis.Redis) -> None:
    """A user held to one queue's keys hands claim, promote and reap another
    queue's row prefix: EMQARG each time, nothing popped, nothing lost. The
    same claim with the check cut out meets the second guard: the ACL refuses
    the read of the foreign row, which claim takes as a refusal, not damage,
    and it puts the popped id back where it was before it answers."""
    emq = acl_user(CLIENT_COMMANDS | script_commands(), keys="~emq:{mine}:*")
    q = Queue(emq, "mine", max_attempts=3)
    k, s = q.keys, q.scripts
    a, b, c = queue_with_due_work(q, client)
    before = snapshot(client)
    foreign = QueueKeys("theirs").job_prefix
    for call, first_key in ((verbs.claim(k, 60_000), k.pending), (verbs.promote(k, 100), k.schedule),
                            (verbs.reap(k, 100, 3), k.active)):
        forged = replace(call, args=(foreign, *call.args[1:]))
        with pytest.raises(redis.ResponseError) as info:
            emq.execute_command(*forged.evalsha(s.sha(call.verb)))
        assert str(info.value) == f"EMQARG job key prefix must be {k.job_prefix}, the rows of {first_key}"
    assert snapshot(client) == before
    assert [client.zrange(key, 0, -1) for key in (k.schedule, k.active, k.pending)] == [[a.encode()], [b.encode()],
                                                                                         [c.encode()]]
    # The same user with the queue's own prefix moves every job: none was lost.
    assert (q.promote(100), q.reap(100), q.pending_size()) == (1, 1, 3)
    unchecked = s.sources["claim"].text.replace("checkJobPrefix(jobPrefix, pendingKey, 'pending') or ", "")
    assert unchecked != s.sources["claim"].text
    call = replace(verbs.claim(k, 60_000), args=(foreign, 60_000))
    pending = client.zrange(k.pending, 0, -1, withscores=True)
    with pytest.raises(redis.ResponseError, match="(?i)no permissions|can't access"):
        emq.execute_command(*call.evalsha(client.script_load(unchecked)))
    assert client.zrange(k.pending, 0, -1, withscores=True) == pending   # popped, refused, put back: not lost
    assert not any(client.zscore(key, a) is not None for key in (k.active, k.schedule, k.dead))


# --------------------------------------------------------------------------
# TLS


def test_rediss_url_runs_the_queue(tls_server: TlsServer) -> None:
    client = start(tls_server.url).client()
    assert client.connection_pool.connection_class is redis.connection.SSLConnection
    every_verb(Queue(client, "tls"))


def test_tls_server_is_a_server_whose_credentials_log_in(tls_server: TlsServer) -> None:
    password = tls_server.password
    remote = start(tls_server.url)
    assert isinstance(remote, Server) and isinstance(remote, UrlServer)
    kwargs = remote.connection_kwargs()
    assert (kwargs["ssl"], kwargs["password"], kwargs["db"]) == (True, password, 0)
    assert kwargs["ssl_ca_certs"].endswith("ca.crt")
    with redis.Redis(**kwargs) as client:
        assert client.ping() is True
        assert client.connection_pool.connection_class is redis.connection.SSLConnection
    for shown in (repr(remote), remote.describe(), remote.display_url):
        assert password not in shown, shown
    # The CA in the URL is what makes it log in: without it the same kwargs are refused.
    without_ca = start(tls_server.no_ca_url, check=False).connection_kwargs()
    assert "ssl_ca_certs" not in without_ca
    with pytest.raises(redis.ConnectionError, match="certificate verify failed"):
        redis.Redis(**without_ca, retry=Retry(NoBackoff(), 0)).ping()


def test_rediss_url_on_the_command_line(tls_server: TlsServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--server", tls_server.url]) == 0
    out = capsys.readouterr()
    assert f"PASS {len(STORIES)}/{len(STORIES)}" in out.out and tls_server.password not in out.out + out.err
    # Without the throwaway CA the certificate must be refused, clearly.
    assert main(["check", "--server", tls_server.no_ca_url]) == 2
    err = capsys.readouterr().err
    assert "certificate verify failed" in err and tls_server.password not in err


# --------------------------------------------------------------------------
# Passwords never written


def test_passwords_never_appear_in_output_logs_meta_or_reports(password_server: EmbeddedServer,
                                                               tmp_path: Path) -> None:
    secret = password_server.connection_kwargs()["password"]
    port = password_server.port
    url = f"redis://:{secret}@127.0.0.1:{port}/0"
    runs: list[tuple[list[str], int]] = [
        (["check", "--server", url], 0),
        (["faults", "--quick", "--scenario", "script-flush", "--server", url, "--out", str(tmp_path / "f1")], 0),
        (["faults", "--quick", "--scenario", "crash", "--server", f"pw=redis-server --requirepass {secret}"], 0),
        (["check", "--server", f"redis://:{secret}x@127.0.0.1:{port}/0"], 2),        # wrong password
        (["check", "--server", f"redis://u:{secret}@127.0.0.1:{free_port()}/0"], 2),  # nothing there
        (["check", "--server", f"pw=redis-server --requirepass={secret}"], 2),       # refused by the server
        (["check", "--server", f"redis://:{secret}@127.0.0.1:notaport"], 2),          # bad spec
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ECHOMQ_RESULTS_DIR": str(tmp_path / "results")}
    output = ""
    for argv, code in runs:
        done = subprocess.run([sys.executable, "-m", "echomq_bench", *argv], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)
        assert done.returncode == code, done.stdout + done.stderr
        output += done.stdout + done.stderr
    server_logs = {p.name: p.read_bytes() for p in password_server.dir.iterdir() if p.is_file()}
    assert secret not in output
    written = {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} | server_logs
    names = {Path(p).name for p in written}
    assert {"meta.json", "summary.json", "faults.csv", "server.log"} <= names, names
    assert sum(p.endswith(".log") for p in written) > 4  # worker event logs and the server's log were searched
    assert [p for p, data in written.items() if secret.encode() in data] == []
