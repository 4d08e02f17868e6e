"""The peers command's refusals, and a missing peer package skipped with a note."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.measurement.verdicts import log_half_width
from echomq_bench.peers import MODES, PEERS, PeerMissingError, bullmq_node, get, modes_of
from echomq_bench.peers.bullmq import CONCURRENCY
from echomq_bench.peers.intervals import interval
from echomq_bench.commands.peers import choose_queues


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
