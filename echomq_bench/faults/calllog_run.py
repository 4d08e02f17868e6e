"""The call-log check of a run under faults: the jobs each fault hit, the
queue's sets at the end, and the checker's verdict
(echomq_bench.measurement.calllog_check) as one more check of the run.

The checker reads only the call-log files and the final sets: none of the
evidence, ledger or audit the other checks use.
"""

from __future__ import annotations

from typing import Any, Mapping

import redis

from echomq._instrument import QueueKeys
from echomq_bench.faults.base import Injection, Lease
from echomq_bench.faults.load import Fleet
from echomq_bench.load.drain import places
from echomq_bench.measurement.calllog_check import FAILING, CallLogCheck, check_files
from echomq_bench.records.kinds.faults import CheckEntry

__all__ = ["mark_struck", "call_log_check", "call_log_rows"]


def mark_struck(fleet: Fleet, kind: str, injection: Injection | None) -> None:
    """The jobs whose holders a fault killed or froze, as nemesis strikes."""
    if injection is None:
        return
    leases: list[Lease] = [*injection.data.get("killed", ()), *injection.data.get("zombies", ())]
    fleet.struck(kind, ((lease.jid, lease.token, lease.t) for lease in leases))


def call_log_check(fleet: Fleet, admin: redis.Redis, keys: QueueKeys, expects_loss: bool = False
                   ) -> tuple[CheckEntry, dict[str, Any]]:
    """The check and the record of it; once the fleet has stopped. Where a
    loss is expected (a restart with nothing on disk), the check holds when
    the call log shows one and nothing else fails."""
    result: CallLogCheck = check_files(fleet.call_log_paths(), places(admin, [keys]))
    if expects_loss:
        others = [k for k in FAILING if k != "lost" and result.counts[k]]
        ok = result.counts["lost"] > 0 and not others and not result.unpaired
        text = f"{result.text()}; a loss is expected and must be found"
    else:
        ok, text = result.passed, result.text()
    return CheckEntry(ok, text), {**result.to_dict(), "expects_loss": expects_loss, "ok": ok}


def call_log_rows(check: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """The call-log check's figures as tidy (metric, value, unit) rows; none when it did not run. The
    metrics keep their `history_` names: faults.csv of older runs carries them."""
    counts = check.get("counts") or {}
    if not counts:
        return []
    fencing = sum(int(counts.get(k, 0)) for k in ("token_fell", "stale_accepted", "lease_overlap"))
    return [*((f"history_{k}", counts.get(k, 0), "jobs") for k in ("lost", "recovered", "unexpected", "duplicated")),
            ("history_fencing", fencing, "jobs"), ("history_passed", int(bool(check.get("ok"))), "bool")]
