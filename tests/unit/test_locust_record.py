"""A Locust run's record, from the run's outcome to the results history and
the report: what a stepped run keeps, reads back through its type, gives
the history per scenario and draws. The run itself, end to end, is
tests/integration/test_locust_record.py."""

from __future__ import annotations

import json
from pathlib import Path

from echomq_bench.load.audit import AuditReport
from echomq_bench.locust.report import Outcome
from echomq_bench.records.files import load
from echomq_bench.records.headlines import headlines
from echomq_bench.records.kinds.locust import LocustRecord, RunEntry
from echomq_bench.records.record import read_record
from echomq_bench.records.files import write_record
from echomq_bench.report.doc import Image, Table
from echomq_bench.report.kinds.locust import section


def _stepped() -> Outcome:
    report = AuditReport(enqueued=300, completed=280, pending=20, active=0, scheduled=0, dead=0, lost=0,
                         in_two_places=0, unknown=0, double_accepted=0, zombie_sent=0, zombie_accepted=0, refused=0,
                         refused_not_superseded=0, examples={})
    steps = [{"consumers": n, "cycles_per_s": rate, "server_main_cpu": 0.2, "client_cpu": client, "machine_cpu": 1.0,
              "seconds": 2.0, "bound": "client"} for n, rate, client in ((1, 90.0, None), (2, 170.0, 0.9))]
    requests = [{"type": "echomq", "name": verb, "metric": metric, "value": value, "unit": unit}
                for verb in ("claim", "complete")
                for metric, value, unit in (("requests", 280, "calls"), ("mean", 0.4, "ms"), ("p50", 0, "ms"),
                                            ("p90", 1, "ms"), ("p99", 3, "ms"), ("p99.9", 7, "ms"))]
    timeline = [{"type": "echomq", "name": verb, "t_s": t, "metric": "requests", "value": 70, "unit": "1/s"}
                for verb in ("claim", "complete") for t in range(4)]
    run = RunEntry("r1", ("locust-r1",), 1, "local", "redis 7.0.15 (redis)", "redis", "redis 7.0.15")
    return Outcome("claim_complete", run, report, settled={"enqueues": 0, "enqueues_counted": 0, "completes": 0,
                                                             "completes_accepted": 0},
                   counters={}, recovery={}, seconds=4.0, cycles_per_s=70.0, missing_processes=0, steps=steps,
                   meta={"settings": {"steps": [1, 2]}}, requests=requests, timeline=timeline)


def test_a_stepped_run_s_record_reads_back_and_gives_the_history_each_step(tmp_path: Path) -> None:
    outcome = _stepped()
    folder = write_record(tmp_path / "run", outcome.record())
    record = read_record(folder)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["kind"] == "locust"
    assert LocustRecord.from_record(record.summary).to_record() == {k: v for k, v in summary.items()
                                                                   if k not in ("kind", "schema")}
    figures = {h.metric: h.value for h in headlines(record)}
    steps = {int(s["consumers"]): s["cycles_per_s"] for s in outcome.steps}
    assert {k: v for k, v in figures.items() if "_at_" in k} == {
        f"locust.claim_complete.cycles_per_s_at_{n}": rate for n, rate in steps.items()}
    assert figures["locust.claim_complete.cycles_per_s"] == outcome.cycles_per_s
    assert figures["locust.claim_complete.complete.p99_ms"] == 3 and figures["locust.claim_complete.audit_passed"] == 1
    assert "locust.claim_complete.call_log_passed" not in figures   # the run kept no call log: nothing to say
    # A step whose client CPU was not read keeps no row for it, rather than an empty one.
    assert [r["consumers"] for r in record.tables["steps"] if r["metric"] == "client_cpu"] == [2]


def test_a_stepped_run_s_section_draws_its_requests_latency_and_steps(tmp_path: Path) -> None:
    folder = write_record(tmp_path / "run", _stepped().record())
    blocks = section(load(folder), tmp_path)
    drawn = [b.path for b in blocks if isinstance(b, Image)]
    assert [p.name for p in drawn] == ["locust_requests.png", "locust_latency.png", "locust_steps.png"]
    assert all(p.stat().st_size > 5_000 for p in drawn)
    steps = next(b.frame for b in blocks if isinstance(b, Table) and b.id == "locust-steps")
    assert list(steps["consumers"]) == [1, 2] and list(steps.columns)[-1] == "bound"
