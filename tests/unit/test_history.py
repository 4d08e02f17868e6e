"""The results history without a server: records into rows, the append hook,
re-indexing, step detection on series of known shape, and the CLI's refusals."""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from echomq_bench.cli import main
from echomq_bench.measurement.steps import fit_segments, flag_steps
from echomq_bench.measurement.stepverdict import judge_steps
from echomq_bench.records.fingerprint import fingerprint_id
from echomq_bench.records.headlines import headlines
from echomq_bench.records.history import HISTORY_ENV, gate_runs, history_path, read_history, reindex
from echomq_bench.records.record import KINDS, Record, read_record
from echomq_bench.records.files import write_record
from echomq_bench.report.history import all_series, flagged
from tests.helpers import ROOT

FP = {"cpu_model": "Test CPU", "cpu_flags_sha256": "0123456789abcdef", "cores": 2,
      "server_version": "redis 7.0.15", "allocator": "jemalloc-5.3.0"}
OTHER_FP = {**FP, "cores": 64}
START = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A history of this test's own."""
    path = tmp_path / "history.sqlite"
    monkeypatch.setenv(HISTORY_ENV, str(path))
    return path


def commit_of(n: int) -> str:
    return hashlib.sha1(f"commit {n}".encode()).hexdigest()


def gate_record(n: int, claim_us: float, *, fp: dict[str, Any] = FP, regressions: tuple[str, ...] = (),
                update: bool = False) -> Record:
    """A gate run at commit n (an hour after commit n-1), as run_gate records one."""
    verdicts = [{"case": "claim", "server_us": claim_us, "now_ratio": claim_us / 2.0},
                {"case": "complete", "server_us": 3.0, "now_ratio": 1.5}]
    meta = {"created_utc": (START + dt.timedelta(hours=n)).isoformat(timespec="seconds"),
            "git": {"commit": commit_of(n), "dirty": False},
            "machine": {"cpu_model": fp["cpu_model"], "cpu_count": fp["cores"]},
            "servers": [{"name": "redis", "version": "redis 7.0.15", "fingerprint": fp}],
            "settings": {"gate": {"update": update, "rounds": 2}}}
    summary = {"passed": not regressions, "builds": [
        {"build": "redis", "version": "redis 7.0.15", "regressions": list(regressions), "inconclusive": [],
         "updated": update, "verdicts": verdicts}]}
    return Record(kind="gate", summary=summary, meta=meta)


def series_with_step(seed: int, n: int = 12, at: int | None = 6, size: float = 0.15,
                     noise: float = 0.02) -> list[float]:
    """n runs of a 10 µs figure with gaussian noise; from index `at` on, `size` higher."""
    rng = random.Random(seed)
    return [10.0 * (1 + size if at is not None and i >= at else 1.0) * (1 + rng.gauss(0, noise)) for i in range(n)]


def rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT run_dir, revision, metric, value FROM figures ORDER BY run_dir, metric").fetchall()
    finally:
        conn.close()


# -- the table: one row set per run, written by the one writer --------------------------


def test_the_session_history_is_not_the_checkouts() -> None:
    here = history_path()
    assert here is not None and not here.resolve().is_relative_to(ROOT / "results")


def test_write_record_appends_one_row_set_per_run(tmp_path: Path, history: Path) -> None:
    write_record(tmp_path / "r1", gate_record(1, 20.0))
    got = rows(history)
    assert [(metric, value) for _, _, metric, value in got] == [
        ("gate.claim.ratio", 10.0), ("gate.claim.server_us", 20.0), ("gate.complete.ratio", 1.5),
        ("gate.complete.server_us", 3.0), ("gate.inconclusive", 0.0), ("gate.regressions", 0.0)]
    assert {revision for _, revision, _, _ in got} == {commit_of(1)[:10]}
    write_record(tmp_path / "r2", gate_record(2, 21.0))
    assert len(rows(history)) == 12
    frame = read_history(history)
    assert set(frame["fingerprint_id"]) == {fingerprint_id(FP)}
    assert frame.iloc[0][["cpu_model", "cores", "allocator", "build", "version", "unit", "better"]].tolist() == [
        "Test CPU", 2, "jemalloc-5.3.0", "redis", "redis 7.0.15", "ratio", "lower"]


def test_rewriting_a_folder_replaces_its_rows(tmp_path: Path, history: Path) -> None:
    write_record(tmp_path / "r", gate_record(1, 20.0))
    write_record(tmp_path / "r", gate_record(2, 30.0))  # --out reused: the folder now holds the second run
    assert {(rev, value) for _, rev, metric, value in rows(history) if metric == "gate.claim.server_us"} == {
        (commit_of(2)[:10], 30.0)}


def test_history_off_keeps_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HISTORY_ENV, "off")
    write_record(tmp_path / "r", gate_record(1, 20.0))
    assert history_path() is None and (tmp_path / "r" / "summary.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_a_history_that_cannot_be_written_warns_and_keeps_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(HISTORY_ENV, str(blocker / "history.sqlite"))
    write_record(tmp_path / "r", gate_record(1, 20.0))
    assert read_record(tmp_path / "r").kind == "gate"
    err = capsys.readouterr().err
    assert "the results history was not updated" in err
    assert f"add it with: echomq-bench history --reindex {tmp_path / 'r'}" in err


def test_reindex_is_idempotent_and_knows_a_moved_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HISTORY_ENV, "off")  # folders written without a history, indexed afterwards
    for n in range(3):
        write_record(tmp_path / "runs" / f"r{n}", gate_record(n, 20.0 + n))
    (tmp_path / "runs" / "broken").mkdir()
    (tmp_path / "runs" / "broken" / "summary.json").write_text('{"schema": 1}')
    db = tmp_path / "h.sqlite"
    first = reindex([tmp_path / "runs"], db)
    assert (first.runs, first.rows) == (3, 18)
    assert first.skipped == [f"{(tmp_path / 'runs' / 'broken').resolve()}: summary.json declares no kind; known "
                             f"kinds: {', '.join(KINDS)}"]
    before = rows(db)
    assert reindex([tmp_path / "runs"], db).rows == 18 and rows(db) == before
    shutil.move(tmp_path / "runs" / "r0", tmp_path / "moved")
    reindex([tmp_path / "moved"], db)
    assert len(rows(db)) == 18 and str((tmp_path / "moved").resolve()) in {r[0] for r in rows(db)}


def test_every_sample_record_gives_its_headlines() -> None:
    sample = ROOT / "results" / "sample"
    compare = {(h.build, h.metric): h.value for h in headlines(read_record(sample / "compare"))}
    # A ratio's series names its own baseline and the builds that shared the run.
    series = "compare.server_us_ratio_vs_redis_among_redis+valkey"
    assert compare[("valkey", series)] == read_record(sample / "compare").summary["builds"]["valkey"]["server_us_ratio"]
    assert ("redis", series) not in compare
    reap = {(h.build, h.metric): h.value for h in headlines(read_record(sample / "reapcost"))}
    assert reap[("redis", "reapcost.reap.bare.call_us_cap100")] == 693.0   # the report's finding for this sample
    lease = {(h.build, h.metric): h.value for h in headlines(read_record(sample / "lease"))}
    assert lease[("redis", "lease.recommended_lease_ms")] == 2600.0
    assert headlines(read_record(sample / "run")) == []  # the main job's folder: its parts carry the figures


# -- steps: found where they are, not where they are not ---------------------------------


def test_a_step_of_15_percent_is_named_at_commit_7(tmp_path: Path, history: Path) -> None:
    for n, value in enumerate(series_with_step(seed=7), start=1):
        write_record(tmp_path / f"r{n:02d}", gate_record(n, value))
    for n, value in enumerate(series_with_step(seed=8, at=None), start=1):
        write_record(tmp_path / f"o{n:02d}", gate_record(n, value, fp=OTHER_FP))  # another machine, no step
    series = all_series(read_history(history))
    steps = flagged(series)
    assert [(s.metric, s.fingerprint_id, s.revision, s.date) for s in steps] == [
        ("gate.claim.ratio", fingerprint_id(FP), commit_of(7)[:10], "2026-12-01"),
        ("gate.claim.server_us", fingerprint_id(FP), commit_of(7)[:10], "2026-12-01")]
    step = steps[1]
    assert 0.12 < step.change < 0.18 and step.direction == "worse" and step.runs_after == 6  # type: ignore[operator]
    assert len(series) == 12  # 6 metrics x 2 fingerprints, each its own line


def called(y: list[float]) -> list[int]:
    """Where the history calls a step: flagged by asv's fit, and told from correlated runs."""
    return [v.index for v in judge_steps(y)[1] if v.called]


def test_rates_on_noise_and_on_a_step_at_2_percent_noise() -> None:
    """200 seeded series each way: no false alarm on 12 flat runs; the step at exactly its run in at
    least 170 of 200 with six runs after it, 190 of 200 with eight (docs/guide/history.md: allowing
    for correlated runs costs revisions before a step is called)."""
    false_alarms = sum(bool(called(series_with_step(seed, at=None))) for seed in range(200))
    exact = sum(called(series_with_step(seed)) == [6] for seed in range(200))
    longer = sum(called(series_with_step(seed, n=16, at=8)) == [8] for seed in range(200))
    assert false_alarms == 0
    assert exact >= 170 and longer >= 190


def test_one_wild_run_is_an_outlier_not_two_steps() -> None:
    flat = series_with_step(seed=3, at=None)
    for i in (0, 5):   # the first run, and one in the middle
        wild = [*flat[:i], flat[i] * 1.4, *flat[i + 1:]]
        assert flag_steps(fit_segments(wild)) == []
    segments = fit_segments([*flat, flat[-1] * 1.4])   # the newest run alone may be a new level
    assert [s.size for s in segments][-1] == 1


# -- the gate's baseline from the history: which runs qualify -----------------------------


def test_gate_runs_pass_over_failed_runs_and_other_machines(tmp_path: Path, history: Path) -> None:
    write_record(tmp_path / "a", gate_record(1, 20.0, update=True))
    write_record(tmp_path / "b", gate_record(2, 20.0))
    write_record(tmp_path / "c", gate_record(3, 30.0, regressions=("claim",)))
    write_record(tmp_path / "d", gate_record(4, 20.0, fp=OTHER_FP))
    got = gate_runs("redis", fingerprint_id(FP), history)
    assert [(g["run_dir"].name, g["updated"]) for g in got] == [("b", False), ("a", True)]
    assert gate_runs("valkey", fingerprint_id(FP), history) == []


# -- the command line ---------------------------------------------------------------------


def test_cli_draws_charts_and_names_the_step(tmp_path: Path, history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for n, value in enumerate(series_with_step(seed=7), start=1):
        write_record(tmp_path / f"r{n:02d}", gate_record(n, value))
    out = tmp_path / "page"
    assert main(["history", "--metric", "gate.claim.*", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"history: {history}: 12 runs, 12 revisions, 24 figures, 1 machine fingerprint(s)" in text
    assert "steps called: 2" in text and "no step called in 0 of the 2 series" in text
    assert (f"gate.claim.server_us  redis  fingerprint {fingerprint_id(FP)}  at {commit_of(7)[:10]} (2026-12-01)  "
            "+16.5%  9.952 -> 11.59 us (worse: lower is better)  [95% interval +11.9% to +21.3%, 6 revisions "
            "before, 6 after]") in text
    assert sorted(p.name for p in out.iterdir()) == ["history-gate.claim.ratio.png", "history-gate.claim.server_us.png",
                                                     "history.html", "history.md"]
    page = (out / "history.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and '<table id="steps">' in page


@pytest.mark.parametrize("argv, message", [
    (["--metric", "gate.nope"], "unknown metric 'gate.nope': the results history at {db} holds metrics "
                                "gate.claim.ratio, gate.claim.server_us, gate.complete.ratio, "
                                "gate.complete.server_us, gate.inconclusive, gate.regressions"),
    (["--build", "valkey"], "unknown build 'valkey': the results history at {db} holds builds redis"),
    (["--kind", "lease"], "unknown kind 'lease': the results history at {db} holds kinds gate"),
])
def test_cli_refuses_a_name_the_history_lacks(argv: list[str], message: str, tmp_path: Path, history: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    write_record(tmp_path / "r", gate_record(1, 20.0))
    assert main(["history", *argv, "--out", str(tmp_path / "page")]) == 2
    assert capsys.readouterr().err == f"echomq-bench history: error: {message.format(db=history)}\n"
    assert not (tmp_path / "page").exists()  # nothing written


def test_cli_refuses_an_empty_or_missing_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.sqlite"
    assert main(["history", "--db", str(missing)]) == 2
    assert capsys.readouterr().err == (f"echomq-bench history: error: no results history at {missing}: run a command "
                                       "that measures, or build it from results folders with: echomq-bench history "
                                       "--reindex results\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "summary.json").write_text('{"kind": "run", "schema": 1}')
    assert main(["history", "--db", str(missing), "--reindex", str(tmp_path / "empty")]) == 0
    capsys.readouterr()
    assert main(["history", "--db", str(missing)]) == 2
    assert capsys.readouterr().err == (f"echomq-bench history: error: the results history at {missing} is empty (no "
                                       "run recorded)\n")


def test_cli_reindex_refuses_a_folder_that_is_not_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    assert main(["history", "--db", str(db), "--reindex", str(tmp_path / "nope"), str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"echomq-bench history: error: {tmp_path / 'nope'}: not a results folder (no "
                                       "such directory)\n")
    assert not db.exists()  # every DIR is checked before the history is touched


def test_cli_reindex_refuses_the_drawing_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    assert main(["history", "--db", str(db), "--reindex", str(tmp_path), "--metric", "x", "--out", "o"]) == 2
    assert capsys.readouterr().err == ("echomq-bench history: error: --reindex only indexes; drop --metric, --out "
                                       "(or run again without --reindex to draw)\n")
    assert not db.exists()


def test_cli_refuses_a_threshold_that_is_not_a_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["history", "--threshold", "2"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --threshold: '2' must lie between 0 and 1 (0% and 100%), exclusive\n")


def test_cli_with_the_history_off_asks_for_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(HISTORY_ENV, "off")
    assert main(["history", "--out", str(tmp_path / "page")]) == 2
    assert capsys.readouterr().err == ("echomq-bench history: error: the history is off ($ECHOMQ_HISTORY=off); "
                                       "name a file with --db\n")
    assert not (tmp_path / "page").exists()
