"""The report's section for a `reshard` run: a queue's slot moved between
two masters, key by key, under load; how often and how much moved, which
calls the cluster refused meanwhile, where every job went (the audit, the
rows in no set, the members without a row), and the call-log check.

The tables have a row per figure and a column per cluster, as failover's;
every figure is read from summary.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from echomq_bench.records.files import Run
from echomq_bench.records.kinds.reshard import ReshardRecord, ReshardRun
from echomq_bench.report.audit import audit_of, audit_table
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table
from echomq_bench.report.calllog_tables import LEGEND as CALL_LOG_LEGEND
from echomq_bench.report.kinds.failover import CALL_LOG_ROWS, per_cluster

__all__ = ["section"]

Row = tuple[str, Callable[[Mapping[str, Any]], Any]]
RunRow = tuple[str, Callable[[ReshardRun], Any]]


def _known(value: Any) -> Any:
    return "?" if value is None else value


def _failed(r: ReshardRun) -> str:
    by_error = ", ".join(f"{k} {v}" for k, v in sorted(r.errors.items()))
    return f"{sum(r.errors.values())} of {_known(r.ops)}" + (f" ({by_error})" if by_error else "")


def _moves(r: ReshardRun) -> str:
    spent = f" in {float(r.moving_s):.2f} s" if r.moving_s is not None else ""
    return f"{_known(r.moves)} moves, {_known(r.keys_moved)} keys{spent}"


MOVE_ROWS: list[RunRow] = [
    ("version", lambda r: _known(r.version)),
    ("queues", lambda r: ", ".join(r.queues) or "?"),
    ("slot moved (queue 0's)", lambda r: _known(r.slot)),
    ("moves between two masters", _moves),
    ("a MIGRATE refused (must be none)", lambda r: r.move_refused or "none"),
    ("calls that failed", _failed),
    ("job rows in no set (must be 0)", lambda r: _known(r.in_no_set)),
    ("set members without a row (must be 0)", lambda r: _known(r.without_row)),
    ("enqueues in doubt", lambda r: f"{_known(r.doubt_enqueue)} ({_known(r.doubt_enqueue_found)} found "
                                    "on the server, so counted)"),
    ("completes in doubt", lambda r: f"{_known(r.doubt_complete)} ({_known(r.doubt_complete_gone)} rows "
                                     "gone, so counted completed)"),
    ("run", lambda r: "PASS" if r.passed else "FAIL"),
]


def _faulted(h: Mapping[str, Any]) -> str:
    counts = (h.get("by_fault") or {}).get("reshard")
    if not isinstance(counts, Mapping):
        return "none"
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"


# Failover's rows but its fault's: the jobs whose calls met the slot moving.
RESHARD_CALL_LOG_ROWS: list[Row] = [row for row in CALL_LOG_ROWS if not row[0].startswith("under the failover")]
RESHARD_CALL_LOG_ROWS.insert(-1, ("while the slot moved", _faulted))


def section(run: Run, out: Path) -> list[Block]:
    runs = ReshardRecord.from_record(run.summary).runs
    names = [r.name for r in runs]
    blocks: list[Block] = [
        Heading("A queue's slot moved under load", anchor="reshard"),
        Para("Queue 0's slot moves to another master and back, again and again, a few keys per MIGRATE, while a "
             "steady load enqueues, claims, completes and reaps. Meanwhile some of the queue's keys are on one node "
             "and some on the other; a call that cannot run whole there is refused, and the audit then accounts for "
             "every job enqueued (echomq-bench reshard)."),
        Table(per_cluster(names, runs, MOVE_ROWS), "The moves and what they left, per cluster", id="reshard-table"),
        Table(audit_table(names, [audit_of(r.audit) for r in runs]), "The audit of every job, per cluster",
              id="reshard-audit"),
    ]
    if any(r.history for r in runs):
        blocks += [Table(per_cluster(names, [r.history for r in runs], RESHARD_CALL_LOG_ROWS),
                         "The call-log check of every job, per cluster", id="reshard-call-log"),
                   Notes([CALL_LOG_LEGEND])]
    return blocks + [Notes(context_lines(run, trials="one run of moves per cluster"))]
