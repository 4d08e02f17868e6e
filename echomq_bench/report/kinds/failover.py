"""The report's section for a `failover` run: how long a cluster took to
promote a replica and serve again after a master was killed (the load's
enqueues, and a worker that only claims and completes), which calls
failed or were left in doubt, what the audit found of every job, and what
the call-log check found, per fault kind.

Both tables have a row per figure and a column per cluster, so any number of
clusters stays narrow; every figure is read from summary.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.records.kinds.failover import FailoverRecord, FailoverRun
from echomq_bench.report.audit import audit_of, audit_table, distinct
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table
from echomq_bench.report.calllog_tables import LEGEND as CALL_LOG_LEGEND, verdict

__all__ = ["section", "per_cluster", "CALL_LOG_ROWS"]

Part = TypeVar("Part")
Row = tuple[str, Callable[[Mapping[str, Any]], Any]]
RunRow = tuple[str, Callable[[FailoverRun], Any]]


def _s(value: Any) -> str:
    return "never" if value is None else f"{float(value):.2f}"


def _enqueued(r: FailoverRun) -> str:
    n, load_s = audit_of(r.audit).enqueued, r.load_s
    if n is None or not load_s:
        return str(n if n is not None else "?")
    return f"{n} in {float(load_s):.1f} s ({int(n) / float(load_s):.0f}/s)"


def _failed(r: FailoverRun) -> str:
    return f"{r.failed_calls} of {r.ops} over {float(r.errors_window_s):.2f} s"


def _by_error(r: FailoverRun) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(r.errors.items())) or "none"


def _resumed_label(runs: Sequence[FailoverRun]) -> str:
    queues = {str((r.queues or ("?",))[0]) for r in runs}
    queue = queues.pop() if len(queues) == 1 else "the victim's queue"
    return f"kill to {queue} enqueues acked again, s"


def _claim_only(r: FailoverRun) -> str:
    if not r.claim_only_recorded:
        return "not recorded"
    return f"{_s(r.kill_to_claim_only_s)} ({r.claim_only_failed} claims failed first)"


def _failover_rows(runs: Sequence[FailoverRun]) -> list[RunRow]:
    return [
        ("version", lambda r: r.version),
        ("queues", lambda r: ", ".join(r.queues) or "?"),
        ("master killed (SIGKILL)", lambda r: r.victim),
        ("replica that took its slots", lambda r: r.new_master),
        ("kill to promoted, s", lambda r: _s(r.kill_to_promoted_s)),
        ("kill to every node ok, s", lambda r: _s(r.kill_to_ready_s)),
        (_resumed_label(runs), lambda r: _s(r.kill_to_resumed_s)),
        ("kill to a claim-only worker served again, s", _claim_only),
        ("jobs enqueued", _enqueued),
        ("calls that failed", _failed),
        ("failed calls by error", _by_error),
        ("enqueues in doubt", lambda r: f"{r.doubt_enqueue} ({r.doubt_enqueue_found} found on the server, so "
                                        "counted)"),
        ("completes in doubt", lambda r: f"{r.doubt_complete} ({r.doubt_complete_gone} rows gone, so counted "
                                         "completed)"),
    ]


def _classes(counts: Any) -> str:
    if not isinstance(counts, Mapping):
        return "none"
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"


def _count(name: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda h: (h.get("counts") or {}).get(name, "?")


CALL_LOG_ROWS: list[Row] = [
    ("call-log check", lambda h: verdict({**h, "ok": h.get("passed")}) or "not recorded"),
    ("jobs classified", lambda h: h.get("jobs", "?")),
    ("ok", _count("ok")), ("lost", _count("lost")), ("recov.", _count("recovered")),
    ("unexp.", _count("unexpected")), ("dup.", _count("duplicated")), ("unknown", _count("indeterminate")),
    ("refused", _count("refused")),
    ("fencing", lambda h: " / ".join(str(_count(k)(h)) for k in ("token_fell", "stale_accepted", "lease_overlap"))),
    ("under the failover (kill to every node ok)", lambda h: _classes((h.get("by_fault") or {}).get("failover"))),
    ("under no fault", lambda h: _classes((h.get("by_fault") or {}).get("none"))),
]


def per_cluster(names: Sequence[str], parts: Sequence[Part], rows: Sequence[tuple[str, Callable[[Part], Any]]]
                ) -> pd.DataFrame:
    """A row per figure, a column per cluster (by its name, numbered when two share one)."""
    columns = distinct(names)
    return pd.DataFrame([{"figure": label, **{n: str(get(part)) for n, part in zip(columns, parts)}}
                         for label, get in rows])


def _examples(runs: Sequence[FailoverRun]) -> list[str]:
    out = []
    for r in runs:
        for name, ids in audit_of(r.audit).examples.items():
            if ids:
                out.append(f"{r.name}, e.g. {name}: {', '.join(map(str, ids[:5]))}")
        for name, ids in (r.history.get("examples") or {}).items():
            if ids:
                out.append(f"{r.name}, call-log check, e.g. {name}: {', '.join(map(str, ids[:5]))}")
    return out


def section(run: Run, out: Path) -> list[Block]:
    runs = FailoverRecord.from_record(run.summary).runs
    names = [r.name for r in runs]
    blocks: list[Block] = [
        Heading("Failover of a cluster master", anchor="failover"),
        Para("A master is killed (SIGKILL) under a steady enqueue load; its replica takes the slots. The times run "
             "from the kill. A call whose reply never came is in doubt: an enqueue whose id shows up anywhere is "
             "counted as enqueued, a complete whose row is gone as completed. The audit then accounts for every "
             "job enqueued (echomq-bench failover)."),
        Table(per_cluster(names, runs, _failover_rows(runs)), "Failover per cluster", id="failover-table"),
        Table(audit_table(names, [audit_of(r.audit) for r in runs]), "The audit of every job, per cluster",
              id="failover-audit"),
    ]
    if any(r.history for r in runs):
        blocks += [Table(per_cluster(names, [r.history for r in runs], CALL_LOG_ROWS),
                         "The call-log check of every job, per cluster", id="failover-call-log"),
                   Notes([CALL_LOG_LEGEND])]
    examples = _examples(runs)
    if examples:
        blocks.append(Notes(examples))
    return blocks + [Notes(context_lines(run, trials="one kill per cluster"))]
