"""The open loop's shortfall rule: below 98% of the requested rate a run
says so, with both rates as the record holds them; at 98% or more it is silent."""

from __future__ import annotations

import pytest

from echomq_bench.capacity.open_loop import SHORTFALL, open_loop_account, open_loop_warnings, shortfall
from echomq_bench.capacity.settings import CapacityError, CapacitySettings

SAID = ("the driver could not keep the schedule, so the server was offered less than was asked and the latencies "
        "are not those of the requested rate")


def test_the_rule_holds_at_98_percent_and_warns_just_below() -> None:
    assert SHORTFALL == 0.98
    assert shortfall(1960.0, 2000.0) is None
    assert shortfall(2000.0, 2000.0) is None and shortfall(2600.0, 2000.0) is None
    # Just short of 98%: the rates are shown rounded down, so it never reads as 98%.
    assert shortfall(1959.99, 2000.0) == f"achieved 1,959/s of 2,000/s requested (97%): {SAID}"
    assert shortfall(1843.0, 2000.0) == f"achieved 1,843/s of 2,000/s requested (92%): {SAID}"
    assert shortfall(0.0, 200_000.0) == f"achieved 0/s of 200,000/s requested (0%): {SAID}"


def test_the_account_reads_the_workers_counts_and_says_what_went_wrong() -> None:
    assert open_loop_account({"w_sent": 10}, CapacitySettings()) is None  # closed loop keeps no schedule
    settings = CapacitySettings(duration_s=2.0, rate=1000.0, reply_timeout_s=3.0)
    counts = {"w_sent": 1900, "due": 2000, "due_sent": 2000, "due_sent_after": 100, "due_answered": 1990,
              "due_timeouts": 10, "due_cycle_timeouts": 4}
    account = open_loop_account(counts, settings)
    assert account == {"requested_per_s": 1000.0, "achieved_per_s": 950.0, "sent_in_window": 1900,
                       "scheduled": 2000, "sent": 2000, "sent_after_window": 100, "answered": 1990,
                       "timeouts": 10, "cycle_timeouts": 4, "reply_timeout_s": 3.0}
    assert open_loop_warnings(account) == [
        f"achieved 950/s of 1,000/s requested (95%): {SAID}",
        "10 of the 2,000 claims due in the window, and 4 of the cycles they began, had no reply within 3 s of "
        "its close: counted as timeouts, absent from the latencies"]
    kept = {**account, "achieved_per_s": 999.0, "timeouts": 0, "cycle_timeouts": 0}
    assert open_loop_warnings(kept) == []
    assert open_loop_warnings({**kept, "sent": 1999}) == ["only 1,999 of the 2,000 claims due in the window were sent"]


def test_a_reply_timeout_must_be_positive() -> None:
    with pytest.raises(CapacityError, match=r"reply timeout must be > 0 s, got 0"):
        CapacitySettings(rate=100.0, reply_timeout_s=0).check()
