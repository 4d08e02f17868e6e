"""The contract as a plain-Python model, checked against a real server by
Hypothesis stateful testing: random sequences of all eight verbs, with
leases and delays expiring, and damage done from outside (a row deleted, an
attempts no script wrote, a row or a queue key of another type), and after
every step the server's four sets and every row must equal the model's, as
every reply must. Since the model has each job in exactly one set (or
completed and gone) and a refused call in the model changes nothing, the
equality after every step holds those invariants on the server too; tokens
are checked to only rise. The budget is `--model-examples` (default 100
examples of up to 40 steps; docs/design/model-test.md).

Time is made deterministic by choosing only lease and delay values whose
fate the model knows: 0 ms (a delay already due), 1 ms (due once the
server's clock reads its score: `_ripen` waits on that clock before any reap
or promote while such an entry is young) and 10^9 ms (never due within a
test). The deadlines themselves are the server's clock readings: the model records the score the
server gave and checks it lies within [TIME before, TIME after] + lease.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import pytest
import redis
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from echomq import KeyspaceDamageError, Queue, StaleTokenError, mint
from echomq._instrument import verbs
from tests.helpers import server_ms, wait_past

MAX_ATTEMPTS = 2
SHORT_MS, LONG_MS = 1, 10**9
# Derandomized: the CI budget draws the same choices every run; the examples follow
# them except where a reply the model reads back (a score) differs.
SETTINGS = settings(max_examples=100, stateful_step_count=40, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
BURIED: Counter[str] = Counter()   # damaged jobs the model buried, by the verb that met them


@dataclass
class Entry:
    """A member of active or schedule: its score and whether it is surely due."""
    score: int
    due: bool
    never: bool = False


@dataclass
class Model:
    rows: dict[str, dict[bytes, bytes]] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    active: dict[str, Entry] = field(default_factory=dict)
    schedule: dict[str, Entry] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)
    damaged: dict[str, str] = field(default_factory=dict)   # id -> what a script will find wrong with its row
    strings: set[str] = field(default_factory=set)          # ids whose row key holds a string, not a hash

    def holds(self, jid: str, token: int) -> bool:
        row = self.rows.get(jid)
        return (jid not in self.damaged and row is not None and row[b"state"] == b"active"
                and int(row[b"attempts"]) == token)

    def bury_damaged(self, jid: str, verb: str) -> None:
        """A script met a damaged job: its id to the dead set, its reason in
        last_error unless the row key holds another type, left as found."""
        why = self.damaged.pop(jid)
        BURIED[verb] += 1
        if jid not in self.strings:
            row = self.rows.setdefault(jid, {})
            row[b"state"], row[b"last_error"] = b"dead", f"damaged: {why} at {verb}".encode()
        self.dead.add(jid)

    def bury(self, jid: str, error: bytes) -> None:
        """A retry or a reap at max_attempts: the row stays, in the dead set."""
        self.rows[jid][b"state"], self.rows[jid][b"last_error"] = b"dead", error
        self.dead.add(jid)

    def requeue(self, jid: str) -> None:
        """A reap under max_attempts, or a promote: pending again, its row kept."""
        self.rows[jid][b"state"] = b"pending"
        self.pending.add(jid)


class QueueMachine(RuleBasedStateMachine):
    client: redis.Redis  # set by the test, per build

    def __init__(self) -> None:
        super().__init__()
        self.client.flushall()
        self.q = Queue(self.client, "model", max_attempts=MAX_ATTEMPTS)
        self.m = Model()
        self.known: list[str] = []  # every id minted so far, completed ones included
        self.leases: list[tuple[str, int]] = []  # every (id, token) claim handed out
        self.ripe_at: int | None = None  # the latest score of a not-yet-due 1 ms entry, server ms
        self.highest: dict[str, int] = {}  # the highest attempts each row has shown

    # -- time ---------------------------------------------------------------

    def _ripen(self) -> None:
        """Make every 1 ms lease and delay due, so reap and promote are deterministic."""
        if self.ripe_at is not None:
            wait_past(self.client, self.ripe_at)
            for entry in (*self.m.active.values(), *self.m.schedule.values()):
                if not entry.never:
                    entry.due = True
            self.ripe_at = None

    def _timed(self, key: str, jid: str, wait_ms: int, call: object) -> tuple[object, Entry]:
        before = server_ms(self.client)
        reply = call()  # type: ignore[operator]
        after = server_ms(self.client)
        score = int(self.client.zscore(key, jid))
        assert before + wait_ms <= score <= after + wait_ms, (before, score, after, wait_ms)
        if wait_ms == SHORT_MS:
            self.ripe_at = max(score, self.ripe_at or score)
        return reply, Entry(score, due=wait_ms == 0, never=wait_ms == LONG_MS)

    # -- rules --------------------------------------------------------------

    def _pick_lease(self, data: st.DataObject) -> tuple[str, int]:
        """Half the time a current holder's (id, token); else a lease handed out
        earlier (a zombie's, once superseded) or an id with a made-up token."""
        holders = sorted((j, int(self.m.rows[j][b"attempts"])) for j in self.m.active if j not in self.m.damaged)
        pick = data.draw(st.integers(0, 3), label="which lease")
        if holders and pick >= 2:
            return data.draw(st.sampled_from(holders), label="holder")
        if self.leases and pick == 1:
            return data.draw(st.sampled_from(self.leases), label="earlier lease")
        return data.draw(st.sampled_from(self.known), label="id"), data.draw(st.integers(1, 3), label="token")

    @rule(data=st.data(), payload=st.binary(max_size=24))
    def enqueue(self, data: st.DataObject, payload: bytes) -> None:
        # An id whose row was lost while the id still sits in a set is left
        # out: enqueue sees no row and makes a second entry for it, which the
        # scripts bury as damaged when they meet it (a limit in docs/contract.md).
        again = [j for j in self.known if not (j in self.m.damaged and j not in self.m.rows)]
        fresh = not again or data.draw(st.integers(0, 3), label="fresh?") > 0
        jid = mint() if fresh else data.draw(st.sampled_from(again), label="id")
        if fresh:
            self.known.append(jid)
        if jid in self.m.strings:
            with pytest.raises(KeyspaceDamageError):
                self.q.enqueue(jid, payload)
            return
        reply = self.q.enqueue(jid, payload)
        if jid in self.m.rows:
            assert reply == "duplicate"
        else:
            assert reply == "enqueued"
            self.m.rows[jid] = {b"state": b"pending", b"attempts": b"0", b"payload": payload}
            self.m.pending.add(jid)

    @rule(lease=st.sampled_from([SHORT_MS, LONG_MS]))
    def claim(self, lease: int) -> None:
        # Damaged jobs at the head of pending are buried, then the next is handed out.
        while self.m.pending and min(self.m.pending) in self.m.damaged:
            event("claim: a damaged job buried")
            jid = min(self.m.pending)
            self.m.pending.discard(jid)
            self.m.bury_damaged(jid, "claim")
        if not self.m.pending:
            assert self.q.claim(lease) is None
            return
        jid = min(self.m.pending)
        job, entry = self._timed(self.q.keys.active, jid, lease, lambda: self.q.claim(lease))
        row = self.m.rows[jid]
        token = int(row[b"attempts"]) + 1
        assert (job.id, job.payload, job.token) == (jid, row[b"payload"], token)  # type: ignore[attr-defined]
        self.m.pending.discard(jid)
        row[b"attempts"], row[b"state"] = str(token).encode(), b"active"
        self.m.active[jid] = entry
        self.leases.append((jid, token))

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        jid, token = self._pick_lease(data)
        if jid in self.m.strings:
            with pytest.raises(KeyspaceDamageError):
                self.q.complete(jid, token)
        elif self.m.holds(jid, token):
            assert self.q.complete(jid, token) == "ok"
            del self.m.rows[jid]
            del self.m.active[jid]
        else:
            with pytest.raises(StaleTokenError):
                self.q.complete(jid, token)

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data(), error=st.text(max_size=8), delay=st.sampled_from([0, SHORT_MS, LONG_MS]))
    def retry(self, data: st.DataObject, error: str, delay: int) -> None:
        jid, token = self._pick_lease(data)
        if jid in self.m.strings:
            with pytest.raises(KeyspaceDamageError):
                self.q.retry(jid, token, error, delay)
            return
        if not self.m.holds(jid, token):
            with pytest.raises(StaleTokenError):
                self.q.retry(jid, token, error, delay)
            return
        del self.m.active[jid]
        if token < MAX_ATTEMPTS:
            reply, entry = self._timed(self.q.keys.schedule, jid, delay, lambda: self.q.retry(jid, token, error, delay))
            assert reply == "scheduled"
            self.m.rows[jid][b"state"], self.m.rows[jid][b"last_error"] = b"scheduled", error.encode()
            self.m.schedule[jid] = entry
        else:
            event("retry: to the dead set")
            assert self.q.retry(jid, token, error, delay) == "dead"
            self.m.bury(jid, error.encode())

    @rule(limit=st.sampled_from([1, 2, 100]))
    def reap(self, limit: int) -> None:
        self._ripen()
        due = sorted((e.score, jid) for jid, e in self.m.active.items() if e.due)[:limit]
        assert self.q.reap(limit) == len(due)
        for _, jid in due:
            del self.m.active[jid]
            if jid in self.m.damaged:
                event("reap: a damaged job buried")
                self.m.bury_damaged(jid, "reap")
            elif int(self.m.rows[jid][b"attempts"]) >= MAX_ATTEMPTS:
                event("reap: to the dead set")
                self.m.bury(jid, b"lease expired")
            else:
                event("reap: back to pending")
                self.m.requeue(jid)

    @rule(limit=st.sampled_from([1, 2, 100]))
    def promote(self, limit: int) -> None:
        self._ripen()
        due = sorted((e.score, jid) for jid, e in self.m.schedule.items() if e.due)[:limit]
        assert self.q.promote(limit) == len(due)
        for _, jid in due:
            del self.m.schedule[jid]
            # Promote's state write finds a missing row or one of another type;
            # damage inside a whole row (a spoiled attempts) is left to claim.
            if self.m.damaged.get(jid) in ("row missing", "row is not a hash"):
                event("promote: a damaged job buried")
                self.m.bury_damaged(jid, "promote")
            else:
                self.m.requeue(jid)

    @precondition(lambda self: bool(self.m.rows))
    @rule(data=st.data(), bad=st.sampled_from(["lease 0", "limit 0", "token abc", "kind ORD", "id short"]))
    def refused_on_the_wire(self, data: st.DataObject, bad: str) -> None:
        """A caller bypassing the client gets a refusal; the invariant then proves nothing moved."""
        k, s, c = self.q.keys, self.q.scripts, self.client
        jid = data.draw(st.sampled_from(sorted(self.m.rows)))
        calls = {
            "lease 0": verbs.claim(k, "0"),  # type: ignore[arg-type]
            "limit 0": verbs.reap(k, "0", 2),  # type: ignore[arg-type]
            "token abc": verbs.complete(k, jid, "abc"),  # type: ignore[arg-type]
            "kind ORD": verbs.enqueue(k, "ORD" + jid[3:], b""),
            "id short": verbs.retry(k, jid[:-1], 1, "e", 0, 2),
        }
        with pytest.raises(redis.ResponseError, match="^EMQ"):
            c.execute_command(*calls[bad].evalsha(s.sha(calls[bad].verb)))

    # -- damage from outside --------------------------------------------------

    def _live(self) -> list[str]:
        """Jobs in pending, active or schedule whose rows are still whole: what damage can strike."""
        return sorted(j for j in (*self.m.pending, *self.m.active, *self.m.schedule) if j not in self.m.damaged)

    @precondition(lambda self: bool(self._live()))
    @rule(data=st.data(), how=st.sampled_from(["row deleted", "attempts spoiled", "row of another type"]))
    def damage_a_row(self, data: st.DataObject, how: str) -> None:
        jid = data.draw(st.sampled_from(self._live()), label="victim")
        key = self.q.keys.job(jid)
        if how == "row deleted":
            self.client.delete(key)
            del self.m.rows[jid]
            self.m.damaged[jid] = "row missing"
        elif how == "attempts spoiled":
            self.client.hset(key, "attempts", "many")
            self.m.rows[jid][b"attempts"] = b"many"
            self.m.damaged[jid] = "attempts is not plain digits up to 2^53"
        else:
            self.client.delete(key)
            self.client.set(key, "x")
            del self.m.rows[jid]
            self.m.strings.add(jid)
            self.m.damaged[jid] = "row is not a hash"

    @rule(slot=st.sampled_from(["pending", "active", "schedule", "dead"]))
    def a_set_of_another_type(self, slot: str) -> None:
        """The set becomes a string for one call of a verb that writes it: refused,
        nothing moved; then the set is put back as it was."""
        key = getattr(self.q.keys, slot)
        saved = self.client.dump(key)
        self.client.delete(key)
        self.client.set(key, "x")
        verb = {"pending": lambda: self.q.enqueue(mint(), b"p"), "active": lambda: self.q.claim(LONG_MS),
                "schedule": lambda: self.q.promote(100), "dead": lambda: self.q.reap(100)}[slot]
        self._ripen()
        if slot == "dead" and not any(e.due for e in self.m.active.values()):
            # A reap with nothing due writes nothing, so it does not look at the dead set.
            assert verb() == 0
        else:
            with pytest.raises(KeyspaceDamageError, match=f"^EMQDAMAGE {re.escape(key)} is "):
                verb()
        assert self.client.get(key) == b"x"
        self.client.delete(key)
        if saved is not None:
            self.client.restore(key, 0, saved)

    # -- the server equals the model ----------------------------------------

    @invariant()
    def server_equals_model(self) -> None:
        k, m = self.q.keys, self.m
        pipe = self.client.pipeline(transaction=False)
        pipe.keys("*")
        for key in (k.pending, k.active, k.schedule, k.dead):
            pipe.zrange(key, 0, -1, withscores=True)
        rows = sorted(m.rows)
        for jid in rows:
            pipe.hgetall(k.job(jid))
        for jid in sorted(m.strings):
            pipe.get(k.job(jid))
        keys, pending, active, schedule, dead, *got = pipe.execute()
        got, strings = got[:len(rows)], got[len(rows):]
        assert strings == [b"x"] * len(m.strings)   # a row of another type is left as it was found
        expected_keys = {k.job(j).encode() for j in (*rows, *m.strings)}
        for key, members in ((k.pending, m.pending), (k.active, m.active), (k.schedule, m.schedule), (k.dead, m.dead)):
            if members:
                expected_keys.add(key.encode())
        assert set(keys) == expected_keys
        assert {j.decode(): s for j, s in pending} == {j: 0.0 for j in m.pending}
        assert {j.decode(): s for j, s in dead} == {j: 0.0 for j in m.dead}
        assert {j.decode(): int(s) for j, s in active} == {j: e.score for j, e in m.active.items()}
        assert {j.decode(): int(s) for j, s in schedule} == {j: e.score for j, e in m.schedule.items()}
        assert dict(zip(rows, got)) == m.rows
        # Tokens only rise: no row's attempts is ever lower than it was, in one
        # row's life (a completed job's id may be enqueued again, from 0).
        self.highest = {j: v for j, v in self.highest.items() if j in m.rows}
        for jid in rows:
            attempts = m.rows[jid].get(b"attempts", b"")
            if attempts.isdigit():
                assert int(attempts) >= self.highest.get(jid, 0)
                self.highest[jid] = int(attempts)
        # The two read verbs, after every step.
        assert self.q.pending_size() == len(m.pending)
        for state, members in (("pending", m.pending), ("dead", m.dead)):
            newest = sorted(members, reverse=True)
            assert self.q.browse(3, state) == newest[:3]  # type: ignore[arg-type]
            assert self.q.browse(100, state) == newest  # type: ignore[arg-type]


@pytest.mark.slow
def test_server_follows_the_model(client: redis.Redis, request: pytest.FixtureRequest) -> None:
    machine = type("BoundQueueMachine", (QueueMachine,), {"client": client})
    examples = int(request.config.getoption("--model-examples"))
    BURIED.clear()
    run_state_machine_as_test(machine, settings=settings(SETTINGS, max_examples=examples))
    # The damage paths ran, at every verb that meets damage: the equality held through them.
    # The damage paths ran and the equality held through them. Which verbs meet
    # the damage depends on the examples drawn, and those depend on the server's
    # clock readings the model takes back (scores decide promote's order), so
    # only claim, which meets most of it, is required here; each verb's burial
    # is pinned case by case in test_damage.
    assert BURIED["claim"] > 0 and sum(BURIED.values()) > BURIED["claim"], BURIED
