"""The Worker guide's two example programs, run as the guide prints them.

Each program is read from docs/guide/worker.md (the fenced block whose first
line names its file), so the page cannot drift from what is run here. It runs
as a child process against a server of each build, with the server and the
queue in the environment variables the program reads, and gets SIGTERM while
its first handlers run, as `docker stop` or systemd would send it.

What a clean stop means, read from the program's own log and from the server:
the program exits 0; every job whose handler started ran once and was
completed (its row is gone, and the program's closing count agrees); the
active set is empty, so nothing is left leased to nobody; and every other job
is still pending, never claimed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from echomq import Queue, mint
from echomq_bench.peers.runner import child_url
from echomq_bench.servers import EmbeddedServer
from tests.helpers import ROOT, wait_until
from tests.unit.test_guide_examples import python_blocks

GUIDE = ROOT / "docs" / "guide" / "worker.md"
PROGRAMS = ["confirmations.py", "confirmations_async.py"]
JOBS = 64  # several rounds of either program: a SIGTERM sent as the first handlers run leaves most pending
SENDING = re.compile(r"sending (JOB[0-9A-Za-z]{11}) \(attempt (\d+)\)")
STOPPED = re.compile(r"stopped: (\d+) completed, (\d+) retried, (\d+) dead")


def guide_program(name: str) -> str:
    """The one python block of the guide whose first line is `# <name>: ...`."""
    found = [block for block in python_blocks(GUIDE.read_text()) if block.startswith(f"# {name}:")]
    assert len(found) == 1, f"docs/guide/worker.md holds {len(found)} programs named {name}"
    return found[0]


def _start(program: Path, server: EmbeddedServer, queue: Queue, output: Path) -> subprocess.Popen[bytes]:
    # The caller's PYTHONPATH first, so a run against another checkout's client reaches the child too.
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p)
    env = {**os.environ, "PYTHONPATH": path, "REDIS_URL": child_url(server), "QUEUE": queue.name}
    with output.open("wb") as out:
        return subprocess.Popen([sys.executable, str(program)], cwd=program.parent, env=env,
                                stdout=out, stderr=subprocess.STDOUT)


def _sent(output: Path) -> list[tuple[str, int]]:
    return [(jid, int(attempt)) for jid, attempt in SENDING.findall(output.read_text())]


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_guide_program_stopped_by_sigterm_mid_round_completes_what_it_ran(
        name: str, client: redis.Redis, server: EmbeddedServer, tmp_path: Path) -> None:
    queue = Queue(client, f"orders-{name.split('.')[0].replace('_', '-')}")
    ids = [mint() for _ in range(JOBS)]
    for jid in ids:
        queue.enqueue(jid, f'{{"order": "{jid}"}}')
    program = tmp_path / name
    program.write_text(guide_program(name))
    output = tmp_path / "output.log"
    child = _start(program, server, queue, output)
    try:
        assert wait_until(lambda: bool(_sent(output)) or child.poll() is not None, 30)
        assert _sent(output), output.read_text()
        child.send_signal(signal.SIGTERM)  # the first round's handlers are running now
        assert child.wait(30) == 0, output.read_text()
    finally:
        child.kill()
    log = output.read_text()

    sent = _sent(output)
    ran = [jid for jid, _ in sent]
    assert len(set(ran)) == len(ran) and {attempt for _, attempt in sent} == {1}, log  # none ran twice
    assert 0 < len(ran) < JOBS, log  # the stop came before the queue was drained
    closing = STOPPED.search(log)
    assert closing is not None and tuple(map(int, closing.groups())) == (len(ran), 0, 0), log
    # Completed on the server: complete deletes the row, and only complete does.
    assert [jid for jid in ran if client.exists(queue.keys.job(jid))] == [], log
    assert client.zcard(queue.keys.active) == 0
    assert client.zcard(queue.keys.schedule) == client.zcard(queue.keys.dead) == 0
    # The rest wait in pending, oldest first, never claimed; the ones that ran are the oldest.
    rest = ids[len(ran):]
    assert sorted(ran) == ids[:len(ran)]
    assert client.zrange(queue.keys.pending, 0, -1) == [jid.encode() for jid in rest]
    assert {client.hget(queue.keys.job(jid), "attempts") for jid in rest} == {b"0"}
