"""Run the main job: every part of the suite on the embedded builds."""

from __future__ import annotations

import argparse

from . import check

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = "The main job. For now: the conformance check on each build."


def run(args: argparse.Namespace) -> int:
    return check.run(args)
