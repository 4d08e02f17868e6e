"""Conformance: the contract's stories played on a real server (`echomq-bench check`)."""

from __future__ import annotations

from echomq_bench.conformance.stories import STORIES, Line, run_check

__all__ = ["STORIES", "Line", "run_check"]
