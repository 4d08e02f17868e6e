"""A raw caller that names one job's row in KEYS and another job's id in
ARGV is refused before anything moves: enqueue, complete and retry take
the row of the id they were given, or nothing.

The calls are built with echomq.verbs for one job and given the keys of a
call for another, which is how a caller's bug or a hostile script would
mix them."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis

from echomq import InvalidArgumentError, Queue, mint
from echomq._instrument import ScriptCall, Scripts, verbs, wire_errors
from tests.helpers import snapshot

LEASE_MS = 60_000


def _run(queue: Queue, call: ScriptCall) -> object:
    with wire_errors(queue.client):
        scripts: Scripts = queue.scripts
        return queue.client.execute_command(*call.evalsha(scripts.sha(call.verb)))


def _two_leased(queue: Queue) -> tuple[tuple[str, int], tuple[str, int]]:
    for _ in range(2):
        queue.enqueue(mint("JOB"), b"work")
    a, b = queue.claim(LEASE_MS), queue.claim(LEASE_MS)
    assert a is not None and b is not None
    return (a.id, a.token), (b.id, b.token)


@pytest.mark.parametrize("verb", ["complete", "retry"])
def test_a_fenced_verb_refuses_a_row_that_is_not_its_ids(queue: Queue, client: redis.Redis, verb: str) -> None:
    (a, token_a), (b, token_b) = _two_leased(queue)

    def call(job_id: str, token: int) -> ScriptCall:
        if verb == "complete":
            return verbs.complete(queue.keys, job_id, token)
        return verbs.retry(queue.keys, job_id, token, b"failed", 0, queue.max_attempts)

    # a's row (whose fence a's token passes) with b's id: b would leave active
    # and a's row would go, leaving a in active with no row and b with no set.
    mixed = replace(call(b, token_a), keys=call(a, token_a).keys)
    before = snapshot(client)
    with pytest.raises(InvalidArgumentError, match=f"job row must be .*job:{b}"):
        _run(queue, mixed)
    assert snapshot(client) == before
    landed = b"ok" if verb == "complete" else b"scheduled"  # the fixture's queue allows 2 attempts
    assert _run(queue, call(a, token_a)) == landed
    assert _run(queue, call(b, token_b)) == landed


def test_enqueue_refuses_a_row_that_is_not_its_ids(queue: Queue, client: redis.Redis) -> None:
    a, b = mint("JOB"), mint("JOB")
    mixed = replace(verbs.enqueue(queue.keys, b, b"work"), keys=verbs.enqueue(queue.keys, a, b"work").keys)
    before = snapshot(client)
    with pytest.raises(InvalidArgumentError, match=f"job row must be .*job:{b}"):
        _run(queue, mixed)
    assert snapshot(client) == before


def test_a_row_of_another_queue_is_refused(queue: Queue, client: redis.Redis) -> None:
    (a, token_a), _ = _two_leased(queue)
    other = Queue(client, queue.name + "-other")
    mixed = replace(verbs.complete(queue.keys, a, token_a), keys=(queue.keys.active, other.keys.job(a)))
    before = snapshot(client)
    with pytest.raises(InvalidArgumentError, match="job row must be"):
        _run(queue, mixed)
    assert snapshot(client) == before
