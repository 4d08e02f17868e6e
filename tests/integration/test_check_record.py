"""`check --out DIR` keeps the record `run` keeps for its check, without pandas, and `report` renders it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from echomq_bench.records.record import read_record
from echomq_bench.report import build_report

ROOT = Path(__file__).resolve().parents[2]
STORIES = 12  # J1-J6 and L1-L6


def test_check_out_writes_a_check_record_without_pandas(tmp_path: Path) -> None:
    out = tmp_path / "check"
    code = ("import sys\nfrom echomq_bench.cli import main\n"
            f"code = main(['check', '--server', 'redis', '--out', {str(out)!r}])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'matplotlib')), file=sys.stderr)\n"
            "sys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
    assert f"PASS {STORIES}/{STORIES}" in done.stdout

    record = read_record(out)
    assert (record.kind, record.summary["passed"]) == ("check", True)
    rows = record.tables["check"]
    assert len(rows) == STORIES
    assert {row["server"] for row in rows} == {"redis"}
    assert all(row["ok"] for row in rows)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["settings"]["part"] == "check"
    assert [s["name"] for s in meta["servers"]] == ["redis"]

    text = build_report([out], tmp_path / "report").md.read_text()
    assert "## Conformance" in text
    assert f"PASS {STORIES}/{STORIES}" in text


def test_check_without_out_writes_nothing(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "echomq_bench", "check", "--server", "valkey"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"PASS {STORIES}/{STORIES}" in done.stdout
    assert list(tmp_path.iterdir()) == []
