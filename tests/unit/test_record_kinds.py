"""Each kind's summary keys are spelled in one place: its record module
(echomq_bench/records/kinds/<kind>.py). The report's renderer of a typed
kind reads summary.json only by handing it to that kind's `RECORD`, the
results history's dispatch reads none, and every record kept in results/
reads through its type and writes back what it held."""

from __future__ import annotations

import ast
import importlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from echomq_bench.records.kinds.gate import GateEntry
from echomq_bench.records.record import CONTAINER, KINDS, ResultsError
from tests.helpers import ROOT

TYPED = tuple(k for k in KINDS if k != CONTAINER
              and hasattr(importlib.import_module(f"echomq_bench.records.kinds.{k}"), "RECORD"))


def _summary_reads(path: Path) -> list[tuple[int, str]]:
    """Every `<x>.summary` in the file that is not the argument of a `<Type>.from_record(...)` call."""
    tree = ast.parse(path.read_text())
    handed = {id(arg) for node in ast.walk(tree) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Attribute) and node.func.attr == "from_record" for arg in node.args}
    return [(node.lineno, ast.unparse(node)) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "summary" and id(node) not in handed]


def test_the_measured_results_have_their_typed_records() -> None:
    assert {"capacity", "compare", "lease", "gate", "faults", "failover", "reshard", "reapcost", "peers"} <= set(TYPED)


@pytest.mark.parametrize("kind", TYPED)
def test_a_typed_kind_s_renderer_reads_the_summary_only_through_its_record(kind: str) -> None:
    assert _summary_reads(ROOT / "echomq_bench" / "report" / "kinds" / f"{kind}.py") == []


@pytest.mark.parametrize("module", ["records/headlines.py", "report/__init__.py", "report/agreement.py",
                                    "report/matrix.py"])
def test_the_headline_dispatch_and_the_report_s_cross_kind_parts_read_no_summary_by_key(module: str) -> None:
    assert _summary_reads(ROOT / "echomq_bench" / module) == []


def _records() -> list[Path]:
    return sorted(p for p in (ROOT / "results").glob("**/summary.json")
                  if json.loads(p.read_text()).get("kind") in TYPED)


def _held(read: Any, written: Any) -> bool:
    """Does `written` hold every key `read` did, with its value (NaN as NaN)?"""
    if isinstance(read, dict):
        return isinstance(written, dict) and all(k in written and _held(v, written[k]) for k, v in read.items())
    if isinstance(read, list):
        return isinstance(written, list) and len(read) == len(written) and all(map(_held, read, written))
    return read == written or (read != read and written != written)


# Copies of a verdict a compare record kept beside it before schema 4 (records.record's changelog): its type
# reads past them, since the verdict holds them.
VERDICT_COPIES = {f"{metric}_{part}" for metric in ("server_us", "throughput", "p99")
                  for part in ("ratio", "ci95", "verdict", "label")}
SLO_VERDICT_COPIES = {"ratio", "ratio_ci95", "label"}


def _without_copies(summary: dict[str, Any]) -> dict[str, Any]:
    builds = {n: {k: v for k, v in e.items() if k not in VERDICT_COPIES} for n, e in summary["builds"].items()}
    slo = summary.get("slo")
    if slo:
        slo = {**slo, "builds": {n: {k: v for k, v in e.items() if k not in SLO_VERDICT_COPIES}
                                 for n, e in slo["builds"].items()}}
    return {**summary, "builds": builds, **({"slo": slo} if slo else {})}


@pytest.mark.parametrize("path", _records(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_kept_record_reads_through_its_type_and_writes_back_what_it_held(path: Path) -> None:
    summary = json.loads(path.read_text())
    kind = summary.pop("kind")
    if kind == "compare" and summary.pop("schema", 0) < 4:
        summary = _without_copies(summary)
    summary.pop("schema", None)
    record_type = importlib.import_module(f"echomq_bench.records.kinds.{kind}").RECORD
    written = json.loads(json.dumps(record_type.from_record(summary).to_record()))
    assert _held(summary, written)
    assert record_type.from_record(written).to_record() == record_type.from_record(summary).to_record()


def test_an_entry_without_a_key_every_writer_writes_is_refused_by_name() -> None:
    with pytest.raises(ResultsError, match="a GateEntry needs 'build'"):
        GateEntry.from_record({"version": "redis 7.0.15"})


def test_a_faults_scenario_s_audit_is_written_typed_and_a_skipped_one_has_none() -> None:
    from echomq_bench.commands.faults import faults_record
    from echomq_bench.load.audit import AuditReport
    from echomq_bench.records.entries import plain
    from echomq_bench.records.kinds.faults import AuditEntry, CheckEntry, FaultsRecord, ScenarioEntry

    report = AuditReport(enqueued=10, completed=9, pending=1, active=0, scheduled=0, dead=0, lost=0, in_two_places=0,
                         unknown=0, double_accepted=0, zombie_sent=2, zombie_accepted=0, refused=2,
                         refused_not_superseded=0, examples={})
    ran = ScenarioEntry("redis", "redis 7.0.15", "zombie", "SIGSTOP", jobs=10, completed=9, passed=True,
                        checks=(CheckEntry(True, "no zombie complete accepted"),),
                        audit=AuditEntry.from_record({**report.to_dict(), "ambiguous": {"total": 1, "resolved": 1}}))
    skipped = ScenarioEntry("redis", "", "pause", "SIGSTOP the server", skipped="needs an embedded server")
    summary = json.loads(json.dumps(plain(faults_record([ran, skipped], {}, quick=True).summary)))
    record = FaultsRecord.from_record(summary)
    audit = record.scenarios[0].audit
    assert audit is not None and (audit.zombie_sent, audit.pending, audit.passed) == (2, 1, True)
    assert audit.ambiguous == {"total": 1, "resolved": 1}
    assert record.scenarios[1].audit is None and "audit" not in summary["scenarios"][1]
    assert record.scenarios[0].checks[0].text == "no zombie complete accepted" and record.quick
    assert record.to_record() == summary


def test_a_reshard_result_lives_with_the_faults_and_writes_its_typed_run() -> None:
    from echomq_bench.faults.reshard_result import judged, reshard_record
    from echomq_bench.load.audit import AuditReport
    from echomq_bench.records.kinds.reshard import ReshardRecord, ReshardRun

    report = AuditReport(enqueued=5, completed=5, pending=0, active=0, scheduled=0, dead=0, lost=0, in_two_places=0,
                         unknown=0, double_accepted=0, zombie_sent=0, zombie_accepted=0, refused=0,
                         refused_not_superseded=0, examples={})
    result = judged(ReshardRun(name="redis-cluster", version="redis 7.0.15", queues=("q0",), slot=1, moves=2,
                               keys_moved=9, moving_s=1.0, move_refused=None, load_s=2.0, errors={}, ops=50,
                               in_no_set=1, without_row=0, doubt_enqueue=0, doubt_enqueue_found=0, doubt_complete=0,
                               doubt_complete_gone=0, audit=report.to_dict()))
    written = reshard_record([result], {})
    run = ReshardRecord.from_record(written.summary).runs[0]
    assert run == result and run.passed is False   # a job row in no set fails the run
    assert judged(replace(run, in_no_set=0)).passed is True
    assert {r["metric"]: r["value"] for r in written.tables["reshard"]}["in_no_set"] == 1
