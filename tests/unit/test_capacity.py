"""The capacity command's refusals before anything runs, its settings' own
check, and the id blocks its fill mints."""

from __future__ import annotations

from pathlib import Path

import pytest

from echomq_bench.load.bulk import IdBlock
from echomq_bench.capacity.settings import CapacityError, CapacitySettings
from echomq_bench.cli import main
from echomq.ids import Minter, parse_id


@pytest.mark.parametrize("argv, word", [
    (["--duration", "-1"], "duration"),
    (["--pipeline", "0"], "pipeline"),
    (["--work", "bogus"], "distribution"),
    (["--feed", "sideways"], "feed"),
])
def test_bad_workload_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 argv: list[str], word: str) -> None:
    out = tmp_path / "cap"
    try:
        code = main(["capacity", "--server", "redis", *argv, "--out", str(out)])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code == 2
    assert word in capsys.readouterr().err
    assert not out.exists()


def test_settings_are_checked_before_anything_runs() -> None:
    with pytest.raises(CapacityError, match="connections"):
        CapacitySettings(connections=0).check()


def test_id_blocks_mint_like_the_minter() -> None:
    block = IdBlock(node=42)
    ids = [i.decode() for i in block.take(5000) + block.take(10)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    parsed = [parse_id(i) for i in ids]
    assert {p.node for p in parsed} == {42} and {p.kind for p in parsed} == {"JOB"}
    # The first id of a fresh block is sequence 0 of its millisecond: the
    # project's minter, asked at that millisecond, gives the same text.
    first = parsed[0]
    assert first.seq == 0
    assert Minter(node=42, clock=lambda: first.unix_ms).mint() == ids[0]
