"""The peers command's refusals, and a missing peer package skipped with a note."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


from echomq_bench.cli import main
from echomq_bench.peers import PeerMissingError
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
        main(["peers", "--queue", "celery"])
    assert exc.value.code == 2


def test_missing_package_is_skipped_with_a_note_unless_asked_for(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A None entry makes `import bullmq` fail as if the package were absent.
    monkeypatch.setitem(sys.modules, "bullmq", None)
    names, skipped = choose_queues([])
    assert "bullmq" not in names and "echomq" in names
    assert "pip install -e '.[peers]'" in skipped["bullmq"]

    with pytest.raises(PeerMissingError, match=r"\.\[peers\]"):
        choose_queues(["echomq", "bullmq"])

    out = tmp_path / "never"
    assert main(["peers", "--server", "redis", "--queue", "bullmq", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bullmq" in err and ".[peers]" in err
    assert not out.exists()
