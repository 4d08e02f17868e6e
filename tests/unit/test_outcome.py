"""What a complete or retry whose reply was lost did, judged from the job's
row: every branch, with the verdict and the reply it stands for."""

from __future__ import annotations

import time

import pytest

from echomq import verbs
from echomq.keys import QueueKeys
from echomq.outcome import LEASE_SAFETY, Leases, Row, Verdict, judge, judge_complete, judge_retry

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
    assert judge_retry(Row("dead", 3, b"lease expired"), 3, b"lease expired", 3, False) == Verdict(
        "unknown", why="the row is dead, attempts 3, and our lease may have expired and been reaped")


def test_leases_hold_for_a_safe_share_of_their_length() -> None:
    leases = Leases(limit=2)
    now = time.monotonic()
    leases.add("JOB00000000001", 1, now, 10_000)
    leases.add("JOB00000000002", 1, now - 10, 10_000)   # sent 10 s ago: expired
    assert leases.live("JOB00000000001", 1) and not leases.live("JOB00000000002", 1)
    assert not leases.live("JOB00000000001", 2)          # another token is another lease
    leases.add("JOB00000000003", 1, now - 10_000 * LEASE_SAFETY / 1000 + 0.5, 10_000)
    assert leases.live("JOB00000000003", 1)
    assert not leases.live("JOB00000000001", 1)          # the oldest went when the third came
    leases.drop("JOB00000000003", 1)
    assert not leases.live("JOB00000000003", 1)


KEYS = QueueKeys("q")
JID = "JOB00000000001"


def test_a_call_is_judged_by_its_own_verb_token_error_and_max_attempts() -> None:
    complete = verbs.complete(KEYS, JID, 3)
    assert judge(complete, None, True) == judge_complete(None, 3, True) == Verdict(
        "landed", "ok", "the row is gone while our lease was still running")
    retry = verbs.retry(KEYS, JID, 3, "boom", 500, 3)  # a str error is judged as its UTF-8 bytes
    assert judge(retry, Row("dead", 3, ERR), False) == Verdict("landed", "dead",
                                                               "the job is dead with last_error b'boom'")
    assert judge(verbs.retry(KEYS, JID, 2, ERR, 0, 3), Row("scheduled", 2), False).reply == "scheduled"


def test_only_complete_and_retry_calls_carry_a_fence() -> None:
    assert verbs.fence(verbs.retry(KEYS, JID, 2, ERR, 0, 5)) == verbs.Fence(JID, 2, ERR, 5)
    with pytest.raises(ValueError, match="^only complete and retry calls are fenced by a token, not claim$"):
        verbs.fence(verbs.claim(KEYS, 1000))
