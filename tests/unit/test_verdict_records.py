"""A verdict is kept once, as the type the run judged it with, and labelled by
that type; a results folder is parsed in one place; every audit table comes
from one builder over the typed audit.

The old-schema fixture, fixtures/compare-schema3/, was written by the code of
commit 0239aad (schema 3): two builds over eight trials, one of them not
server-bound, a between-run spread on the headline, closed loop (so p99 is
not judged), and an --slo block in which one search never held. Beside each
verdict it holds the flat copies schema 4 dropped."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from echomq_bench.measurement.runspread import RunSpread
from echomq_bench.measurement.verdicts import judge
from echomq_bench.records.files import load
from echomq_bench.records.headlines import headlines
from echomq_bench.records.kinds.compare import CompareRecord
from echomq_bench.records.kinds.faults import AuditEntry
from echomq_bench.records.record import SCHEMA, Record, ResultsError, read_record, write_tidy
from echomq_bench.records.files import write_record
from echomq_bench.report import record_text

OLD = Path(__file__).parent / "fixtures" / "compare-schema3"


def _old_summary() -> dict[str, object]:
    return json.loads((OLD / "summary.json").read_text())


def test_an_old_compare_record_reads_each_verdict_whole_and_labels_it_as_it_was_stored() -> None:
    old = _old_summary()
    assert old["schema"] == 3
    record = CompareRecord.from_record(read_record(OLD).summary)
    stored = old["builds"]["valkey"]   # type: ignore[index]
    entry = record.builds["valkey"]
    for metric in ("server_us", "throughput"):
        v = entry.verdicts[metric]
        assert v.label() == stored[f"{metric}_label"] and v.text == stored[f"{metric}_verdict"]
        assert v.ratio == stored[f"{metric}_ratio"] and list(v.ci or ()) == stored[f"{metric}_ci95"]
    assert entry.verdicts["server_us"].spread == RunSpread(0.012, 4, 3.0, "measured", 5.1)
    # Not judged in closed loop: the verdict holds only why.
    p99 = entry.verdicts["p99"]
    assert p99.verdict is None and p99.ratio is None and p99.text.startswith("not judged: in closed loop")
    # The --slo verdict says more than the rule: a search that never held. Its words are kept, and its label.
    slo = old["slo"]["builds"]["valkey"]   # type: ignore[index]
    detail = record.slo.builds["valkey"].verdict_detail if record.slo else None
    assert detail is not None and detail.verdict == "slower"
    assert detail.text == slo["verdict"] == "slower (valkey never held in 1 of 6)"
    assert detail.label() == slo["label"] and detail.ratio == slo["ratio"]


def test_the_old_record_written_again_holds_each_verdict_once_and_reads_and_prints_the_same(tmp_path: Path) -> None:
    old = tmp_path / "then" / "compare"
    shutil.copytree(OLD, old)
    record = read_record(old)
    again = write_record(tmp_path / "now" / "compare", Record(
        kind="compare", meta=record.meta, summary=CompareRecord.from_record(record.summary).to_record()))
    written = json.loads((again / "summary.json").read_text())
    assert written["schema"] == SCHEMA == 4
    flat = re.compile(r"(server_us|throughput|p99)_(ratio|ci95|verdict|label)$")
    assert not [k for e in written["builds"].values() for k in e if flat.match(k)]
    assert not {"ratio", "ratio_ci95", "label"} & set(written["slo"]["builds"]["valkey"])
    assert written["builds"]["valkey"]["verdicts"]["p99"] == record.summary["builds"]["valkey"]["verdicts"]["p99"]
    assert headlines(read_record(again)) == headlines(record)
    assert record_text(again).replace(str(again), "DIR") == record_text(old).replace(str(old), "DIR")


def test_a_verdict_keeps_only_the_words_its_rule_cannot_say_and_reads_back_equal() -> None:
    from echomq_bench.records.verdicts import RatioVerdictEntry

    v = judge([1.05, 1.06, 1.04, 1.05, 1.055, 1.045], higher_is_better=False,
              spread=RunSpread(0.01, 5, 4.0, "measured", 3.2))
    assert replace(v, said=v.text).said is None               # the rule's own words are not a second copy
    noted = replace(v, said=f"{v.text}; 1 of 7 rounds failed")
    assert noted.text.endswith("failed") and noted.label().endswith("] slower; 1 of 7 rounds failed")
    for verdict in (v, noted, RatioVerdictEntry(said="not judged"), RatioVerdictEntry()):
        entry = RatioVerdictEntry.of(verdict)
        assert RatioVerdictEntry.from_record(json.loads(json.dumps(entry.to_record()))) == entry
    assert RatioVerdictEntry().to_record() == {} and RatioVerdictEntry(said="why").to_record() == {"text": "why"}
    brief = RatioVerdictEntry.of(v).label(brief=True, min_trials=6, count=False)
    assert re.fullmatch(r"1\.050 \[1\.0\d\d, 1\.0\d\d\] slower", brief)
    assert RatioVerdictEntry.of(v).label(brief=True, min_trials=7) == "1.050 n=6 slower"   # too few for an interval


def test_read_record_and_load_parse_a_folder_alike_and_refuse_alike(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "meta.json").write_text("{}")
    write_tidy(folder / "capacity.csv", [{"build": "redis", "metric": "cycles_per_s", "value": 1234.5},
                                         {"build": "redis", "metric": "cycles", "unit": "cycles", "value": 617}])
    (folder / "summary.json").write_text(json.dumps({"kind": "capacity", "schema": SCHEMA, "builds": {}}))
    record, run = read_record(folder), load(folder)
    assert run.summary == {"kind": "capacity", "schema": SCHEMA, **record.summary} and run.meta == record.meta
    assert record.tables["capacity"] == tuple(
        {k: v for k, v in row.items() if v == v} for row in run.table("capacity").to_dict("records"))
    # A reapcost record from before its kind's first readable schema (here: one that declares none).
    (folder / "summary.json").write_text(json.dumps({"kind": "reapcost"}))
    for read in (read_record, load):
        with pytest.raises(ResultsError, match="a reapcost record of schema 0 is older than this version reads"):
            read(folder)


def test_one_builder_lays_out_every_audit_from_the_typed_entry() -> None:
    from echomq_bench.report.audit import COUNTS, audit_line, audit_table

    one = AuditEntry(enqueued=600, completed=590, pending=10, active=0, scheduled=0, dead=0, lost=0,
                     in_two_places=0, unknown=0, double_accepted=1, zombie_sent=2, zombie_accepted=0, passed=False)
    by_cluster = audit_table(["c", "c"], [one, AuditEntry()])
    assert list(by_cluster.columns) == ["figure", "c (1)", "c (2)"]
    rows = {r["figure"]: (r["c (1)"], r["c (2)"]) for r in by_cluster.to_dict("records")}
    assert rows["audit"] == ("FAIL", "FAIL") and rows["completes accepted twice"] == ("1", "?")
    assert rows["enqueued = completed + pending + active + scheduled + dead"] == ("600 = 590 + 10 + 0 + 0 + 0",
                                                                                 "? = 0 + 0 + 0 + 0 + 0 = 0: MISMATCH")
    assert rows["zombie completes sent / accepted (must be 0)"] == ("2 / 0", "? / ?")
    by_scenario = audit_table(["crash", "pause"], [one, None], COUNTS, heading="scenario", unknown="")
    assert by_scenario.to_dict("records") == [
        {"scenario": "crash", "enqueued": "600", "completed": "590", "lost": "0", "accepted twice": "1",
         "in two places": "0"},
        {"scenario": "pause", "enqueued": "", "completed": "", "lost": "", "accepted twice": "", "in two places": ""}]
    assert audit_line(one) == ("600 enqueued = 590 completed + 10 pending + 0 active + 0 scheduled + 0 dead; lost 0, "
                               "in two places 0, accepted twice 1, zombie completes accepted 0")
