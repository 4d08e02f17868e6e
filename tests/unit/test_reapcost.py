"""Reap and promote cost curves without a server: the id blocks they fill
with, and the command line's refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from echomq_bench.load.bulk import id_block
from echomq_bench.cli import main


def test_id_block_is_distinct_ordered_and_well_formed() -> None:
    from echomq.ids import parse_id

    a, b = id_block(5_000), id_block(3)
    assert a == sorted(a) and len(set(a)) == 5_000 and b[0] > a[-1]
    for job_id in (a[0], a[-1], b[0]):
        assert parse_id(job_id).kind == "JOB"


@pytest.mark.parametrize("bad", [["--caps", "0"], ["--caps", "200000"], ["--sizes", "1k"],
                                 ["--verbs", "claim"], ["--repeats", "0"]])
def test_cli_refuses_bad_options(bad: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["reapcost", "--server", "redis", "--out", str(tmp_path / "r"), *bad])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code == 2
    assert "error" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
