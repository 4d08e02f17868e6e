"""The regression gate without a server: the slowed copy it measures against,
its refusals, and the committed baselines it compares with."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.commands.gate import (
    BaselineError,
    load_baseline,
    slowed_copy,
)
from echomq_bench.microbench.runner import VERB_CASES
from echomq.scripts import discover
from tests.helpers import ROOT

def test_slowed_copy_changes_only_the_named_script(tmp_path: Path) -> None:
    slowed = slowed_copy(tmp_path / "lua", "claim", 123)
    now, orig = discover(slowed), discover()
    assert set(now) == set(orig)
    changed = [v for v in now if now[v].text != orig[v].text]
    assert changed == ["claim"]
    assert "for i = 1, 123 do" in now["claim"].text


@pytest.mark.parametrize("bad", [
    ["--tolerance", "-1"], ["--tolerance", "abc"], ["--rounds", "0"], ["--verbs", "claim,nope"],
])
def test_cli_refuses_bad_options(bad: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["gate", "--server", "redis", "--baseline", str(tmp_path), *bad])
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_missing_or_broken_baseline_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "--server", "redis", "--baseline", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no baseline at" in err and "--update" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["gate", "--server", "redis", "--baseline", str(broken)]) == 2
    assert "not a readable baseline" in capsys.readouterr().err
    with pytest.raises(BaselineError):
        load_baseline(tmp_path / "x.json")


def test_committed_baselines_cover_every_verb() -> None:
    folder = ROOT / "results" / "baselines"
    for build in ("redis", "valkey"):
        data = load_baseline(folder / f"gate-{build}.json")
        assert data["build"] == build
        assert set(data["figures"]) >= {c.name for c in VERB_CASES}
        assert set(data["scripts"]) == set(discover())
        assert all(f["server_ratio"] > 0 for f in data["figures"].values())


def test_a_round_whose_reference_reads_zero_microseconds_has_no_ratio() -> None:
    # commandstats counts whole µs: a short round of the no-op can read 0 on every call it keeps.
    from echomq_bench.microbench.figures import pooled_ratio

    num = [[4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0]]
    den = [[0.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0]]
    ratio, se = pooled_ratio(num, den, keep_num=1.0, keep_den=1.0)
    assert ratio == pytest.approx(16.0 / 6.0)   # pooled: 4 µs against the mean 1.5 µs of all twelve
    assert se > 0
    assert math.isnan(pooled_ratio([[4.0]], [[0.0]], bootstrap=False)[0])   # nothing to divide by: no figure, no crash
