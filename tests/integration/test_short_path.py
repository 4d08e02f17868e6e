"""Each script's short path accepts only what its full checks accept, and does the same to the keyspace.

Every script runs a healthy call on a short path and leaves every other call
to the full checks, from the start (docs/contract.md, "What holds each
promise"). Here each script is also loaded with its short path cut out, so
only the full checks run, and both copies get the same calls on the same
keyspaces: healthy ones, damaged ones, and arguments just inside and outside
what the scripts accept. Their replies and what they leave behind must be
the same, but where the contract says the short path takes something on
trust (a row written outside the scripts as active at a token's text).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq import Queue, mint
from echomq._instrument import lua_dir, verbs

# Per script: the short path to cut (from its first line to the line before the anchor that ends it), and the
# declarations the full checks assign into, kept without their short-path values.
CUTS: dict[str, tuple[str, str, dict[str, str]]] = {
    "enqueue-2.lua": ("if #id == 14 and string.find(id, JOB_ID_SHAPE)", '--- @include "checkJobId"', {}),
    "complete-2.lua": ("local row = redis.pcall('HMGET', jobKey, 'state', 'attempts')", '--- @include "checkJobId"',
                       {}),
    "retry-4.lua": ("local row = redis.pcall('HMGET', jobKey, 'state', 'attempts')", '--- @include "checkJobId"', {}),
    "claim-3.lua": ("if lease and lease >= 1", '--- @include "checkJobId"',
                    {"local lease = #leaseText < 11 and string.find(leaseText, '^%d+$') and tonumber(leaseText)":
                     "local lease"}),
    "reap-3.lua": ("if limit and limit >= 1", '--- @include "checkJobPrefix"',
                   {"local limit = #limitText < 7 and string.find(limitText, '^%d+$') and tonumber(limitText)":
                    "local limit",
                    "local maxAttempts = #maxText < 11 and string.find(maxText, '^%d+$') and tonumber(maxText)":
                    "local maxAttempts"}),
    "promote-3.lua": ("if limit and limit >= 1", '--- @include "checkJobPrefix"',
                      {"local limit = #limitText < 7 and string.find(limitText, '^%d+$') and tonumber(limitText)":
                       "local limit"}),
}


def full_checks_only(folder: Path) -> Path:
    """A copy of lua/ whose scripts run their full checks on every call."""
    (folder / "includes").mkdir(parents=True)
    for inc in (lua_dir() / "includes").glob("*.lua"):
        (folder / "includes" / inc.name).write_text(inc.read_text())
    for name, (first, anchor, keep) in CUTS.items():
        text = (lua_dir() / name).read_text()
        for declared, bare in keep.items():
            assert text.count(declared) == 1, (name, declared)
            text = text.replace(declared, bare)
        start, end = text.index(first), text.index(anchor)
        assert start < end, name
        (folder / name).write_text(text[:start] + text[end:])
    return folder


IDS = st.sampled_from(["good", "good2", "L-in-range", "L-past-bound", "hello", "ORD", "short", "lower"])
TOKENS = st.sampled_from(["1", "1", "1", "1", "2", "01", "0", "1e0", " 1", "9007199254740993", "x", "x"])
INTS = st.sampled_from(["0", "1", "2", "100", "007", "00000000007", "2147483647", "2147483648", "1e3", "", "-1"])
ROWS = st.sampled_from(["pending", "active", "scheduled", "missing", "string", "attempts x", "attempts 1.5",
                        "attempts -1", "attempts inf", "attempts 1e3", "attempts 0x10", "attempts 12345678901234567",
                        "attempts 9007199254740992", "attempts 9007199254740991", "attempts  7", "no payload",
                        "dead"])
SETS = st.sampled_from(["ok", "ok", "ok", "string"])


def _ids() -> dict[str, str]:
    good, good2 = mint(), mint()
    return {"good": good, "good2": good2, "L-in-range": "JOBLygHa16AHYE", "L-past-bound": "JOBLygHa16AHYG",
            "hello": "hello", "ORD": "ORD" + good[3:], "short": "JOB123", "lower": "job" + good[3:]}


def _build(client: redis.Redis, q: Queue, ids: dict[str, str], state: dict[str, Any]) -> None:
    k = q.keys
    for name, (where, row) in state["jobs"].items():
        jid = ids[name]
        key = k.job(jid)
        fields = {"state": {"pending": "pending", "active": "active", "schedule": "scheduled",
                            "dead": "dead"}[where], "attempts": "1", "payload": "p"}
        if row == "string":
            client.set(key, "x")
        elif row != "missing":
            if row in ("pending", "active", "scheduled", "dead"):
                fields["state"] = row
            elif row.startswith("attempts "):
                fields["attempts"] = row.split(" ", 1)[1]
            elif row == "no payload":
                del fields["payload"]
            client.hset(key, mapping=fields)
        score = {"pending": 0, "dead": 0, "active": 1, "schedule": 1}[where]
        client.zadd(getattr(k, where), {jid: score})
    for name, kind in state["sets"].items():
        if kind == "string":
            client.delete(getattr(k, name))
            client.set(getattr(k, name), "x")


def _call(q: Queue, ids: dict[str, str], call: tuple[Any, ...]) -> verbs.ScriptCall:
    verb, *args = call
    k = q.keys
    if verb == "enqueue":
        return verbs.enqueue(k, ids[args[0]], b"p")
    if verb in ("complete", "retry"):
        jid, token = ids[args[0]], args[1]
        made = verbs.complete(k, jid, 1) if verb == "complete" else verbs.retry(k, jid, 1, "e", 0, 2)
        return verbs.ScriptCall(verb, made.keys, (jid, token, *made.args[2:-2], args[2], args[3])
                                if verb == "retry" else (jid, token))
    made = {"claim": verbs.claim(k, 1000), "reap": verbs.reap(k, 100, 2), "promote": verbs.promote(k, 100)}[verb]
    return verbs.ScriptCall(verb, made.keys, (made.args[0], *args))


def _send(client: redis.Redis, q: Queue, call: verbs.ScriptCall) -> str:
    try:
        reply = client.execute_command(*call.evalsha(q.scripts.sha(call.verb)))
    except redis.ResponseError as exc:
        reply = f"error: {exc}"
    return repr(reply).replace(q.name, "Q")


def _keyspace(client: redis.Redis, q: Queue) -> list[tuple[str, Any]]:
    out = []
    for key in sorted(client.scan_iter(match=f"emq:{{{q.name}}}:*")):
        kind = client.type(key).decode()
        if kind == "zset":
            # Lease deadlines and run-ats are read from the clock of the call: only their place is compared.
            clocked = key.endswith((b":active", b":schedule"))
            value: Any = [(m, "t" if clocked and s > 1 else s) for m, s in client.zrange(key, 0, -1, withscores=True)]
        elif kind == "hash":
            value = sorted(client.hgetall(key).items())
        else:
            value = client.get(key)
        out.append((key.decode().replace(q.name, "Q"), value))
    return out


def calls(named: list[str]) -> st.SearchStrategy[tuple[Any, ...]]:
    """A call on the state's own jobs most of the time, so the rows it reads are the ones the state damaged."""
    ids = st.sampled_from(named) | IDS if named else IDS
    return st.one_of(
        st.tuples(st.just("enqueue"), ids),
        st.tuples(st.just("claim"), INTS),
        st.tuples(st.just("complete"), ids, TOKENS),
        st.tuples(st.just("complete"), ids, TOKENS),
        st.tuples(st.just("retry"), ids, TOKENS, INTS, INTS),
        st.tuples(st.just("retry"), ids, TOKENS, INTS, INTS),
        st.tuples(st.just("reap"), INTS, INTS),
        st.tuples(st.just("promote"), INTS),
    )


STATES = st.fixed_dictionaries({
    "jobs": st.dictionaries(IDS, st.tuples(st.sampled_from(["pending", "active", "schedule", "dead"]), ROWS),
                            max_size=4),
    "sets": st.fixed_dictionaries({"pending": SETS, "active": SETS, "schedule": SETS, "dead": SETS}),
})


def _trusted(state: dict[str, Any], call: tuple[Any, ...]) -> bool:
    """The contract's known limit: complete and retry take a row that is active at exactly the token's text
    without checking the id or the token, so a row written outside the scripts that way is taken on trust."""
    if call[0] not in ("complete", "retry") or call[1] not in state["jobs"]:
        return False
    where, row = state["jobs"][call[1]]
    if row in ("missing", "string"):
        return False
    status = row if row in ("pending", "active", "scheduled", "dead") else \
        {"pending": "pending", "active": "active", "schedule": "scheduled", "dead": "dead"}[where]
    attempts = row.split(" ", 1)[1] if row.startswith("attempts ") else "1"
    # retry reads the token as a number on its short path, so a token that is none goes to the full checks.
    well_formed = call[1] in ("good", "good2", "L-in-range") and (call[2] != "x" or call[0] == "retry")
    return status == "active" and attempts == call[2] and not well_formed


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return full_checks_only(tmp_path_factory.mktemp("full") / "lua")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_short_path_answers_as_the_full_checks(client: redis.Redis, full: Path, data: st.DataObject) -> None:
    state = data.draw(STATES, "state")
    call = data.draw(calls(sorted(state["jobs"])), "call")
    tag = secrets.token_hex(3)
    short, whole = Queue(client, f"sp-{tag}"), Queue(client, f"fc-{tag}", lua_dir=full)
    ids = _ids()
    try:
        for q in (short, whole):
            _build(client, q, ids, state)
        replies = [_send(client, q, _call(q, ids, call)) for q in (short, whole)]
        if _trusted(state, call):
            return
        assert replies[0] == replies[1], (state, call)
        assert _keyspace(client, short) == _keyspace(client, whole), (state, call)
    finally:
        for q in (short, whole):
            keys = list(client.scan_iter(match=f"emq:{{{q.name}}}:*"))
            if keys:
                client.delete(*keys)


def test_the_cut_leaves_scripts_that_run_their_full_checks(client: redis.Redis, full: Path) -> None:
    """The copy is what it claims: a healthy call through it gives the same answers as the shipped scripts."""
    q = Queue(client, f"fc-{secrets.token_hex(3)}", lua_dir=full)
    jid = mint()
    assert q.enqueue(jid, b"p") == "enqueued" and q.enqueue(jid, b"p") == "duplicate"
    job = q.claim(60_000)
    assert job is not None and job.id == jid and job.token == 1
    assert q.complete(job.id, job.token) == "ok"
    for name in CUTS:
        assert (full / name).read_text() != (lua_dir() / name).read_text(), name
