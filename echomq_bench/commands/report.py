"""`echomq-bench report DIR...`: results folders into report.md, a
self-contained report.html and PNG charts. It reads; it never measures."""

from __future__ import annotations

import argparse
from pathlib import Path

from echomq_bench.report import build_report

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = "Turn results folders into report.md, a self-contained report.html and PNG charts."
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                        help="results folders (a run, or a folder of runs)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="where to write the report (default: the first DIR)")


def run(args: argparse.Namespace) -> int:
    report = build_report(args.dirs, args.out)
    print(report.text)
    print(f"\nreport: {report.html}")
    print(f"        {report.md}")
    return 0

