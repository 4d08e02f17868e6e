"""The call-log check as the report shows it (faults, the soak, failover):
the Jepsen classification of every job and the fencing checks, read from
the `history` entry a record keeps (echomq_bench.measurement.calllog_check's
`to_dict`). A record written before the check existed has no entry and
shows nothing."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["LEGEND", "COLUMNS", "cells", "verdict", "kinds"]

LEGEND = ("call-log check, from the calls' own log alone (every call's invocation and outcome, the queue's sets "
          "at the end): ok; lost (enqueue accepted, never completed, held nowhere); recov. (enqueue outcome unknown, "
          "yet delivered); unexp. (delivered with no enqueue); dup. (completed twice, or completed and still held); "
          "unknown (enqueue outcome unknown, never seen); refused (enqueue refused, never seen); fencing: tokens "
          "fell / stale completes or retries accepted / leases overlapping. Lost, unexp., dup. and fencing must be 0.")

# column -> class in the record
COLUMNS = (("ok", "ok"), ("lost", "lost"), ("recov.", "recovered"), ("unexp.", "unexpected"),
           ("dup.", "duplicated"), ("unknown", "indeterminate"), ("refused", "refused"))


def cells(counts: Mapping[str, Any]) -> dict[str, Any]:
    """One row's classification and fencing cells from a counts mapping."""
    row = {label: counts.get(name, "") for label, name in COLUMNS}
    row["fencing"] = "/".join(str(counts.get(k, "?")) for k in ("token_fell", "stale_accepted", "lease_overlap"))
    return row


def verdict(check: Mapping[str, Any]) -> str:
    if not check:
        return ""
    if check.get("expects_loss"):
        return "PASS (loss found)" if check.get("ok") else "FAIL"
    return "PASS" if check.get("ok", check.get("passed")) else "FAIL"


def kinds(check: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(fault kind, counts) in the record's order; `none` last."""
    by_fault = check.get("by_fault") or {}
    if not isinstance(by_fault, Mapping):
        return []
    order = [k for k in by_fault if k != "none"] + (["none"] if "none" in by_fault else [])
    return [(str(k), by_fault[k]) for k in order if isinstance(by_fault[k], Mapping)]
