"""The peers run sizes its headline: after the rounds every queue gets,
echomq and bullmq-node run on alone until the ratio's interval over those
headline rounds alone is within the precision asked, or the most headline
rounds, or the run's budget; the other queues keep the rounds they had, and
no interval pools the two kinds of round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echomq_bench.cli import main

BASE_ARGS = ["peers", "--queue", "echomq,bullmq-node,rq", "--mode", "default", "--jobs", "200", "--consumers", "1",
             "--trials", "1"]


def _trials(out: Path) -> dict[str, int]:
    summary = json.loads((out / "summary.json").read_text())
    return {e["queue"]: len(e["ran"]) for e in summary["queues"]}


def test_the_headline_pair_runs_on_alone_up_to_the_most_headline_rounds(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    # ±1% is out of reach in 2 rounds (the method needs 6 before any interval counts).
    assert main([*BASE_ARGS, "--precision", "1%", "--max-trials", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    # The table holds the interleaved round alone, for every queue.
    assert _trials(out) == {"echomq": 1, "bullmq-node": 1, "rq": 1}
    summary = json.loads((out / "summary.json").read_text())
    head = summary["headline"]
    assert {k: head[k] for k in ("queue", "precision", "max_trials", "budget_s")} == {
        "queue": "echomq", "precision": 0.01, "max_trials": 2, "budget_s": 900.0}
    (verdict,) = head["verdicts"]
    assert (verdict["server"], verdict["mode"], verdict["rounds"]) == ("redis", "default", "headline")
    assert (verdict["attempted"], verdict["failed"]) == (2, 0)
    ratio = verdict["verdict"]
    assert ratio["n"] == 2 and ratio["text"] == "inconclusive (2 trials)" and ratio["level"] == 0.95
    echomq = next(e for e in summary["queues"] if e["queue"] == "echomq")
    assert echomq["ran"] == [200] and echomq["drained_clean"] is True
    assert echomq["vs_baseline"]["server_us_per_job"]["n"] == 1   # the interleaved round only
    text = " ".join(printed.out.split())
    assert (f"redis default: echomq costs {ratio['ratio']:.3f}x bullmq-node's server µs per job "
            f"[{ratio['ci'][0]:.3f}, {ratio['ci'][1]:.3f}") in text
    assert "n = 2 of 2 headline rounds: inconclusive (2 trials)" in text
    assert "[headline] redis echomq (default) round 2/2 at most" in printed.err


def test_no_headline_round_starts_once_the_budget_is_spent(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main([*BASE_ARGS, "--max-trials", "10", "--budget", "1s", "--out", str(out)]) == 0
    assert _trials(out) == {"echomq": 1, "bullmq-node": 1, "rq": 1}
    assert "headline: the run's budget of 1 s is spent after 0 headline rounds" in capsys.readouterr().err
    (verdict,) = json.loads((out / "summary.json").read_text())["headline"]["verdicts"]
    assert (verdict["rounds"], verdict["verdict"]["n"]) == ("interleaved", 1)


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
