"""The main job end to end, in its quick form: with no --server it takes
every build installed here, measures each verb on each, compares each
against the first build of its own allocator, and its report and terminal open with the four answers,
warned as too short to trust, the build matrix folded below them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.commands.run import baseline_first
from echomq_bench.microbench.verbs import MATRIX_CASES, VERB_LABELS
from echomq_bench.records import files as results
from echomq_bench.records.history import HISTORY_ENV, read_history
from echomq_bench.report import QUICK_WARNING
from echomq_bench.servers import free_port, installed_builds, parse_server_spec

SIX = ["redis6.2", "redis7.0", "redis8.2", "valkey8.0", "valkey8.1", "valkey9.1"]
JEMALLOC, LIBC = ["redis7.0", "redis8.2", "valkey8.0"], ["redis6.2", "valkey8.1", "valkey9.1"]


def test_quick_run_on_every_build_answers_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert [b.name for b in installed_builds()] == SIX, "bash setup.sh installs all six builds"
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "history.sqlite"))
    out = tmp_path / "run"
    assert main(["run", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out

    requested = json.loads((out / "meta.json").read_text())["settings"]["servers_requested"]
    assert requested == SIX
    verbs = results.load(out / "verbs").summary
    assert [b["build"] for b in verbs["builds"]] == SIX
    for b in verbs["builds"]:
        assert list(b["verbs"]) == list(MATRIX_CASES)
        assert all(f["server_us"] > 0 and f["calls"] > 0 for f in b["verbs"].values()), b
    compare = results.load(out / "compare").summary
    assert compare["baseline"] == "redis7.0" and list(compare["builds"])[0] == "redis7.0"
    # Every build ranked against one reference, allocator and all; a version's effect within its
    # allocator is the second line, against the first build of its own.
    assert compare["baselines"] == dict.fromkeys(SIX, "redis7.0")
    assert [b for b in SIX if compare["builds"][b]["verdict"] == "baseline"] == ["redis7.0"]
    assert {b: compare["builds"][b].get("allocator_baseline") for b in SIX} == {
        **dict.fromkeys(SIX), "valkey8.1": "redis6.2", "valkey9.1": "redis6.2"}
    assert compare["company"] == sorted(SIX) and isinstance(compare["order_seed"], int)

    report = (out / "report.md").read_text()
    questions = ["Which build should I run?", "How long should my lease be?", "What does the reaper's cap cost?",
                 "How does throughput grow with consumers?"]
    assert report.index(QUICK_WARNING) < report.index(questions[0]) < report.index(questions[-1]) \
        < report.index("## Build matrix") < report.index("## Conformance")
    lines = printed.splitlines()
    # In 100 columns, but for the lines that name the results folder: a path is not wrapped.
    assert lines[0].startswith("WARNING: Quick run: too few trials")
    assert max(len(line) for line in lines if str(tmp_path) not in line) <= 100
    assert [line for line in lines if line in questions] == questions
    # Two trials decide nothing, and the answer shows no interval it would not stand behind.
    joined = " ".join(line.strip() for line in lines)
    # A trial is counted only when both sides were server-bound; on a loaded machine a build may have none.
    builds = r"(redis 8\.2\.3|valkey 8\.0\.1|valkey 8\.1\.8|valkey 9\.1\.2)"
    said = re.findall(builds + r" costs [0-9.]+× (redis 7\.0\.15)'s server time per "
                      r"cycle \(too few trials for an interval, n = [12]\): inconclusive \([12] trials\)", joined)
    said += re.findall(builds + r" against (redis 7\.0\.15): inconclusive \(0 trials\); 2 left out, "
                       r"not server-bound", joined)
    assert sorted(said) == [("redis 8.2.3", "redis 7.0.15"), ("valkey 8.0.1", "redis 7.0.15"),
                            ("valkey 8.1.8", "redis 7.0.15"), ("valkey 9.1.2", "redis 7.0.15")]
    assert "redis 6.2.14 costs " in joined or "redis 6.2.14 against redis 7.0.15: inconclusive (0 trials)" in joined
    within = [compare["builds"][b]["within_allocator"] for b in ("valkey8.1", "valkey9.1")]
    if any(w and w.get("n") for w in within):
        assert "Within an allocator (the version's effect alone): " in joined
    summary = json.loads((out / "summary.json").read_text())
    assert [a["question"] for a in summary["answers"]] == questions
    # Consumers: two rounds, each every build at every count once, in a drawn order; too few for an interval.
    windows = results.load(out / "consumers").table("consumers").query("metric == 'cycles_per_s'").sort_values("order")
    assert sorted(zip(windows["trial"], windows["build"], windows["consumers"])) == sorted(
        (t, b, c) for t in (1, 2) for b in ("redis7.0", "redis6.2") for c in (1, 8))
    assert list(windows["trial"]) == [1] * 4 + [2] * 4
    grows = summary["answers"][3]["lines"]
    assert [line.split(" on ")[1].split(" (")[0] for line in grows] == ["redis 7.0.15", "redis 6.2.14"], grows
    assert all("(too few trials for an interval, n = 2;" in line and "inconclusive, 6 trials a point would "
               "decide it; the bound at 8: " in line for line in grows), grows
    matrix = report[report.index("## Build matrix"):report.index("## Conformance")]
    header = next(line for line in matrix.splitlines() if line.startswith("| build |"))
    for column in ["malloc", "server µs/cycle", "ratio to redis7.0",
                   *(f"{v} µs" for v in VERB_LABELS.values()),
                   "reap(100) at M=100,000, bare, µs"]:
        assert f"| {column} |" in header
    rows = {line.split(" | ")[0].lstrip("| "): line for line in matrix.splitlines()
            if line.startswith("| ") and not line.startswith(("| build", "|---"))}
    assert list(rows) == ["redis7.0", "redis6.2", "redis8.2", "valkey8.0", "valkey8.1", "valkey9.1"]  # baseline first
    assert "| 1 (the baseline) |" in rows["redis7.0"]
    for build in SIX[:1] + SIX[2:]:
        assert "t on log ratios" in rows[build] and "(vs " not in rows[build], rows[build]
    for build in LIBC:
        assert "| libc |" in rows[build]
    for build in JEMALLOC:
        assert "| jemalloc" in rows[build]
    assert "Allocator: redis7.0, redis8.2, valkey8.0: jemalloc" in matrix
    assert "redis6.2, valkey8.1, valkey9.1: libc" in matrix
    assert "## Server time per verb" in report

    # Each part's figures reached the history, the verbs' among them.
    history = read_history(tmp_path / "history.sqlite")
    assert set(history.loc[history["kind"] == "verbs", "build"]) == set(SIX)
    assert {f"verbs.{case}.server_us" for case in MATRIX_CASES} <= set(history["metric"])


def test_a_server_that_does_not_answer_is_named_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    assert main(["run", "--quick", "--server", "redis", "--server", url, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("echomq-bench run: error: server '127.0.0.1:") and f"at {url} does not answer" in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("given", "first"), [
    (["valkey8.0", "redis6.2", "redis7.0"], ["redis7.0", "valkey8.0", "redis6.2"]),
    (["valkey", "redis"], ["redis", "valkey"]),
    (["valkey8.1", "valkey8.0"], ["valkey8.1", "valkey8.0"]),
])
def test_the_baseline_goes_first(given: list[str], first: list[str]) -> None:
    assert [s.name for s in baseline_first([parse_server_spec(g) for g in given])] == first
