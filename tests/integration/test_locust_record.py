"""A Locust run is a record of kind `locust`: the scenario's own command
writes its results folder through the one writer, `echomq-bench report`
renders it (the page as Debian's Chromium shows it) and `echomq-bench
history` lists it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from echomq_bench.records.history import read_history
from echomq_bench.records.kinds.locust import LocustRecord
from echomq_bench.records.record import read_record
from echomq_bench.servers import EmbeddedServer
from tests.helpers import ROOT, SCENARIOS, child_env, finished, locust
from tests.integration.test_report import _chromium

ECHOMQ_BENCH = str(Path(sys.executable).with_name("echomq-bench"))


def bench(*args: str) -> str:
    done = subprocess.run([ECHOMQ_BENCH, *args], capture_output=True, text=True, timeout=120, env=child_env(),
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("server", ["redis"], indirect=True)
@pytest.mark.usefixtures("client")  # an empty server
def test_a_locust_run_is_a_record_the_report_renders_and_the_history_lists(server: EmbeddedServer,
                                                                            tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["-f", str(SCENARIOS / "claim_complete.py"), "--headless", "-u", "4", "-r", "4", "-t", "3s",
            "--server", server.url, "--out", str(out), "--csv", str(tmp_path / "locust")]
    code, output = finished(locust(args, tmp_path))
    assert code == 0, output[-4000:]
    record = read_record(out)
    summary = LocustRecord.from_record(record.summary)
    assert record.kind == "locust" and summary.scenario == "claim_complete" and summary.passed
    assert summary.audit.passed and summary.audit.completed and summary.call_log_passed is True
    # The results history finds the build's fingerprint in meta.json by the build's name.
    assert summary.run.build == record.meta["servers"][0]["name"] and summary.cycles_per_s > 0
    served = {(row["name"], row["metric"]): row["value"] for row in record.tables["requests"]}
    assert served["complete", "requests"] > 0 and ("claim", "p99") in served
    assert sum(row["value"] for row in record.tables["timeline"] if row["name"] == "complete") == \
        served["complete", "requests"]
    assert record.meta["settings"]["users"] == 4
    assert (out / "call_log" / f"{summary.run.run_id}-local.jsonl").is_file()
    # Locust's own CSVs stay where --csv put them; nothing of the record lands beside them.
    assert (tmp_path / "locust_stats.csv").is_file() and not (tmp_path / "audit.json").exists()

    bench("report", str(out))
    dom = _chromium(tmp_path, "--dump-dom", (out / "report.html").as_uri()).stdout
    loaded = re.search(r'data-images-loaded="(\d+)/(\d+)"', dom)
    assert loaded and loaded.group(1) == loaded.group(2) and int(loaded.group(2)) >= 2, loaded
    assert "Verdict: audit PASS, call-log check PASS." in dom
    assert "Requests per second over the run" in dom and "Latency percentiles per request name" in dom

    listed = bench("history", "--kind", "locust", "--out", str(tmp_path / "history"))
    assert "history: " in listed and " 1 runs," in listed
    rows = read_history()
    assert set(rows["run_dir"]) == {str(out.resolve())} and set(rows["kind"]) == {"locust"}
    assert "locust.claim_complete.cycles_per_s" in set(rows["metric"])
