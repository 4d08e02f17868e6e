"""An open loop's account of its schedule: the claims due inside the window,
how many were sent, before or after it closed, how many were answered and
how many timed out; and whether the rate asked for was kept.

The achieved rate is the claims sent inside the window, per second of it. Below `SHORTFALL` of `--rate` the
run says so in its warnings, which the printed summary, summary.json and
the report all carry: the server was offered less than was asked, so its
latencies are not those of the requested rate.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from echomq_bench.capacity.settings import CapacitySettings

__all__ = ["SHORTFALL", "open_loop_account", "open_loop_line", "open_loop_warnings", "shortfall"]

SHORTFALL = 0.98   # an achieved rate below this share of --rate is reported


def shortfall(achieved_per_s: float, requested_per_s: float) -> str | None:
    """The warning when `achieved_per_s` is below SHORTFALL of `requested_per_s`, else None.

    Both figures are shown rounded down, so a rate just short of the
    request never reads as the request itself."""
    if achieved_per_s >= SHORTFALL * requested_per_s:
        return None
    percent = math.floor(round(100 * achieved_per_s / requested_per_s, 6))
    return (f"achieved {math.floor(achieved_per_s):,}/s of {requested_per_s:,.0f}/s requested ({percent}%): the "
            "driver could not keep the schedule, so the server was offered less than was asked and the latencies "
            "are not those of the requested rate")


def open_loop_account(counts: Mapping[str, int], settings: CapacitySettings) -> dict[str, Any] | None:
    """The schedule's account for the record, from the workers' summed counts; None in closed loop.

    `scheduled` claims were due inside the window; of them `sent` went out
    (`sent_after_window` once it had closed), `answered` came back and
    `timeouts` did not within `reply_timeout_s` of its close; `cycle_timeouts`
    of the cycles they began were left unfinished then. `sent_in_window`
    counts every claim sent inside it, whenever due: the achieved rate."""
    if settings.rate is None:
        return None
    return {"requested_per_s": settings.rate, "achieved_per_s": counts.get("w_sent", 0) / settings.duration_s,
            "sent_in_window": counts.get("w_sent", 0), "scheduled": counts.get("due", 0),
            "sent": counts.get("due_sent", 0), "sent_after_window": counts.get("due_sent_after", 0),
            "answered": counts.get("due_answered", 0), "timeouts": counts.get("due_timeouts", 0),
            "cycle_timeouts": counts.get("due_cycle_timeouts", 0), "reply_timeout_s": settings.reply_timeout_s}


def open_loop_warnings(account: Mapping[str, Any] | None) -> list[str]:
    """What the account says a reader must know: a shortfall of the rate, and replies that never came."""
    if account is None:
        return []
    out = []
    short = shortfall(account["achieved_per_s"], account["requested_per_s"])
    if short:
        out.append(short)
    if account["sent"] != account["scheduled"]:
        out.append(f"only {account['sent']:,} of the {account['scheduled']:,} claims due in the window were sent")
    if account["timeouts"] or account["cycle_timeouts"]:
        out.append(f"{account['timeouts']:,} of the {account['sent']:,} claims due in the window, and "
                   f"{account['cycle_timeouts']:,} of the cycles they began, had no reply within "
                   f"{account['reply_timeout_s']:g} s of its close: counted as timeouts, absent from the latencies")
    return out


def open_loop_line(account: Mapping[str, Any]) -> str:
    """The account in one line, as the capacity section (report and terminal) shows it."""
    return (f"open loop at {account['requested_per_s']:,.0f}/s: {account['scheduled']:,} claims due in the "
            f"window, {account['sent']:,} sent ({account['sent_after_window']:,} after it closed), "
            f"{account['answered']:,} answered, {account['timeouts']:,} timed out "
            f"(replies awaited {account['reply_timeout_s']:g} s); achieved {math.floor(account['achieved_per_s']):,}/s")
