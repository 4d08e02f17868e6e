"""The results API and the report built from the committed sample; the
notebooks and the page in a browser are run in tests/integration."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from echomq_bench.report import Report, build_report
from echomq_bench.records.files import ResultsError, load, load_many
from echomq_bench.records.record import SCHEMA, Record, read_record, write_tidy
from echomq_bench.records.files import write_record
from tests.helpers import ROOT

SAMPLE = ROOT / "results" / "sample" / "run"
PARTS = ("check", "verbs", "compare", "consumers", "reapcost", "lease")
FOUR = {"redis6.2", "redis7.0", "valkey8.0", "valkey8.1"}


def test_results_api_reads_every_part_of_the_sample() -> None:
    runs = {r.path.name: r for r in load_many([SAMPLE])}
    assert set(PARTS) <= set(runs)
    compare = runs["compare"]
    assert set(compare.table("compare")["build"]) == FOUR and compare.summary["baseline"] == "redis7.0"
    assert set(compare.table("compare").columns) >= {"build", "trial", "metric", "value", "unit"}
    assert compare.meta["machine"]["cpu_count"] >= 1 and compare.meta["git"]["commit"]
    # The main job's 12 s sweep at time scale 10 confirms a lease by its overruns' upper bound.
    lease = runs["lease"].summary
    assert lease["time_scale"] == 10 and lease["confirmed"] is True and lease["recommended_lease_ms"] > 0
    chosen = next(x for x in lease["servers"][0]["leases"] if x["lease_ms"] == lease["recommended_lease_ms"])
    assert chosen["overran_rate"]["hi"] <= lease["budget"] and chosen["live"] > 3_840   # none seen: 3.84/n
    assert lease["recommendation"].startswith("Set the lease to ")
    assert len(runs["reapcost"].table("reapcost")) > 0


def test_results_api_refuses_what_is_not_a_results_folder(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="no such directory"):
        load(tmp_path / "missing")
    with pytest.raises(ResultsError, match="no meta.json"):
        load(tmp_path)
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(ResultsError, match="not valid JSON"):
        load(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ResultsError, match="holds no results folder"):
        load_many([empty])


QUESTIONS = ["Which build should I run?", "How long should my lease be?", "What does the reaper's cap cost?",
             "How does throughput grow with consumers?"]


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The sample's report, built once: the tests below only read it."""
    return build_report([SAMPLE], tmp_path_factory.mktemp("report"))


def test_report_from_the_sample_answers_first(sample_report: Report) -> None:
    report = sample_report
    page, text = report.html.read_text(), report.md.read_text()
    assert [a.question for a in report.answers] == QUESTIONS
    # The four answers open both files, before any folded section.
    assert [text.index(f"## {q}") for q in QUESTIONS] == sorted(text.index(f"## {q}") for q in QUESTIONS)
    assert text.index(f"## {QUESTIONS[-1]}") < text.index("## Build matrix") < text.index("## Conformance")
    assert page.index('id="answers"') < page.index("<details")
    # Each answer: its sentence, one chart of its own, and its footnote.
    build, lease, reap, consumers = report.answers
    # Every build ranked against one reference, cheapest first, the reference in its place at 1.
    judged = [line for line in build.lines if line != "redis 7.0.15: the reference (1.00×)"]
    assert len(judged) == len(build.lines) - 1
    assert all(line.endswith((": faster", ": slower")) or ": equivalent within ±2%" in line for line in judged)
    assert all(" costs " in line and "× redis 7.0.15's server time per cycle (95% CI " in line for line in judged)
    ratios = [1.0 if "the reference" in line else float(line.split(" costs ")[1].split("×")[0])
              for line in build.lines]
    assert ratios == sorted(ratios) and ratios[0] < 1.0 < ratios[-1]
    assert lease.lines[0].startswith("Set the lease to ") and "reap every 250 ms" in lease.lines[0]
    assert reap.lines[0].startswith("At cap 100, one reap call blocks ") and "cap 10 would block" in reap.lines[0]
    assert consumers.lines[0].startswith("From 1 to 16 consumers throughput grows ")
    for answer in report.answers:
        assert answer.image is not None and answer.image.stat().st_size > 10_000
        assert answer.footnote.count("Bound:") + answer.footnote.count("bound") >= 1
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 6
    for name in re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text):
        assert (report.md.parent / name).is_file() or (SAMPLE / name).is_file() or Path(name).is_file(), name
    assert page.count("Machine:") >= 5 and "Bottleneck:" in page and "Commit" in page


def test_the_terminal_says_what_the_page_says_in_100_columns(sample_report: Report) -> None:
    lines = sample_report.text.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert [line for line in lines if line in QUESTIONS] == QUESTIONS
    for answer in sample_report.answers:   # every sentence of every answer, word for word, wrapped
        for sentence in answer.lines:
            assert sentence in " ".join(line.strip(" -") for line in lines), sentence


def test_a_quick_run_says_plainly_its_verdicts_are_too_short(tmp_path: Path, sample_report: Report) -> None:
    from echomq_bench.report import QUICK_WARNING

    quick = tmp_path / "quick"   # one part of the sample is enough: any record of a quick run says it
    shutil.copytree(SAMPLE / "check", quick)
    meta = json.loads((quick / "meta.json").read_text())
    meta.setdefault("settings", {})["quick"] = True
    (quick / "meta.json").write_text(json.dumps(meta))
    report = build_report([quick], tmp_path / "out")
    assert report.text.startswith("WARNING: Quick run: too few trials")
    assert f'<p class="warning">{QUICK_WARNING}</p>' in report.html.read_text().replace("&#x27;", "'")
    assert QUICK_WARNING not in sample_report.text


def test_report_cli_names_a_bad_folder(tmp_path: Path) -> None:
    from echomq_bench.cli import main

    assert main(["report", str(tmp_path / "nope")]) == 2


# -- records: one frozen shape, written once, rendered by its declared kind ----------------


def _check_rows() -> list[dict[str, object]]:
    return [{"server": "redis", "version": "redis 7.0", "story": "J1 surface", "ok": True, "text": "fine"}]


def _failover_record() -> Record:
    from echomq_bench.faults.failover_result import failover_record
    from echomq_bench.load.audit import AuditReport
    from echomq_bench.records.kinds.failover import FailoverRun

    audit = AuditReport(enqueued=600, completed=590, pending=10, active=0, scheduled=0, dead=0, lost=0,
                        in_two_places=0, unknown=0, double_accepted=0, zombie_sent=0, zombie_accepted=0, refused=0,
                        refused_not_superseded=0, examples={})
    result = FailoverRun(name="redis-cluster", version="redis 7.0.15", queues=("q0", "q1"), victim="127.0.0.1:7001",
                         new_master="127.0.0.1:7004", kill_to_promoted_s=1.37, kill_to_ready_s=1.52,
                         kill_to_resumed_s=1.61, errors_window_s=1.4, errors={"ConnectionError": 12}, ops=640,
                         load_s=4.2, doubt_enqueue=1, doubt_enqueue_found=1, doubt_complete=0,
                         doubt_complete_gone=0, audit=audit.to_dict())
    return failover_record([result], {"machine": {"cpu_model": "test", "cpu_count": 2}})


def test_a_record_round_trips_frozen_with_kind_and_schema(tmp_path: Path) -> None:
    record = Record(kind="capacity", summary={"builds": {"redis": {"cycles_per_s": 1234.5, "bound": "server"}}},
                    tables={"capacity": [{"build": "redis", "trial": 1, "metric": "cycles_per_s", "value": 1234.5,
                                          "unit": "1/s"},
                                         {"build": "redis", "trial": 1, "metric": "cycles", "value": 617}],
                            "empty": []},
                    meta={"machine": {"cpu_count": 2}})
    write_record(tmp_path, record)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert list(on_disk)[:2] == ["kind", "schema"] and on_disk["kind"] == "capacity"
    assert on_disk["schema"] == SCHEMA
    back = read_record(tmp_path)
    assert back == record and back.kind == "capacity" and back.schema == SCHEMA
    assert back.tables["capacity"][1] == {"build": "redis", "trial": 1, "metric": "cycles", "value": 617}
    assert "empty" not in back.tables and not (tmp_path / "empty.csv").exists()
    assert load(tmp_path).kind == "capacity"
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.kind = "compare"  # type: ignore[misc]
    with pytest.raises(TypeError):
        back.summary["builds"] = {}  # type: ignore[index]
    with pytest.raises(ValueError, match="kind"):
        Record(kind="capacity", summary={"kind": "compare"})
    write_record(tmp_path / "newer", dataclasses.replace(record, schema=SCHEMA + 1))
    with pytest.raises(ResultsError, match=f"schema {SCHEMA + 1}; this version reads schema {SCHEMA}"):
        read_record(tmp_path / "newer")


def test_report_renders_by_the_declared_kind_not_the_table_names(tmp_path: Path) -> None:
    # A check table beside the failover one: the folder still renders as the failover it declares.
    record = _failover_record()
    write_record(tmp_path / "run", dataclasses.replace(record, tables={**record.tables, "check": _check_rows()}))
    text = build_report([tmp_path / "run"], tmp_path / "out").md.read_text()
    assert "Failover of a cluster master" in text and "Conformance" not in text


@pytest.mark.parametrize("summary, word", [({}, "declares no kind"), ({"kind": "sideways"}, "unknown kind 'sideways'")])
def test_report_refuses_a_folder_without_a_kind_it_knows(tmp_path: Path, summary: dict[str, str], word: str) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "meta.json").write_text("{}")
    (folder / "summary.json").write_text(json.dumps(summary))
    write_tidy(folder / "check.csv", _check_rows())  # looks like a check; declares otherwise
    with pytest.raises(ResultsError, match=word) as exc:
        build_report([folder], tmp_path / "out")
    assert str(folder) in str(exc.value) and "capacity" in str(exc.value) and "failover" in str(exc.value)


def test_a_failover_folder_renders_its_times_and_audit(tmp_path: Path) -> None:
    write_record(tmp_path, _failover_record())
    report = build_report([tmp_path])
    text = report.md.read_text()
    assert "Failover per cluster" in text and "1.37" in text and "PASS" in text
    assert report.answers == () and "1.37" in report.text   # no question answered: the terminal shows the section
    assert 'id="failover-table"' in report.html.read_text()
