"""Pure helpers the unit and integration tests share: paths, process and
clock checks, a snapshot of every key, and the venv's `locust` as a child."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

ROOT = Path(__file__).resolve().parents[1]
LUA = ROOT / "lua"
SCENARIOS = ROOT / "scenarios"
LOCUST = str(Path(sys.executable).with_name("locust"))
LOCUST_TIMEOUT_S = 90


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie waiting for its reaper counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def wait_until(check: Callable[[], bool], seconds: float) -> bool:
    """Poll `check` until it holds or `seconds` pass; its last answer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def server_ms(client: redis.Redis) -> int:
    """The server's clock, the one every lease and delay is scored by."""
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


SERVER_CLOCK_SLACK_S = 30  # beyond the wait itself: a loaded machine may stall, a stopped clock is a failure


def wait_past(client: redis.Redis, deadline_ms: float) -> int:
    """Return once the server's clock reads `deadline_ms` or later; that reading.

    The scripts judge a lease or a run-at by the server's TIME (reap and promote
    take a score <= now), so a test waits on that clock, never on its own: a
    client sleep can fall short of the server's clock on a loaded machine.
    For a lease just taken, `server_ms(client) + lease_ms` read after the claim
    is at or past its deadline; the score in the active set is the deadline itself."""
    now = server_ms(client)
    give_up = time.monotonic() + max(deadline_ms - now, 0) / 1000 + SERVER_CLOCK_SLACK_S
    while now < deadline_ms:
        if time.monotonic() > give_up:
            pytest.fail(f"the server's clock reads {now} ms, still short of {deadline_ms:.0f} ms "
                        f"{SERVER_CLOCK_SLACK_S} s after it was due", pytrace=False)
        time.sleep(min((deadline_ms - now) / 1000, 0.005))  # a pause between readings, never the wait itself
        now = server_ms(client)
    return now


def snapshot(client: redis.Redis) -> dict[bytes, object]:
    """Every key with its type and contents: what 'no key changed' compares."""
    out: dict[bytes, object] = {}
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        if kind == b"zset":
            out[key] = ("zset", client.zrange(key, 0, -1, withscores=True))
        elif kind == b"hash":
            out[key] = ("hash", client.hgetall(key))
        else:
            out[key] = (kind, client.dump(key))
    return out


def evalsha_calls(client: redis.Redis) -> int:
    """EVALSHA calls the server has served: one per scripted verb call."""
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def no_retry_client(**kwargs: object) -> redis.Redis:
    """A client that gives up at once: a refusal is seen, not waited out."""
    return redis.Redis(socket_connect_timeout=2, retry=Retry(NoBackoff(), 0), **kwargs)  # type: ignore[arg-type]


def write_lua(folder: Path, scripts: dict[str, str], includes: dict[str, str]) -> Path:
    (folder / "includes").mkdir(parents=True)
    for name, text in scripts.items():
        (folder / name).write_text(text)
    for name, text in includes.items():
        (folder / "includes" / f"{name}.lua").write_text(text)
    return folder


def child_env() -> dict[str, str]:
    """The environment a child process needs to import this checkout."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def locust(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([LOCUST, *args], cwd=cwd, env=env or child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finished(proc: subprocess.Popen[str], timeout: float = LOCUST_TIMEOUT_S) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"locust did not finish in {timeout} s:\n{out[-4000:]}")
    return proc.returncode, out
