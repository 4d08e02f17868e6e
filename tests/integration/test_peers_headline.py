"""The peers run sizes its headline: after the rounds every queue gets,
echomq and bullmq-node run on alone until the ratio's interval is within the
precision asked, or the most trials, or the run's budget; the other queues
keep the rounds they had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echomq_bench.cli import main

BASE_ARGS = ["peers", "--queue", "echomq,bullmq-node,rq", "--mode", "default", "--jobs", "200", "--consumers", "1",
             "--trials", "2"]


def _trials(out: Path) -> dict[str, int]:
    summary = json.loads((out / "summary.json").read_text())
    return {e["queue"]: len(e["ran"]) for e in summary["queues"]}


def test_the_headline_pair_runs_on_alone_up_to_the_most_trials(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    # ±1% is out of reach in 4 trials (the method needs 6 before any interval counts).
    assert main([*BASE_ARGS, "--precision", "1%", "--max-trials", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert _trials(out) == {"echomq": 4, "bullmq-node": 4, "rq": 2}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["headline"] == {"queue": "echomq", "precision": 0.01, "max_trials": 4, "budget_s": 900.0}
    echomq = next(e for e in summary["queues"] if e["queue"] == "echomq")
    assert echomq["ran"] == [200] * 4 and echomq["drained_clean"] is True
    ratio = echomq["vs_baseline"]["server_us_per_job"]
    assert ratio["n"] == 4 and ratio["text"] == "inconclusive (4 trials)"
    rq = next(e for e in summary["queues"] if e["queue"] == "rq")
    assert rq["vs_baseline"]["server_us_per_job"]["n"] == 2    # paired with the baseline's first two trials
    text = " ".join(printed.out.split())
    assert (f"redis default: echomq costs {ratio['ratio']:.3f}x bullmq-node's server µs per job "
            f"[{ratio['ci'][0]:.3f}, {ratio['ci'][1]:.3f}") in text
    assert "n = 4 trial pairs: inconclusive (4 trials)" in text
    assert "[headline] redis echomq (default) trial 4/4 at most" in printed.err


def test_no_headline_round_starts_once_the_budget_is_spent(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main([*BASE_ARGS, "--max-trials", "10", "--budget", "1s", "--out", str(out)]) == 0
    assert _trials(out) == {"echomq": 2, "bullmq-node": 2, "rq": 2}
    assert "headline: the run's budget of 1 s is spent after 2 trials" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--budget", "0s", "--budget must be positive, got 0.0"),
    ("--max-trials", "0", "argument --max-trials: "),
    ("--precision", "7", "argument --precision: "),
])
def test_bad_sizing_is_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    flag: str, value: str, said: str) -> None:
    out = tmp_path / "run"
    try:
        code = main([*BASE_ARGS, flag, value, "--out", str(out)])
    except SystemExit as exited:
        code = int(exited.code or 0)
    assert code == 2
    assert said in capsys.readouterr().err
    assert not out.exists()
