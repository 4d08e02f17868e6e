"""What a complete or retry whose reply was lost did, judged from the job's
row: every branch, with the verdict and the reply it stands for."""

from __future__ import annotations

import time

import pytest

from echomq._instrument import QueueKeys, verbs
from echomq.outcome import (LEASE_SAFETY, Identity, Leases, Row, LostReplyOutcome, ServerClock, judge, judge_complete,
                            judge_enqueue, judge_retry)

ERR = b"boom"


@pytest.mark.parametrize("row, live, kind, reply", [
    (None, True, "landed", "ok"),                        # gone while only we could hold it: ours deleted it
    (None, False, "unknown", ""),                        # gone, but another holder may have completed it
    (Row("active", 3), False, "not_landed", ""),         # still ours: safe to send again
    (Row("active", 4), True, "stale", ""),               # claimed again: ours would have deleted the row
    (Row("pending", 3), False, "stale", ""),             # reaped: ours would have deleted the row
    (Row("dead", 3, b"lease expired"), False, "stale", ""),
])
def test_judge_complete(row: Row | None, live: bool, kind: str, reply: str) -> None:
    verdict = judge_complete(row, 3, live)
    assert (verdict.kind, verdict.reply) == (kind, reply)
    assert verdict.why


@pytest.mark.parametrize("row, token, live, kind, reply", [
    (Row("active", 1), 1, False, "not_landed", ""),
    (Row("scheduled", 1, ERR), 1, False, "landed", "scheduled"),
    (Row("dead", 3, ERR), 3, False, "landed", "dead"),              # token at max_attempts: buried with our error
    (Row("dead", 3, b"lease expired"), 3, False, "stale", ""),      # reaped into the morgue instead
    (Row("pending", 1, ERR), 1, True, "landed", "scheduled"),       # promoted: no reap within our lease
    (Row("pending", 1, ERR), 1, False, "unknown", ""),              # promoted, or reaped: cannot tell
    (Row("active", 2), 1, True, "landed", "scheduled"),             # claimed again within our lease
    (Row("active", 2), 1, False, "unknown", ""),
    (None, 1, True, "landed", "scheduled"),
    (None, 1, False, "unknown", ""),
    (Row("active", 1), 2, True, "unknown", ""),                     # attempts below our token: not ours to say
])
def test_judge_retry(row: Row | None, token: int, live: bool, kind: str, reply: str) -> None:
    verdict = judge_retry(row, token, ERR, 3, live)
    assert (verdict.kind, verdict.reply) == (kind, reply)


def test_a_retry_whose_error_reads_like_reap_is_never_judged_by_it() -> None:
    assert judge_retry(Row("dead", 3, b"lease expired"), 3, b"lease expired", 3, False) == LostReplyOutcome(
        "unknown", why="the row is dead, attempts 3, and our lease may have expired and been reaped")


SERVER = Identity("a" * 40, "b" * 40)


def test_leases_hold_for_a_safe_share_of_their_length() -> None:
    leases = Leases(limit=2)
    now = time.monotonic()
    leases.add("JOB00000000001", 1, now, 10_000, SERVER)
    leases.add("JOB00000000002", 1, now - 10, 10_000, SERVER)   # sent 10 s ago: expired
    assert leases.live("JOB00000000001", 1, SERVER) and not leases.live("JOB00000000002", 1, SERVER)
    assert not leases.live("JOB00000000001", 2, SERVER)          # another token is another lease
    leases.add("JOB00000000003", 1, now - 10_000 * LEASE_SAFETY / 1000 + 0.5, 10_000, SERVER)
    assert leases.live("JOB00000000003", 1, SERVER)
    assert not leases.live("JOB00000000001", 1, SERVER)          # the oldest went when the third came
    leases.drop("JOB00000000003", 1)
    assert not leases.live("JOB00000000003", 1, SERVER)


@pytest.mark.parametrize("claimed_on, now", [
    (SERVER, Identity("c" * 40, SERVER.replid)),   # the server restarted: a new run id
    (SERVER, Identity(SERVER.run_id, "d" * 40)),   # a replica promoted, or a master resynced: a new history
    (SERVER, None),                                # the identity cannot be read now
    (None, SERVER),                                # nor could it when the claim went out
])
def test_a_lease_proves_nothing_on_another_server_or_an_unknown_one(claimed_on: Identity | None,
                                                                     now: Identity | None) -> None:
    leases = Leases()
    leases.add("JOB00000000001", 1, time.monotonic(), 10_000, claimed_on)
    assert not leases.live("JOB00000000001", 1, now)
    assert leases.live("JOB00000000001", 1, claimed_on) is (claimed_on is not None)


def test_an_identity_is_read_from_info_or_not_at_all() -> None:
    assert Identity.of({"run_id": "r", "master_replid": "m", "redis_version": "7.0.15"}) == Identity("r", "m")
    assert Identity.of({"run_id": "r"}) is None


@pytest.mark.parametrize("row, kind, reply", [
    (None, "unknown", ""),                              # never ran, or ran and was completed since
    (Row("pending", 0, payload=b"ours"), "landed", "enqueued"),
    (Row("active", 1, payload=b"ours"), "landed", "enqueued"),   # claimed already: still the job we sent
    (Row("pending", 0, payload=b"theirs"), "landed", "duplicate"),
])
def test_judge_enqueue(row: Row | None, kind: str, reply: str) -> None:
    verdict = judge_enqueue(row, b"ours")
    assert (verdict.kind, verdict.reply) == (kind, reply)


KEYS = QueueKeys("q")
JID = "JOB00000000001"


def test_a_call_is_judged_by_its_own_verb_token_error_and_max_attempts() -> None:
    complete = verbs.complete(KEYS, JID, 3)
    assert judge(complete, None, True) == judge_complete(None, 3, True) == LostReplyOutcome(
        "landed", "ok", "the row is gone while our lease was still running")
    retry = verbs.retry(KEYS, JID, 3, "boom", 500, 3)  # a str error is judged as its UTF-8 bytes
    assert judge(retry, Row("dead", 3, ERR), False) == LostReplyOutcome("landed", "dead",
                                                               "the job is dead with last_error b'boom'")
    assert judge(verbs.retry(KEYS, JID, 2, ERR, 0, 3), Row("scheduled", 2), False).reply == "scheduled"


def test_only_complete_and_retry_calls_carry_a_fence() -> None:
    assert verbs.fence(verbs.retry(KEYS, JID, 2, ERR, 0, 5)) == verbs.Fence(JID, 2, ERR, 5, 0)
    with pytest.raises(ValueError, match="^only complete and retry calls are fenced by a token, not claim$"):
        verbs.fence(verbs.claim(KEYS, 1000))


@pytest.mark.parametrize("step_s, live", [
    (0.0, True),     # the server's clock kept pace with ours: 5 s of a 10 s lease have run
    (-30.0, True),   # it stepped back: the server reaps later than we count, the proof stands
    (2.0, True),     # 7 s have run on the server's clock, under the 9 s trusted
    (4.5, False),    # 9.5 s have run there: past the trusted share
    (120.0, False),  # stepped past the whole lease: the server may have reaped and handed it out
])
def test_a_forward_step_of_the_server_clock_counts_as_time_the_lease_has_run(step_s: float, live: bool) -> None:
    now = time.monotonic()
    at_claim = ServerClock(server_s=1_000_000.0, local_s=now - 5)
    read_now = ServerClock(server_s=1_000_000.0 + 5 + step_s, local_s=now)
    leases = Leases()
    leases.add("JOB00000000001", 1, now - 5, 10_000, SERVER, at_claim)
    assert leases.live("JOB00000000001", 1, SERVER, read_now) is live
    assert leases.live("JOB00000000001", 1, SERVER)  # without a reading of the server's clock, ours alone


def test_the_server_clock_is_read_from_info() -> None:
    assert ServerClock.of({"server_time_usec": 1_700_000_000_123_456}, 7.0) == ServerClock(1_700_000_000.123456, 7.0)
    assert ServerClock.of({"redis_version": "6.0.20"}, 7.0) is None   # before 6.2 the server does not say
