"""Where a raw call meets a script's limits: how many KEYS and ARGV it takes,
what a row's attempts may spell, how often a pump asks whether a slot moves,
and what claim answers when it gave up on a pending set full of damage.

The calls are raw EVALSHAs built by `echomq.verbs`, sent past `Queue`, whose
own checks would refuse most of them before they reach a script.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

import pytest
import redis

from echomq import mint
from echomq._instrument import QueueKeys, Scripts, verbs
from echomq_bench.servers import EmbeddedCluster
from tests.helpers import snapshot

# Each verb's counts, as its script's header spells them.
COUNTS = {"enqueue": (2, 2), "claim": (3, 2), "complete": (2, 2), "retry": (4, 5), "promote": (3, 2),
          "reap": (3, 3)}


def send(client: redis.Redis, scripts: Scripts, call: verbs.ScriptCall) -> Any:
    return client.execute_command(*call.evalsha(scripts.sha(call.verb)))


def job_row(client: Any, keys: QueueKeys, job_id: str, state: str, attempts: str) -> None:
    client.hset(keys.job(job_id), mapping={"state": state, "attempts": attempts, "payload": f"p-{job_id}"})


def last_error(client: redis.Redis, keys: QueueKeys, job_id: str) -> bytes | None:
    value = client.hget(keys.job(job_id), "last_error")
    return None if value is None else bytes(value)


def every_verb_has_work(client: redis.Redis, keys: QueueKeys) -> dict[str, verbs.ScriptCall]:
    """A queue where each verb's healthy call would move something, and that call per verb.
    Pending's head has lost its row: a claim that reached it without its dead set would pop it
    and then fail to bury it."""
    lost_head, waiting, held, expired, due = (mint() for _ in range(5))
    client.zadd(keys.pending, {lost_head: 0, waiting: 0})
    job_row(client, keys, waiting, "pending", "0")
    client.zadd(keys.active, {held: 2 ** 40, expired: 1})
    job_row(client, keys, held, "active", "1")
    job_row(client, keys, expired, "active", "1")
    client.zadd(keys.schedule, {due: 1})
    job_row(client, keys, due, "scheduled", "1")
    return {"enqueue": verbs.enqueue(keys, mint(), b"x"), "claim": verbs.claim(keys, 60_000),
            "complete": verbs.complete(keys, held, 1), "retry": verbs.retry(keys, held, 1, "e", 0, 3),
            "promote": verbs.promote(keys, 100), "reap": verbs.reap(keys, 100, 3)}


@pytest.mark.parametrize("verb", sorted(COUNTS))
def test_a_call_with_a_slot_too_few_or_too_many_is_refused_before_it_writes(client: redis.Redis,
                                                                            verb: str) -> None:
    keys = QueueKeys(f"counts-{secrets.token_hex(3)}")
    scripts = Scripts(client)
    healthy = every_verb_has_work(client, keys)[verb]
    num_keys, num_args = COUNTS[verb]
    assert (len(healthy.keys), len(healthy.args)) == (num_keys, num_args)
    shapes = [replace(healthy, keys=healthy.keys[:-1]), replace(healthy, keys=(*healthy.keys, keys.base + "x")),
              replace(healthy, args=healthy.args[:-1]), replace(healthy, args=(*healthy.args, "x")),
              replace(healthy, keys=(), args=())]
    for call in shapes:
        before = snapshot(client)
        with pytest.raises(redis.ResponseError) as refused:
            send(client, scripts, call)
        assert str(refused.value) == (f"EMQARG {verb} takes {num_keys} keys and {num_args} arguments, "
                                      f"got {len(call.keys)} and {len(call.args)}")
        assert snapshot(client) == before, call
    # The queue was fit for the call all along: the same call whole goes through.
    send(client, scripts, healthy)


# Attempts no script writes: tonumber reads each as a number, and the 17 digits round.
SPOILED = ["inf", "1e400", "0x10", "1e3", "12345678901234567", " 7", "-1", "1.0", ""]


@pytest.mark.parametrize("attempts", SPOILED)
def test_claim_buries_a_row_whose_attempts_is_not_plain_digits(client: redis.Redis, attempts: str) -> None:
    keys = QueueKeys(f"att-{secrets.token_hex(3)}")
    scripts = Scripts(client)
    spoiled, largest = mint(), mint()
    client.zadd(keys.pending, {spoiled: 0, largest: 0})
    job_row(client, keys, spoiled, "pending", attempts)
    # The largest attempts a claim takes: its token, 2^53, is the largest complete takes.
    job_row(client, keys, largest, "pending", str(2 ** 53 - 1))
    reply = send(client, scripts, verbs.claim(keys, 60_000))
    assert reply == [largest.encode(), f"p-{largest}".encode(), 2 ** 53]
    assert client.zrange(keys.dead, 0, -1) == [spoiled.encode()]
    assert last_error(client, keys, spoiled) == b"damaged: attempts is not plain digits up to 2^53 at claim"
    assert send(client, scripts, verbs.claim(keys, 60_000)) == []


def test_claim_buries_a_row_whose_next_token_would_pass_2_to_the_53(client: redis.Redis) -> None:
    keys = QueueKeys(f"att-{secrets.token_hex(3)}")
    scripts = Scripts(client)
    spoiled = mint()
    client.zadd(keys.pending, {spoiled: 0})
    job_row(client, keys, spoiled, "pending", str(2 ** 53))
    assert send(client, scripts, verbs.claim(keys, 60_000)) == []
    assert client.zrange(keys.dead, 0, -1) == [spoiled.encode()]
    assert last_error(client, keys, spoiled) == b"damaged: attempts is 2^53, the last token at claim"


@pytest.mark.parametrize("attempts", SPOILED)
def test_reap_buries_an_active_row_whose_attempts_is_not_plain_digits(client: redis.Redis, attempts: str) -> None:
    keys = QueueKeys(f"att-{secrets.token_hex(3)}")
    scripts = Scripts(client)
    spoiled, whole, largest = mint(), mint(), mint()
    client.zadd(keys.active, {spoiled: 1, whole: 1, largest: 1})
    job_row(client, keys, spoiled, "active", attempts)
    job_row(client, keys, whole, "active", "1")
    job_row(client, keys, largest, "active", str(2 ** 53))
    assert send(client, scripts, verbs.reap(keys, 100, 3)) == 3
    assert client.zrange(keys.pending, 0, -1) == [whole.encode()]
    assert sorted(client.zrange(keys.dead, 0, -1)) == sorted([spoiled.encode(), largest.encode()])
    assert last_error(client, keys, spoiled) == b"damaged: attempts is not plain digits up to 2^53 at reap"
    # 2^53 is a token claim hands out: reap reads it as the count it is.
    assert last_error(client, keys, largest) == b"lease expired"


# Enough missing rows that asking CLUSTER NODES per row shows; few enough to write in a moment.
MISSING_ROWS = 2_000


def slot_owner(cluster: EmbeddedCluster, keys: QueueKeys) -> redis.Redis:
    """A plain client of the master serving the queue's slot: the node its scripts run on."""
    for master in cluster.masters():
        node = master.client()
        try:
            node.zcard(keys.pending)
        except redis.exceptions.MovedError:
            node.close()
            continue
        return node
    raise AssertionError(f"no master serves {keys.pending}")


def calls_of(node: redis.Redis, command: str) -> int:
    """How often the server ran `command` since CONFIG RESETSTAT, from inside scripts included."""
    return int(node.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_a_pump_over_missing_rows_asks_whether_the_slot_moves_once(cluster: EmbeddedCluster) -> None:
    keys = QueueKeys(f"inflight-{secrets.token_hex(3)}")
    node = slot_owner(cluster, keys)
    scripts = Scripts(node)
    # Apart: promote buries its ids with a row each, which reap would then find.
    retries, leases = [mint() for _ in range(MISSING_ROWS)], [mint() for _ in range(MISSING_ROWS)]
    for first in range(0, MISSING_ROWS, 500):
        node.zadd(keys.schedule, {job_id: 1 for job_id in retries[first:first + 500]})
        node.zadd(keys.active, {job_id: 1 for job_id in leases[first:first + 500]})
    for call in (verbs.promote(keys, 100_000), verbs.reap(keys, 100_000, 3)):
        node.config_resetstat()
        assert send(node, scripts, call) == MISSING_ROWS
        # The stats count the commands a script runs, on the node that ran it: the take's one delete shows.
        assert calls_of(node, "zremrangebyrank") == 1
        # Asked, since a missing row may be mid-move; and once, since every row shares the queue's slot.
        assert calls_of(node, "cluster|nodes") == 1, call.verb
    assert node.zcard(keys.dead) == 2 * MISSING_ROWS
    assert last_error(node, keys, retries[-1]) == b"damaged: row missing at promote"
    assert last_error(node, keys, leases[-1]) == b"damaged: row missing at reap"
    node.close()


def test_claim_that_buried_its_scan_limit_answers_the_count_not_empty(client: redis.Redis) -> None:
    keys = QueueKeys(f"scan-{secrets.token_hex(3)}")
    scripts = Scripts(client)
    lost = [mint() for _ in range(150)]
    good = [mint() for _ in range(3)]
    client.zadd(keys.pending, {job_id: 0 for job_id in lost + good})
    for job_id in good:
        job_row(client, keys, job_id, "pending", "0")
    claim = verbs.claim(keys, 60_000)
    # No job handed out, and more may wait: a count, where {} would say pending is empty.
    assert send(client, scripts, claim) == 100
    assert client.zcard(keys.dead) == 100 and client.zcard(keys.pending) == 53
    assert send(client, scripts, claim) == [good[0].encode(), f"p-{good[0]}".encode(), 1]
    assert client.zcard(keys.dead) == 150
    assert send(client, scripts, claim)[0] == good[1].encode()
