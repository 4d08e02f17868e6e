"""A bad --slo, or --slo beside a flag it cannot work with, is refused at the
command line: exit 2, one line naming the problem, no results folder, no
server started (the unit suite refuses to start one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from echomq_bench.cli import main

CASES: list[tuple[list[str], str]] = [
    *[([cmd, "--slo", text], fragment) for cmd in ("capacity", "compare") for text, fragment in [
        ("p99 <= 5", "argument --slo: limit '5' has no unit"),
        ("claim p99 < 5ms", "argument --slo: "),
        ("complete p99 <= 5ms", "argument --slo: verb 'complete'"),
        ("p100 <= 5ms", "argument --slo: quantile 'p100' is outside p50..p99.9"),
        ("", "argument --slo: the target is empty"),
        ("claim p99 <= 5 parsecs", "unknown unit 'parsecs'"),
    ]],
    (["capacity", "--slo", "claim p99 <= 5ms", "--rate", "1000"], "--slo sets each probe's rate itself: drop --rate"),
    (["compare", "--slo", "claim p99 <= 5ms", "--rate", "1000"], "--slo sets each probe's rate itself: drop --rate"),
    (["capacity", "--slo", "claim p99 <= 5ms", "--server", "redis-cluster"], "redis-cluster: --slo searches one"),
    (["capacity", "--slo", "claim p99 <= 5s"], "is not below the 5 s the driver awaits a reply"),
    (["capacity", "--slo-trials", "3"], "--slo-trials needs --slo TARGET"),
    (["compare", "--slo-resolution", "5%"], "--slo-resolution needs --slo TARGET"),
    (["capacity", "--slo", "p99<=5ms", "--slo-resolution", "0"], "argument --slo-resolution: '0' must be from"),
    (["capacity", "--slo", "p99<=5ms", "--slo-resolution", "half"], "argument --slo-resolution: 'half' is not"),
    (["capacity", "--slo-held", "95%"], "--slo-held needs --slo TARGET"),
    (["compare", "--slo-trials", "3", "--slo-held", "90%"], "--slo-trials and --slo-held need --slo TARGET"),
    (["capacity", "--slo", "p99<=5ms", "--slo-held", "40%"], "argument --slo-held: '40%' must be from 50% to 99%"),
    (["compare", "--slo", "p99<=5ms", "--slo-held", "100%"], "argument --slo-held: '100%' must be from 50% to 99%"),
]


@pytest.mark.parametrize("argv, fragment", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_bad_slo_exits_2_and_writes_nothing(argv: list[str], fragment: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHOMQ_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.chdir(tmp_path)
    try:
        code = main([*argv, "--out", str(tmp_path / "out")])
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert fragment in err, err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == [], "a refused command wrote files"
