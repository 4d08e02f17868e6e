"""The capacity settings `capacity` and `compare` read from their workload flags, and their progress line."""

from __future__ import annotations

import argparse
from typing import Any

from echomq_bench.capacity.settings import CapacitySettings

__all__ = ["QUICK", "settings_from_args"]

# What --quick changes, unless the flag itself is given: a few seconds a build.
QUICK = {"duration_s": 2.0, "warmup_s": 0.5, "ceiling_requests": 20_000}


def settings_from_args(args: argparse.Namespace, *, duration_s: float = 10.0, **extra: Any) -> CapacitySettings:
    """The settings the workload flags (echomq_bench.options.add_workload_options) ask for."""
    base = CapacitySettings(duration_s=duration_s)
    quick = QUICK if getattr(args, "quick", False) else {}

    def given(value: Any, name: str) -> Any:
        return value if value is not None else quick.get(name, getattr(base, name))

    settings = CapacitySettings(
        duration_s=given(args.duration, "duration_s"), warmup_s=given(args.warmup, "warmup_s"),
        processes=args.processes, connections=args.connections, pipeline=args.pipeline,
        payload_bytes=args.payload, lease_ms=args.lease, work=args.work, rate=args.rate, feed=args.feed,
        backlog=args.backlog, ceiling=args.ceiling, ceiling_requests=given(args.ceiling_requests, "ceiling_requests"),
        pin=args.pin, queues=args.queues, **extra)
    settings.check()
    return settings
