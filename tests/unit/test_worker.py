"""The Worker's settings: checked when made, frozen, and the backoff they give;
and the consume step the Worker shares with the load engine."""

from __future__ import annotations

import dataclasses
import random

import pytest
import redis

from echomq import (InvalidArgumentError, OutcomeUnknownError, ServerReplyError, StaleTokenError, WorkerSettings,
                    WorkerStats)
from echomq._instrument import ConsumeStep, QueueKeys, verbs
from echomq.errors import RepliesLostError
from echomq.worker import OUTCOMES


def test_defaults_claim_one_job_per_worker_and_pump_at_half_the_lease() -> None:
    s = WorkerSettings()
    assert (s.concurrency, s.claim_batch, s.lease_ms, s.pump_interval_s) == (1, 1, 30_000, 15.0)
    assert WorkerSettings(concurrency=8).claim_batch == 8
    assert WorkerSettings(concurrency=8, batch=100).claim_batch == 100
    assert WorkerSettings(lease_ms=1000, pump_interval_ms=50).pump_interval_s == 0.05


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        WorkerSettings().batch = 3  # type: ignore[misc]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("concurrency", 0, "concurrency must be from 1 to 1024, got 0"),
    ("batch", 10_001, "batch must be from 1 to 10000, got 10001"),
    ("lease_ms", 0, "lease_ms must be from 1 to 2147483647, got 0"),
    ("lease_ms", None, "lease_ms must be an integer, got NoneType None"),
    ("pump_interval_ms", 1.5, "pump_interval_ms must be an integer, got float 1.5"),
    ("reap_limit", 100_001, "reap_limit must be from 1 to 100000, got 100001"),
    ("retry_base_ms", -1, "retry_base_ms must be from 0 to 2147483647, got -1"),
    ("poll_ms", True, "poll_ms must be an integer, got bool True"),
    ("burst", 1, "burst must be True or False, got 1"),
    ("handle_signals", "no", "handle_signals must be True or False, got 'no'"),
])
def test_bad_settings_are_refused_naming_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as exc:
        WorkerSettings(**{field: value})  # type: ignore[arg-type]
    assert str(exc.value) == message


def test_retry_delay_is_full_jitter_under_a_doubling_ceiling() -> None:
    s = WorkerSettings(retry_base_ms=100, retry_cap_ms=1000)
    rng = random.Random(7)
    for attempt, ceiling in ((1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (90, 1000)):
        delays = [s.retry_delay_ms(attempt, rng) for _ in range(400)]
        assert 0 <= min(delays) and max(delays) < ceiling
        assert max(delays) > 0.9 * ceiling  # the whole range is used, not a fixed delay
    assert WorkerSettings(retry_base_ms=0).retry_delay_ms(3, rng) == 0


def test_every_outcome_has_its_count() -> None:
    assert OUTCOMES == ("completed", "retried", "dead", "lost", "unsettled", "unknown")
    assert all(getattr(WorkerStats(), outcome) == 0 for outcome in OUTCOMES)


def test_the_consume_step_builds_its_claims_once_and_each_settle_by_the_verbs() -> None:
    keys = QueueKeys("step")
    step = ConsumeStep(keys, lease_ms=5000, batch=3, max_attempts=4)
    assert step.claims == (verbs.claim(keys, 5000),) * 3
    assert all(claim is step.claim for claim in step.claims)  # one call, sent batch times: nothing built per round
    assert step.settle("JOB00000000001", 2) == verbs.complete(keys, "JOB00000000001", 2)
    assert step.settle("JOB00000000001", 2, b"boom", 75) == verbs.retry(keys, "JOB00000000001", 2, b"boom", 75, 4)


@pytest.mark.parametrize(("verb", "reply", "outcome"), [
    ("complete", b"ok", "completed"),
    ("retry", b"scheduled", "retried"),
    ("retry", b"dead", "dead"),
    ("retry", "dead", "dead"),
    ("complete", StaleTokenError("EMQSTALE token 2 no longer holds the lease"), "lost"),
    ("retry", OutcomeUnknownError("the reply was lost and the row cannot tell"), "unknown"),
    ("complete", RepliesLostError("connection lost", [None], (0,)), "unsettled"),
    ("retry", ServerReplyError("NOPERM no permissions"), "unsettled"),
    ("complete", redis.exceptions.ConnectionError("reset"), "unsettled"),
])
def test_the_consume_step_reads_a_settle_reply_as_one_outcome(verb: str, reply: object, outcome: str) -> None:
    assert outcome in OUTCOMES
    assert ConsumeStep.outcome(verb, reply) == outcome
