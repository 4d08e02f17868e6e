"""The contract's conformance stories, played for real against a server.

J1..J6 hold the job row, L1..L6 the state machine (docs/contract.md).
Each story returns what it saw or raises `Failed`; `run_check`
turns them into `ok`/`FAIL` lines. Every story runs on its own throwaway
queue and deletes its keys after.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator

import redis

from echomq import Job, Queue, StaleTokenError, WrongKindError, mint, parse_id
from echomq._instrument import discover, verbs
from echomq_bench.load.bulk import drop_queue

__all__ = ["Line", "Failed", "STORIES", "run_check", "expect", "wire_error", "server_ms"]

VERBS = {"enqueue", "browse", "pending_size", "claim", "complete", "retry", "promote", "reap"}


@dataclass(frozen=True)
class Line:
    tag: str
    name: str
    ok: bool
    text: str

    def __str__(self) -> str:
        return f"{self.tag} {self.name} {'ok' if self.ok else 'FAIL'} -- {self.text}"


class Failed(Exception):
    pass


def expect(cond: bool, seen: str) -> None:
    if not cond:
        raise Failed(seen)


def wire_error(fn: Callable[[], object]) -> str:
    """The first word of the error reply a raw call gets, or what it got instead."""
    try:
        got = fn()
    except redis.exceptions.ResponseError as exc:
        return str(exc).split(" ", 1)[0]
    return f"no error (replied {got!r})"


def _held(job: Job | None, seen: str) -> Job:
    """The claimed job; Failed with `seen` when the claim found nothing."""
    if job is None:
        raise Failed(seen)
    return job


def server_ms(client: redis.Redis, key: str | None = None) -> int:
    """The server's clock; on a cluster, the clock of the node that owns `key`."""
    if key is not None and isinstance(client, redis.RedisCluster):
        sec, usec = client.time(target_nodes=client.get_node_from_key(key))
    else:
        sec, usec = client.time()
    return sec * 1000 + usec // 1000


def _queue(client: redis.Redis, max_attempts: int = 3) -> Queue:
    return Queue(client, f"check-{secrets.token_hex(4)}", max_attempts=max_attempts)


def _cleanup(q: Queue) -> None:
    drop_queue(q.client, q.name, sweep=True)


def j1(client: redis.Redis) -> str:
    public = {n for n in dir(Queue) if not n.startswith("_") and callable(getattr(Queue, n))}
    expect(public == VERBS, f"public methods {sorted(public)}")
    return ("the bus module's surface: enqueue, browse, pending_size (of eight verbs) -- "
            "scripts and key shapes are nobody's business")


def j2(client: redis.Redis) -> str:
    q = _queue(client)
    try:
        jid = mint()
        first, second = q.enqueue(jid, b"first"), q.enqueue(jid, b"second")
        row = client.hgetall(q.keys.job(jid))
        expect((first, second) == ("enqueued", "duplicate"), f"replies {first}, {second}")
        expect(row == {b"state": b"pending", b"attempts": b"0", b"payload": b"first"}, f"row {row}")
        expect(q.pending_size() == 1, f"pending {q.pending_size()}")
    finally:
        _cleanup(q)
    return ("enqueue is one script and idempotent by id: first call enqueued, second answered duplicate, "
            "the row untouched and pending holds 1")


def j3(client: redis.Redis) -> str:
    q = _queue(client)
    try:
        ord_id = mint("ORD")
        call = verbs.enqueue(q.keys, ord_id, b"x").evalsha(q.scripts.sha("enqueue"))
        # redis-py leaves execute_command unannotated.
        code = wire_error(lambda: client.execute_command(*call))  # type: ignore[no-untyped-call]
        expect(code == "EMQKIND", f"raw EVALSHA answered {code}")
        try:
            q.enqueue(ord_id, b"x")
            raise Failed("Queue.enqueue accepted an ORD id")
        except WrongKindError as exc:
            expect(exc.code == "EMQKIND", f"code {exc.code}")
        expect(client.exists(q.keys.job(ord_id), q.keys.pending) == 0, "a key was written")
    finally:
        _cleanup(q)
    return ("kind policy lives in the script: an ORD id in the job position answers EMQKIND on the wire -- "
            "the key let it pass, the law did not")


def j4(client: redis.Redis) -> str:
    q = _queue(client)
    try:
        ids = [mint() for _ in range(301)]
        pipe = client.pipeline(transaction=False)
        for jid in ids:
            call = verbs.enqueue(q.keys, jid, b"{}")
            q.scripts[call.verb](keys=call.keys, args=call.args, client=pipe)
        pipe.execute()
        newest = q.browse(limit=5)
        head = client.zrange(q.keys.pending, 0, 0)
        expect(q.pending_size() == 301, f"pending {q.pending_size()}")
        expect(newest == ids[-1:-6:-1], f"browse {newest}")
        expect(head == [ids[0].encode()], f"head {head}")
    finally:
        _cleanup(q)
    return ("newest-first browse over the ids themselves returns the last five minted in reverse mint order; "
            "the very first job sits at the head; 301 pending, no second index anywhere")


def j5(client: redis.Redis) -> str:
    q = _queue(client)
    try:
        order = mint("ORD")
        q.enqueue(mint(), json.dumps({"order": order, "qty": 3}).encode())
        job = _held(q.claim(lease_ms=30_000), "claim found nothing")
        cargo = json.loads(job.payload)
        expect(cargo == {"order": order, "qty": 3}, f"payload {cargo}")
        expect(parse_id(cargo["order"]).kind == "ORD", f"order id {cargo['order']}")
    finally:
        _cleanup(q)
    return ("the payload carries an ORD id and a quantity, never a row -- "
            "decoded and re-parsed on the far side of the wire")


# Digits just inside and just past 2^64-1 ('LygHa16AHYF'), chosen where a
# collating compare and a byte compare disagree: under en_US.UTF-8 'LZ...'
# sorts above 'Ly...' and 'Lyga...' below 'LygH...'.
WITHIN_BOUND = ("JOBLygHa16AHYF", "JOBLZzzzzzzzzz", "JOBKzzzzzzzzzz")
PAST_BOUND = ("JOBLygHa16AHYG", "JOBLyga0000000", "JOBz0000000000")


def j6(client: redis.Redis) -> str:
    q = _queue(client)
    try:
        sha = q.scripts.sha("enqueue")
        def raw(command: tuple[object, ...]) -> object:
            # redis-py leaves execute_command unannotated.
            return client.execute_command(*command)  # type: ignore[no-untyped-call]

        for jid in WITHIN_BOUND + PAST_BOUND:
            code = wire_error(partial(raw, verbs.enqueue(q.keys, jid, b"x").evalsha(sha)))
            want = "EMQID" if jid in PAST_BOUND else "no error (replied b'enqueued')"
            expect(code == want, f"raw EVALSHA of {jid} answered {code}")
        expect(q.pending_size() == len(WITHIN_BOUND), f"pending {q.pending_size()}")
    finally:
        _cleanup(q)
    return (f"the id's digits are bounded by 2^64-1 byte by byte: {len(WITHIN_BOUND)} ids at or under the bound "
            f"enqueued, {len(PAST_BOUND)} just past it answered EMQID, whatever the server's collation locale")


def l1(client: redis.Redis) -> str:
    scripts = set(discover())
    expected = {"enqueue", "claim", "complete", "retry", "promote", "reap"}
    expect(scripts == expected, f"scripts {sorted(scripts)}")
    public = {n for n in dir(Queue) if not n.startswith("_") and callable(getattr(Queue, n))}
    expect(public == VERBS, f"public methods {sorted(public)}")
    return ("claim, complete, retry, promote, reap join enqueue, browse, pending_size -- "
            "five new verbs, every transition one script")


def l2(client: redis.Redis) -> str:
    q = _queue(client)
    try:
        older, newer = mint(), mint()
        q.enqueue(older, b"a")
        q.enqueue(newer, b"b")
        before = server_ms(client, q.keys.active)
        claimed = q.claim(lease_ms=30_000)
        after = server_ms(client, q.keys.active)
        job = _held(claimed, f"claimed {claimed}")
        expect(job.id == older and job.token == 1, f"claimed {job}")
        deadline = client.zscore(q.keys.active, older)
        expect(deadline is not None and before + 30_000 <= deadline <= after + 30_000,
               f"lease deadline {deadline}, server clock {before}..{after}")
        expect(client.hget(q.keys.job(older), "state") == b"active", "state not active")
        expect(q.complete(job.id, job.token) == "ok", "complete did not answer ok")
        expect(client.exists(q.keys.job(older)) == 0, "row still there")
        expect(client.zscore(q.keys.active, older) is None, "still in active")
    finally:
        _cleanup(q)
    return ("claim hands out the oldest job with a server-clock lease and fencing token 1; "
            "complete with the right token retires the row -- nothing remains")


def _expire(client: redis.Redis, q: Queue, lease_ms: int) -> None:
    """Wait on the server's clock until the lease is surely past."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        due = client.zrange(q.keys.active, 0, 0, withscores=True)
        if not due or float(due[0][1]) <= server_ms(client, q.keys.active):
            return
        time.sleep(lease_ms / 4000)


def l3(client: redis.Redis) -> str:
    q = _queue(client)
    try:
        jid = mint()
        q.enqueue(jid, b"work")
        zombie = _held(q.claim(lease_ms=5), "claim found nothing")
        _expire(client, q, 5)
        expect(q.reap() == 1, "reap did not return the orphan")
        claimed = q.claim(lease_ms=30_000)
        holder = _held(claimed, f"holder {claimed}")
        expect(holder.token == 2, f"holder {holder}")
        call = verbs.complete(q.keys, jid, zombie.token).evalsha(q.scripts.sha("complete"))
        # redis-py leaves execute_command unannotated.
        code = wire_error(lambda: client.execute_command(*call))  # type: ignore[no-untyped-call]
        expect(code == "EMQSTALE", f"zombie complete on the wire answered {code}")
        row = client.hgetall(q.keys.job(jid))
        expect(row.get(b"state") == b"active" and row.get(b"attempts") == b"2", f"row after zombie {row}")
        expect(q.complete(jid, holder.token) == "ok", "holder's complete refused")
    finally:
        _cleanup(q)
    return "a stale token is refused on the wire: EMQSTALE; the lease holder's work survives the zombie's complete"


def l4(client: redis.Redis) -> str:
    q = _queue(client)
    try:
        jid = mint()
        q.enqueue(jid, b"work")
        job = _held(q.claim(lease_ms=30_000), "claim found nothing")
        answer = q.retry(jid, job.token, "transient", delay_ms=20)
        row = client.hgetall(q.keys.job(jid))
        expect(answer == "scheduled" and row[b"state"] == b"scheduled", f"retry {answer}, row {row}")
        expect(client.zscore(q.keys.schedule, jid) is not None, "not in the schedule")
        early = q.promote(limit=100)
        deadline = time.monotonic() + 5
        moved = 0
        while moved == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
            moved = q.promote(limit=100)
        expect(early == 0 and moved == 1, f"promote before due {early}, after {moved}")
        again = q.claim(lease_ms=30_000)
        expect(again is not None and again.id == jid and again.token == 2, f"second claim {again}")
    finally:
        _cleanup(q)
    return ("retry parks the job in the schedule, promote moves the due back to pending, "
            "and the next claim hands token 2 -- one job, two lives, one counter")


def l5(client: redis.Redis) -> str:
    q = _queue(client, max_attempts=2)
    try:
        ids = [mint(), mint()]
        for jid in ids:
            q.enqueue(jid, b"doomed")
        for jid in ids:
            for attempt in (1, 2):
                job = q.claim(lease_ms=30_000)
                expect(job is not None and job.id == jid and job.token == attempt, f"claim {job}")
                answer = q.retry(jid, attempt, f"boom {attempt}", delay_ms=0)
                expect(answer == ("scheduled" if attempt == 1 else "dead"), f"retry at {attempt}: {answer}")
                q.promote(limit=100)
        row = client.hgetall(q.keys.job(ids[0]))
        expect(row.get(b"state") == b"dead" and row.get(b"last_error") == b"boom 2", f"row {row}")
        morgue = q.browse(limit=5, state="dead")
        expect(morgue == ids[::-1], f"dead browse {morgue}")
    finally:
        _cleanup(q)
    return ("attempts 2 against max 2 is the morgue: state dead, last_error kept, "
            "and the dead set browses in mint order like everything else")


def l6(client: redis.Redis) -> str:
    q = _queue(client)
    try:
        jid = mint()
        q.enqueue(jid, b"work")
        claimed = q.claim(lease_ms=40)
        orphan = _held(claimed, f"claim {claimed}")
        expect(orphan.token == 1, f"claim {orphan}")
        expect(q.reap() == 0, "reaped a live lease")
        _expire(client, q, 40)
        expect(q.reap() == 1, "reap did not return the orphan")
        expect(client.hget(q.keys.job(jid), "state") == b"pending", "state not pending")
        again = q.claim(lease_ms=30_000)
        expect(again is not None and again.id == jid and again.token == 2, f"next claim {again}")
        try:
            q.complete(jid, orphan.token)
            raise Failed("a late complete with token 1 was accepted")
        except StaleTokenError:
            pass
    finally:
        _cleanup(q)
    return ("a 40 ms lease expires unanswered; reap returns the orphan to pending and the next claim holds token 2 -- "
            "crash recovery is one zset scan on the server's clock")


STORIES: list[tuple[str, str, Callable[[redis.Redis], str]]] = [
    ("J1", "surface", j1), ("J2", "idempotent", j2), ("J3", "kind", j3),
    ("J4", "dividend", j4), ("J5", "cargo", j5), ("J6", "bounds", j6),
    ("L1", "surface", l1), ("L2", "happy", l2), ("L3", "fence", l3),
    ("L4", "schedule", l4), ("L5", "dead", l5), ("L6", "reap", l6),
]


def run_check(client: redis.Redis) -> Iterator[Line]:
    for tag, name, story in STORIES:
        try:
            yield Line(tag, name, True, story(client))
        except Failed as exc:
            yield Line(tag, name, False, str(exc))
        except Exception as exc:  # a story that crashes is a failed line, not a crashed check
            yield Line(tag, name, False, f"{type(exc).__name__}: {exc}")
