"""The audit must pass on an honest run and fail, with counts, on each kind of loss."""

from __future__ import annotations


import redis

from echomq import Queue, StaleTokenError, mint
from echomq_bench.load.audit import Ledger, audit
from tests.helpers import server_ms, wait_past


def run_some(queue: Queue, ledger: Ledger, n: int = 20) -> None:
    for _ in range(n):
        jid = mint()
        ledger.record_enqueue(jid, queue.enqueue(jid, b"x"))
    for _ in range(n // 2):
        job = queue.claim(lease_ms=60_000)
        queue.complete(job.id, job.token)  # type: ignore[union-attr]
        ledger.record_complete(job.id, job.token, accepted=True)  # type: ignore[union-attr]
    job = queue.claim(lease_ms=60_000)
    queue.retry(job.id, job.token, "e", delay_ms=60_000)  # type: ignore[union-attr]
    queue.claim(lease_ms=60_000)


def test_honest_run_passes(queue: Queue, client: redis.Redis) -> None:
    ledger = Ledger()
    run_some(queue, ledger)
    report = audit(client, [queue.name], ledger)
    assert report.passed, report.format()
    assert (report.enqueued, report.completed, report.pending, report.active, report.scheduled) == (20, 10, 8, 1, 1)


def test_zombie_refused_passes_and_merges(queue: Queue, client: redis.Redis) -> None:
    a, b = Ledger(), Ledger()
    jid = mint()
    a.record_enqueue(jid, queue.enqueue(jid, b"x"))
    zombie = queue.claim(lease_ms=5)
    wait_past(client, server_ms(client) + 5)
    queue.reap()
    holder = queue.claim(lease_ms=60_000)
    try:
        queue.complete(jid, zombie.token)  # type: ignore[union-attr]
        b.record_complete(jid, zombie.token, accepted=True, zombie=True)  # type: ignore[union-attr]
    except StaleTokenError:
        b.record_complete(jid, zombie.token, accepted=False, zombie=True)  # type: ignore[union-attr]
    merged = Ledger.from_json(a.to_json()).merge(Ledger.from_json(b.to_json()))
    report = audit(client, [queue.name], merged)
    assert report.passed and report.zombie_sent == 1 and report.refused == 1, report.format()
    queue.complete(jid, holder.token)  # type: ignore[union-attr]
    merged.record_complete(jid, holder.token, accepted=True)  # type: ignore[union-attr]
    assert audit(client, [queue.name], merged).passed


def test_loss_is_reported_with_counts(queue: Queue, client: redis.Redis) -> None:
    ledger = Ledger()
    run_some(queue, ledger)
    victim = queue.browse(limit=1)[0]
    client.zrem(queue.keys.pending, victim)  # a job vanishes, as after a restart without persistence
    report = audit(client, [queue.name], ledger)
    assert not report.passed and report.lost == 1 and report.examples["lost"] == [victim]
    assert "lost 1" in report.format()


def test_double_accept_and_current_token_refusal_fail(queue: Queue, client: redis.Redis) -> None:
    ledger = Ledger()
    jid = mint()
    ledger.record_enqueue(jid, queue.enqueue(jid, b"x"))
    job = queue.claim(lease_ms=60_000)
    ledger.record_complete(jid, job.token, accepted=False)  # type: ignore[union-attr]
    report = audit(client, [queue.name], ledger)
    assert not report.passed and report.refused_not_superseded == 1
    queue.complete(jid, job.token)  # type: ignore[union-attr]
    ledger = Ledger({jid})
    ledger.record_complete(jid, 1, accepted=True)
    ledger.record_complete(jid, 1, accepted=True, zombie=True)
    report = audit(client, [queue.name], ledger)
    assert not report.passed and report.double_accepted == 1 and report.zombie_accepted == 1
