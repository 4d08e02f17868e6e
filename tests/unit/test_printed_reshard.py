"""What `reshard` prints: its record as written, rendered by `record_text`.
A small record built the way the command builds it: the moves, the strays,
the audit and the call-log check are there, and a stray fails the run."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from echomq_bench.faults.reshard_result import judged, reshard_record
from echomq_bench.load.audit import AuditReport
from echomq_bench.records.kinds.reshard import ReshardRun
from echomq_bench.records.files import write_record
from echomq_bench.report import record_text
from echomq_bench.report.text import WIDTH

META: dict[str, Any] = {"created_utc": "2026-12-03T10:00:00+00:00", "machine": {"cpu_model": "test", "cpu_count": 2},
                        "servers": [{"name": "redis", "version": "redis 7.0.15", "allocator": "jemalloc-5.3.0"}]}
CALL_LOG_CHECK = {"jobs": 1747, "counts": {"ok": 1733, "lost": 0, "recovered": 0, "unexpected": 0, "duplicated": 0,
                                           "indeterminate": 14, "refused": 0, "token_fell": 0, "stale_accepted": 0,
                                           "lease_overlap": 0},
                  "by_fault": {"reshard": {"ok": 179, "indeterminate": 14}, "none": {"ok": 1554}}, "passed": True}


def _result() -> ReshardRun:
    audit = AuditReport(enqueued=1733, completed=1704, pending=0, active=0, scheduled=0, dead=29, lost=0,
                        in_two_places=0, unknown=0, double_accepted=0, zombie_sent=0, zombie_accepted=0, refused=0,
                        refused_not_superseded=0, examples={})
    return ReshardRun(name="redis-cluster", version="redis 7.0.15", queues=("rs1", "rs0"), slot=3344, moves=2,
                      keys_moved=408, moving_s=3.17, move_refused=None, load_s=4.2,
                      errors={"ServerUnavailableError": 35}, ops=5155,
                      in_no_set=0, without_row=0, doubt_enqueue=14, doubt_enqueue_found=0, doubt_complete=0,
                      doubt_complete_gone=0, audit=audit.to_dict(), history=CALL_LOG_CHECK)


def _row(text: str, figure: str) -> list[str]:
    cells = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]
    return next(c for c in cells if c[0] == figure)


def test_reshard_prints_the_moves_the_strays_the_audit_and_the_call_log_check(tmp_path: Path) -> None:
    write_record(tmp_path, reshard_record([judged(_result())], META))
    text = record_text(tmp_path)
    assert not [line for line in text.splitlines() if len(line) > WIDTH]
    for figure, value in (("slot moved (queue 0's)", "3344"),
                          ("moves between two masters", "2 moves, 408 keys in 3.17 s"),
                          ("calls that failed", "35 of 5155 (ServerUnavailableError 35)"),
                          ("a MIGRATE refused (must be none)", "none"),
                          ("job rows in no set (must be 0)", "0"), ("run", "PASS"), ("audit", "PASS"),
                          ("while the slot moved", "ok 179, indeterminate 14"), ("unknown", "14")):
        assert _row(text, figure) == [figure, value]
    assert "1733 = 1704 + 0 + 0 + 0 + 29" in text


def test_a_row_in_no_set_fails_the_run(tmp_path: Path) -> None:
    stranded = judged(replace(_result(), in_no_set=1))
    assert not stranded.passed and judged(_result()).passed
    assert not judged(replace(_result(), move_refused="MIGRATE [b'k'] refused: BUSYKEY")).passed
    write_record(tmp_path, reshard_record([stranded], META))
    assert _row(record_text(tmp_path), "run") == ["run", "FAIL"]
