"""The main job given one server: the lease, the reaper's cap and consumers
answered, the build question kept in its slot and told that a choice needs
two. A server reached by URL is a user's: afterwards it holds exactly what
it held before, its settings unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.records.history import HISTORY_ENV
from echomq_bench.servers import EmbeddedServer

QUESTIONS = ["Which build should I run?", "How long should my lease be?", "What does the reaper's cap cost?",
             "How does throughput grow with consumers?"]


def _answers(out: Path) -> dict[str, list[str]]:
    summary = json.loads((out / "summary.json").read_text())
    return {a["question"]: a["lines"] for a in summary["answers"]}


def _keyspace(server: EmbeddedServer) -> dict[int, dict[bytes, bytes]]:
    """Every key of every db that holds one, with its DUMP (type, value and encoding in one)."""
    found = {}
    for db in range(16):
        with server.client(db=db) as c:
            keys = c.keys("*")
            if keys:
                found[db] = {k: c.dump(k) for k in keys}
    return found


def _users_own(server: EmbeddedServer) -> None:
    """A user's keys: one of each type, a queue of their own under echomq's own prefix, one in another db."""
    with server.client() as c:
        c.set("app:greeting", b"hello")
        c.hset("app:user:1", mapping={"name": "ada", "plan": "pro"})
        c.zadd("app:scores", {"ada": 3.5, "bob": 1.0})
        c.rpush("app:inbox", b"a", b"b")
        c.sadd("app:tags", b"x", b"y")
        c.zadd("emq:{orders}:pending", {"JOB0Nt6z93U3dY": 1.0})
        c.hset("emq:{orders}:job:JOB0Nt6z93U3dY", mapping={"state": "pending", "attempts": "0", "payload": "{}"})
    with server.client(db=3) as c:
        c.set("other-db", b"kept")


def _first_screen(out: Path, version: str) -> None:
    """The four answers in their order, the build one saying what a choice takes, the other three answered."""
    report = (out / "report.md").read_text()
    assert [report.index(q) for q in QUESTIONS] == sorted(report.index(q) for q in QUESTIONS)
    answers = _answers(out)
    assert list(answers) == QUESTIONS
    assert answers[QUESTIONS[0]] == [f"one server given ({version}): a choice between builds needs two; give two "
                                     "or more --server"]
    assert "with a reap every 250 ms (cap 100)" in answers[QUESTIONS[1]][0].lower(), answers
    assert answers[QUESTIONS[2]][0].startswith(f"At cap 100, one reap call blocks {version} for "), answers
    assert answers[QUESTIONS[3]][0].startswith("From 1 to 8 consumers throughput grows"), answers
    parts = {p.name for p in out.iterdir() if (p / "summary.json").is_file()}
    assert "compare" not in parts and {"check", "verbs", "lease", "reapcost", "consumers"} <= parts, parts


@pytest.mark.parametrize("fresh_server", ["redis"], indirect=True)
def test_one_server_by_url_is_answered_and_left_as_it_was_found(
        fresh_server: EmbeddedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "history.sqlite"))
    _users_own(fresh_server)
    before, settings = _keyspace(fresh_server), fresh_server.client().config_get("*")
    assert sum(map(len, before.values())) == 8
    out = tmp_path / "run"

    assert main(["run", "--quick", "--server", f"redis://127.0.0.1:{fresh_server.port}/0", "--out", str(out)]) == 0

    _first_screen(out, fresh_server.version())
    reap = (out / "report.md").read_text()
    assert "the largest M measured (M = 1,000 and 100,000)" in reap
    after = _keyspace(fresh_server)
    assert {db: sorted(keys) for db, keys in after.items()} == {db: sorted(keys) for db, keys in before.items()}
    assert after == before
    with fresh_server.client() as c:
        assert c.config_get("*") == settings
        assert c.get("app:greeting") == b"hello" and c.zrange("emq:{orders}:pending", 0, -1) == [b"JOB0Nt6z93U3dY"]
