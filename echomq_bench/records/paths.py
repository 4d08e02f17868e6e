"""Where results go when a command is given no --out, in a module of its
own: the writer's modules read it without importing the pandas-based reader."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["RESULTS_DIR"]

RESULTS_DIR = Path(os.environ.get("ECHOMQ_RESULTS_DIR", "results"))
