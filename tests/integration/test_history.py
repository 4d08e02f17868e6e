"""The results history with real runs: a run adds its rows as its folder is
written, with the fingerprint the server reports; and the gate takes its
baseline from the history, scripts and all."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from echomq_bench.cli import main
from echomq_bench.commands.gate import run_gate
from echomq_bench.microbench.baseline import slowed_copy
from echomq_bench.microbench.gate import GateOptions, gate_one
from echomq_bench.microbench.history_baseline import HISTORY
from echomq_bench.microbench.runner import QUICK
from echomq_bench.records.fingerprint import fingerprint, fingerprint_id
from echomq_bench.records.history import HISTORY_ENV

TINY = replace(QUICK, rounds=4, calls=15, heavy_calls=4)  # the mechanism, not the resolution (as test_gate's)
# About 3x claim's own cost: caught by the script A/B whatever the machine's noise.
SLOW_ITERATIONS = 5000


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "history.sqlite"
    monkeypatch.setenv(HISTORY_ENV, str(path))
    return path


def rows(path: Path, sql: str = "SELECT run_dir, build, metric, value, fingerprint_id, allocator, "
                                "cpu_flags_sha256 FROM figures ORDER BY run_dir, build, metric") -> list[Any]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_a_check_run_adds_its_rows_once(tmp_path: Path, history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "check"
    assert main(["check", "--server", "redis", "--out", str(out)]) == 0
    meta = json.loads((out / "meta.json").read_text())
    fp = meta["servers"][0]["fingerprint"]
    assert fp["server_version"].startswith("redis ") and fp["allocator"] and len(fp["cpu_flags_sha256"]) == 16
    want = [(str(out.resolve()), "redis", "check.failed_stories", 0.0, fingerprint_id(fp), fp["allocator"],
             fp["cpu_flags_sha256"])]
    assert rows(history) == want
    assert main(["check", "--server", "redis", "--out", str(out)]) == 0   # the same folder again: replaced
    assert rows(history) == want
    assert main(["history", "--reindex", str(out)]) == 0                 # and indexed again: still one
    assert len(rows(history)) == 1
    capsys.readouterr()


@pytest.mark.parametrize("server", ["redis"], indirect=True)
def test_the_gate_reads_its_baseline_from_the_history(server: Any, tmp_path: Path, history: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    first = tmp_path / "r1"
    up = run_gate([server], GateOptions(baseline=tmp_path / "b", settings=TINY, update=True, cases=["claim"],
                                        quiet=True, passes=2), out_dir=first)
    assert up[0].updated
    here = fingerprint(server.client())
    assert rows(history, "SELECT DISTINCT run_dir, fingerprint_id FROM figures WHERE metric = 'gate.claim.ratio'") == [
        (str(first.resolve()), fingerprint_id(here))]

    same = gate_one(server, GateOptions(baseline=HISTORY, settings=TINY, cases=["claim"], tolerance=1.0, quiet=True))
    assert same.baseline == first.resolve() and same.same_machine and same.changed_scripts == []
    recorded = json.loads((first / "summary.json").read_text())["builds"][0]["figures"]["claim"]
    claim = next(v for v in same.verdicts if v.case == "claim")
    assert claim.base_ratio == recorded["server_ratio"] and claim.ab_change is None
    origin = same.baseline_from()   # what the record says, and the gate's text prints, of the baseline's origin
    assert origin.history_run and origin.path == str(first.resolve())
    assert origin.revision and same.differences == []

    # The scripts came back from the history too: a changed claim is measured A/B against the recorded text.
    monkeypatch.setenv("ECHOMQ_LUA_DIR", str(slowed_copy(tmp_path / "slow", "claim", SLOW_ITERATIONS)))
    slow = gate_one(server, GateOptions(baseline=HISTORY, settings=TINY, cases=["claim"], tolerance=1.0, quiet=True))
    assert slow.changed_scripts == ["claim"] and slow.regressions == ["claim"], slow.verdicts


@pytest.mark.parametrize("server", ["redis"], indirect=True)
def test_a_failed_gate_run_is_never_the_next_baseline(server: Any, tmp_path: Path, history: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run_gate([server], GateOptions(baseline=tmp_path / "b", settings=TINY, update=True, cases=["claim"], quiet=True,
                                   passes=2), out_dir=tmp_path / "good")
    monkeypatch.setenv("ECHOMQ_LUA_DIR", str(slowed_copy(tmp_path / "slow", "claim", SLOW_ITERATIONS)))
    failed = run_gate([server], GateOptions(baseline=HISTORY, settings=TINY, cases=["claim"], tolerance=1.0,
                                            quiet=True), out_dir=tmp_path / "bad")
    assert failed[0].regressions == ["claim"]
    again = gate_one(server, GateOptions(baseline=HISTORY, settings=TINY, cases=["claim"], tolerance=1.0, quiet=True))
    assert again.baseline == (tmp_path / "good").resolve() and again.regressions == ["claim"]


def test_gate_cli_refuses_a_history_without_the_build(tmp_path: Path, history: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    args = ["gate", "--count", "time", "--server", "redis", "--quick", "--rounds", "2", "--verbs", "claim",
            "--baseline", "history", "--out", str(tmp_path / "r")]
    assert main(args) == 2
    assert capsys.readouterr().err == (f"echomq-bench gate: error: the results history at {history} holds no gate "
                                       "run of redis; record one with: echomq-bench gate --count time --update\n")
    assert main([*args, "--update"]) == 2
    assert capsys.readouterr().err == ("echomq-bench gate: error: --update writes a baseline file, and with "
                                       "--baseline history every passing gate run is a baseline once recorded: "
                                       "drop --update, or name a folder to write to\n")
    assert not (tmp_path / "r").exists() and not history.exists()   # refused before anything ran


def test_gate_cli_refuses_a_history_of_another_machine_once_the_server_runs(
        tmp_path: Path, history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["gate", "--count", "time", "--server", "redis", "--quick", "--rounds", "2", "--verbs", "claim"]
    assert main([*base, "--update", "--passes", "5", "--baseline", str(tmp_path / "b"),
                 "--out", str(tmp_path / "r1")]) == 0
    conn = sqlite3.connect(history)
    with conn:
        conn.execute("UPDATE figures SET fingerprint_id = 'elsewhere'")   # as if recorded on another machine
    conn.close()
    capsys.readouterr()
    assert main([*base, "--baseline", "history", "--out", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("echomq-bench gate: error: no gate run of redis on this machine fingerprint (")
    assert err.endswith(f"in the results history at {history} that wrote a baseline or named no regression; record "
                        "one with: echomq-bench gate --count time --update\n")
    assert not (tmp_path / "r2").exists()
