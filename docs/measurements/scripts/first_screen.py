"""The first screen of a run's report.html, as a 1400 x 900 browser shows it.

    python docs/measurements/scripts/first_screen.py RUN_DIR OUT.png

Builds the report of RUN_DIR (a main-job folder) into RUN_DIR and takes a
screenshot of report.html with Debian's headless Chromium at 1400 x 900, the
size the report's browser test holds the four answers to.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from echomq_bench.report import build_report

SCREEN = "1400,900"


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    run, shot = Path(sys.argv[1]), Path(sys.argv[2]).resolve()
    chromium = shutil.which("chromium")
    if chromium is None:
        print("first_screen: no chromium on PATH; bash setup.sh installs it", file=sys.stderr)
        return 2
    page = build_report([run], run).html
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={SCREEN}",
                        "--virtual-time-budget=5000", f"--screenshot={shot}", page.as_uri()],
                       check=True, capture_output=True, timeout=120)
    print(shot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
