"""The peers command's refusals, and a missing peer package skipped with a note."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.measurement.verdicts import log_half_width
from echomq_bench.peers import MODES, PEERS, PeerMissingError, bullmq_node, get, modes_of
from echomq_bench.peers.bullmq import CONCURRENCY
from echomq_bench.peers.intervals import interval
from echomq_bench.peers.result import PeerRun, Phase
from echomq_bench.measurement.serverstats import Usage
from echomq_bench.peers.rounds import choose_queues


def test_bad_input_is_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--jobs", "0"], ["--consumers", "0"], ["--trials", "0"], ["--timeout", "0"], ["--timeout=-1s"],
                 ["--timeout", "600"]):
        out = tmp_path / "never"
        try:
            code = main(["peers", "--server", "redis", *argv, "--out", str(out)])
        except SystemExit as exc:  # argparse refuses a malformed value itself
            code = exc.code
        assert code == 2
        assert "error" in capsys.readouterr().err
        assert not out.exists()
    with pytest.raises(SystemExit) as exc:
        main(["peers", "--queue", "kafka"])
    assert exc.value.code == 2


def test_missing_package_is_skipped_with_a_note_unless_asked_for(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A None entry makes `import celery` fail as if the package were absent.
    monkeypatch.setitem(sys.modules, "celery", None)
    names, skipped = choose_queues([])
    assert "celery" not in names and "echomq" in names
    assert skipped["celery"].startswith("the 'celery' package is not installed")
    assert skipped["celery"].endswith("install the peers extra: pip install -e '.[peers]'")

    with pytest.raises(PeerMissingError, match=r"queue 'celery' was asked for, but the 'celery' package"):
        choose_queues(["echomq", "celery"])

    out = tmp_path / "never"
    assert main(["peers", "--server", "redis", "--queue", "celery", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "queue 'celery' was asked for" in err and "pip install -e '.[peers]'" in err
    assert not out.exists()


def test_bullmq_node_missing_names_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(bullmq_node, "NODE_DIR", tmp_path / "nothing-here")
    with pytest.raises(PeerMissingError) as exc:
        get("bullmq-node").check()
    assert str(exc.value) == (f"the 'bullmq' npm package is not installed in {tmp_path / 'nothing-here'}; "
                              "run `bash setup.sh`, which installs it with npm into .peers/node")


def test_every_peer_has_both_modes_and_names_its_settings() -> None:
    assert list(PEERS)[:2] == ["echomq", "echomq-raw"]
    for name in PEERS:
        # The raw loop is a reference, not a library with settings to tune.
        assert modes_of(name) == (("default",) if name == "echomq-raw" else MODES)
        for mode in modes_of(name):
            peer = get(name, mode)
            assert peer.mode == mode and peer.name == name
            assert peer.settings(2)["consumers"] == 2
            assert peer.settings(2)["in_flight_per_consumer"] >= 1
    assert (get("echomq").settings(2)["in_flight_per_consumer"],
            get("echomq", "throughput").settings(2)["in_flight_per_consumer"]) == (1, 100)
    assert get("echomq-raw").drain_mode.startswith("RAW, not the client's Worker")
    with pytest.raises(ValueError, match="queue 'echomq-raw' has no mode 'throughput'; it has default"):
        get("echomq-raw", "throughput")


def test_throughput_holds_100_jobs_in_flight_wherever_the_library_has_the_knob() -> None:
    in_flight = {name: get(name, "throughput").settings(2)["in_flight_per_consumer"]
                 for name in PEERS if "throughput" in modes_of(name)}
    # RQ's SimpleWorker runs one job at a time, whatever it is given.
    assert {name for name, jobs in in_flight.items() if jobs != 100} == {"rq"}
    assert {"streaq", "taskiq"} <= set(in_flight)


def test_node_and_python_bullmq_run_the_same_concurrency() -> None:
    script = bullmq_node.SCRIPT.read_text()
    assert "const CONCURRENCY = { default: 1, throughput: 100 };" in script
    assert CONCURRENCY == {"default": 1, "throughput": 100}


def test_intervals_follow_the_verdict_method() -> None:
    assert interval([4.0, 4.0]) == {"mean": 4.0, "ci": [4.0, 4.0], "n": 2}
    assert interval([0.0, 0.0]) == {"mean": 0.0, "ci": [0.0, 0.0], "n": 2}
    assert interval([0.0, 1.0]) == {"mean": None, "ci": None, "n": 2}
    single = interval([3.0])
    assert single["mean"] == pytest.approx(3.0) and single["ci"] is None and single["n"] == 1
    got = interval([1.0, 4.0])
    assert got["mean"] == pytest.approx(2.0)
    half = log_half_width([1.0, 4.0])
    assert got["ci"] == pytest.approx([2.0 * math.exp(-half), 2.0 * math.exp(half)])


# ---------------------------------------------------------------- the printed record


def _peer_run(queue: str, trial: int, main_cpu_s: float, wall_s: float) -> PeerRun:
    """One trial of 1,000 jobs: `main_cpu_s` of server time and `wall_s` split over the two phases."""
    def phase(cpu_s: float, wall: float, commands: int, reads: int) -> Phase:
        usage = Usage(wall_s=wall, cpu_s=cpu_s, main_cpu_s=cpu_s,
                      commands={"evalsha": (commands, int(cpu_s * 400_000)), "info": (5, 9)})
        return Phase(jobs=1_000, wall_s=wall, server=usage, client_cpu_s=wall / 2, reads=reads)

    return PeerRun(server="redis7.0", server_version="redis 7.0.15", queue=queue, mode="default", trial=trial,
                   jobs=1_000, consumers=2, enqueue=phase(main_cpu_s / 4, wall_s / 4, 1_000, 1),
                   drain=phase(3 * main_cpu_s / 4, 3 * wall_s / 4, 13_000, 1_000),
                   used_memory_before=1_000_000, used_memory_enqueued=1_336_000, used_memory_drained=1_000_100,
                   accepted=1_000, ran=1_000, intact=1_000, after_enqueue={"pending": 1_000},
                   leftovers={"pending": 0, "kept": 0, "rows": 0, "detail": ""}, keys_after=0)


def test_the_printed_record_carries_every_figure_and_ratio_within_100_columns(tmp_path: Path) -> None:
    from echomq_bench.peers.summary import build_record, ratio_rows, tidy_rows
    from echomq_bench.peers.rounds import PeersSettings
    from echomq_bench.records.record import Record
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    # echomq: 45 and 50 µs of server time per job in its two trials, against BullMQ's 103.3 in both.
    runs = [_peer_run(q, t, cpu, wall) for t, echomq_cpu in ((0, 0.045), (1, 0.050))
            for q, cpu, wall in (("echomq", echomq_cpu, 0.125), ("bullmq-node", 0.1033, 0.25))]
    settings = PeersSettings(jobs=1_000, consumers=2, trials=2, timeout_s=60, servers=(), modes=("default",))
    record = build_record(runs, ["echomq", "bullmq-node"], {"celery": "not installed"}, [], settings)
    write_record(tmp_path, Record(kind="peers", summary=record.to_record(), meta={"settings": {"kind": "peers"}},
                                  tables={"peers": tidy_rows(runs), "peers_ratios": ratio_rows(record)}))
    text = record_text(tmp_path)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100, text

    def row(caption: str, queue: str) -> list[str]:
        start = next(i for i, line in enumerate(lines) if line.startswith(caption))
        return next(line for line in lines[start:] if line.startswith(f"redis7.0  {queue} ")).split()

    # server µs/job (the geometric mean of 45 and 50) and its t-interval, script µs (0.4 of the server's),
    # commands, round trips, bytes per pending job
    us = interval([45.0, 50.0])
    assert row("Server cost per job", "echomq")[3:] == [
        f"{us['mean']:.1f}", f"{us['ci'][0]:.1f}-{us['ci'][1]:.1f}", "19.0", "14.0", "1.00", "336"]
    assert row("Server cost per job", "bullmq-node")[3:5] == ["103", "103-103"]
    # jobs/s and client µs/job (half the wall in CPU), both with intervals, and the rounds that drained clean
    assert row("A job's whole life", "echomq")[3:] == ["8,000", "8,000-8,000", "62.5", "62.5-62.5", "2", "of", "2"]
    # Two trials: a ratio and its interval, judged inconclusive by the verdict method. One queue against the
    # baseline on four figures is a family of four verdicts: each interval at 1 - 0.05/4, and the caption says so.
    ratio = row("Ratio to bullmq-node", "echomq")
    paired = interval([45.0 / 103.3, 50.0 / 103.3], level=1 - 0.05 / 4)
    assert "mean [98.75% CI]" in " ".join(text.split())
    assert ratio[3:5] == [f"{paired['mean']:.2f}", f"[{paired['ci'][0]:.2f}-{paired['ci'][1]:.2f}]"]
    assert "inconclusive" in ratio
    assert "2.00 [2.00-2.00]" in " ".join(ratio)
    assert "echomq.Worker(" in text and "enqueue enqueue verb through echomq.pipeline" in text
    assert "WARNING: skipped celery: not installed" in text


def test_the_record_reads_back_as_built_and_an_unpaired_figure_has_an_empty_verdict() -> None:
    from echomq_bench.peers.summary import build_record, ratio_rows
    from echomq_bench.peers.rounds import PeersSettings
    from echomq_bench.records.verdicts import RatioVerdictEntry
    from echomq_bench.records.kinds.peers import PeersRecord, headlines
    from echomq_bench.records.record import Record

    # The baseline's second trial failed to drain clean: echomq's second trial has no pair.
    runs = [_peer_run("echomq", 0, 0.045, 0.125), _peer_run("bullmq-node", 0, 0.1033, 0.25),
            _peer_run("echomq", 1, 0.050, 0.125), replace(_peer_run("bullmq-node", 1, 0.1033, 0.25), ran=999)]
    settings = PeersSettings(jobs=1_000, consumers=2, trials=2, timeout_s=60, servers=(), modes=("default",))
    failure = {"server": "redis7.0", "queue": "rq", "mode": "default", "trial": 0, "error": "boom\nmore"}
    record = build_record(runs, ["echomq", "bullmq-node"], {}, [failure], settings)
    assert PeersRecord.from_record(record.to_record()) == record
    echomq, base = record.queues
    assert base.vs_baseline == {} and echomq.vs_baseline["server_us_per_job"].n == 1
    assert echomq.vs_baseline["server_us_per_job"].ratio == pytest.approx(45.0 / 103.3)
    # The headline's verdict (no headline round ran: on the interleaved rounds), then the table's.
    assert [(r["rounds"], r["metric"]) for r in ratio_rows(record)] == [
        ("interleaved", "server_us_per_job"), ("interleaved", "server_us_per_job"), ("interleaved", "jobs_per_s"),
        ("interleaved", "commands_per_job"), ("interleaved", "round_trips_per_job")]
    assert (base.attempted, base.failed, base.drained_clean) == (2, 1, False)
    assert record.failures[0].error == "boom\nmore" and record.headline.queue == "echomq"
    unjudged = PeersRecord(queues=(replace(echomq, vs_baseline={"jobs_per_s": RatioVerdictEntry()}),))
    assert ratio_rows(unjudged) == []
    figures = {h.metric: h.value for h in headlines(Record(kind="peers", summary=record.to_record()))}
    assert figures["peers.echomq.server_us_per_job"] == pytest.approx(47.5)
