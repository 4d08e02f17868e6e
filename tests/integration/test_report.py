"""The report's page as Debian's Chromium renders it: the first screen holds
the four answers, each with its chart."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from echomq_bench.report import build_report
from tests.helpers import ROOT

SAMPLE = ROOT / "results" / "sample" / "run"
SCREEN = (1400, 900)


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Debian's Chromium, headless, at the first screen's size, with the flags a closed network needs."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium is installed by setup.sh (Debian's chromium package)"
    return subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={SCREEN[0]},{SCREEN[1]}",
         "--virtual-time-budget=5000", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})


def test_the_first_screen_holds_the_four_answers_and_their_charts(tmp_path: Path) -> None:
    report = build_report([SAMPLE], tmp_path)
    out = _chromium(tmp_path, "--dump-dom", report.html.as_uri())
    dom = out.stdout
    loaded = re.search(r'data-images-loaded="(\d+)/(\d+)"', dom)
    assert loaded, f"the page's load check did not run: {out.stderr[-500:]}"
    assert loaded.group(1) == loaded.group(2) and int(loaded.group(2)) >= 6
    placed = re.search(r'data-answers="([^"]*)"', dom)
    assert placed
    # answer id : bottom of the card : bottom of its chart : the chart's drawn height, in CSS px
    cards = {card: (int(bottom), int(img), int(height)) for card, bottom, img, height in
             (entry.split(":") for entry in placed.group(1).split())}
    assert list(cards) == ["answer-build", "answer-lease", "answer-reap", "answer-consumers"]
    for card, (bottom, img, height) in cards.items():
        assert bottom <= SCREEN[1] and img <= SCREEN[1], (card, bottom, img)
        assert height >= 180, (card, height)   # a chart, not a thumbnail
    # The questions themselves are pinned by tests/unit/test_report.py; here, that the browser shows each.
    for question in (answer.question for answer in report.answers):
        assert question.replace("'", "&#x27;") in dom or question in dom
    shot = tmp_path / "first-screen.png"
    _chromium(tmp_path, f"--screenshot={shot}", report.html.as_uri())
    assert shot.stat().st_size > 50_000
