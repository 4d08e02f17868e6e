"""The workload options `capacity` and `compare` share, and their progress line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from echomq_bench.commands.capacity import CapacitySettings

__all__ = ["seconds", "milliseconds", "add_workload_options", "settings_from_args"]


def seconds(text: str) -> float:
    """A duration in seconds: 10, 10s, 500ms, 2m."""
    from echomq_bench.measurement.workdist import DistError, is_number, parse_duration_ms

    try:
        value = float(text) if is_number(text) else parse_duration_ms(text) / 1000.0
    except DistError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def milliseconds(text: str) -> int:
    """A duration in whole ms: 60000, 60s, 250ms."""
    from echomq_bench.measurement.workdist import DistError, is_number, parse_duration_ms

    try:
        value = float(text) if is_number(text) else parse_duration_ms(text)
    except DistError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return int(round(value))


def add_workload_options(parser: argparse.ArgumentParser, *, duration: float = 10.0, ceiling: bool = True) -> None:
    d = CapacitySettings()
    g = parser.add_argument_group("workload")
    g.add_argument("--duration", type=seconds, default=duration, metavar="T",
                   help=f"measured window per run (default {duration:g}s; 10, 10s, 500ms)")
    g.add_argument("--warmup", type=seconds, default=d.warmup_s, metavar="T",
                   help=f"load before the window opens (default {d.warmup_s:g}s)")
    g.add_argument("--processes", type=int, default=d.processes, help=f"driver processes, per master on a cluster (default {d.processes})")
    g.add_argument("--connections", type=int, default=d.connections,
                   help=f"connections per process (default {d.connections})")
    g.add_argument("--pipeline", type=int, default=d.pipeline,
                   help=f"jobs in flight per connection (default {d.pipeline})")
    g.add_argument("--payload", type=int, default=d.payload_bytes, metavar="BYTES",
                   help=f"payload size (default {d.payload_bytes})")
    g.add_argument("--lease", type=milliseconds, default=d.lease_ms, metavar="T",
                   help=f"lease per claim (default {d.lease_ms} ms; a bare number is ms)")
    g.add_argument("--work", default=d.work, metavar="DIST",
                   help="simulated work per job, e.g. const:0 (default, capacity), exp:mean=2ms")
    g.add_argument("--rate", type=float, default=None, metavar="CYCLES_PER_S",
                   help="open loop at this many cycles/s (on a cluster: in all, split over the queues), latency "
                        "from each claim's intended start (default: closed loop, as fast as the server answers)")
    g.add_argument("--feed", choices=("backlog", "produce"), default=d.feed,
                   help="backlog: drain a pre-filled backlog (default); produce: producers keep pending fed")
    g.add_argument("--backlog", type=int, default=None, metavar="JOBS",
                   help="jobs to pre-fill (default: enough for 80,000 cycles/s through warm-up and window)")
    g.add_argument("--queues", type=int, default=d.queues, help="queues to spread the load over (default: 1 on a server, one per master on a "
                        "cluster, named so that they land on different masters)")
    if ceiling:
        g.add_argument("--no-ceiling", dest="ceiling", action="store_false",
                       help="skip the redis-benchmark ceiling")
    else:
        g.add_argument("--ceiling", dest="ceiling", action="store_true",
                       help="also measure the redis-benchmark ceiling (first trial of each build)")
    g.add_argument("--ceiling-requests", type=int, default=d.ceiling_requests, metavar="N",
                   help=f"claims the C client sends (default {d.ceiling_requests:,})")
    g.add_argument("--no-pin", dest="pin", action="store_false",
                   help="do not pin the server to one core and the driver to the others")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="results folder (default results/<run-id>)")


def settings_from_args(args: argparse.Namespace, **extra: Any) -> CapacitySettings:
    settings = CapacitySettings(
        duration_s=args.duration, warmup_s=args.warmup, processes=args.processes, connections=args.connections,
        pipeline=args.pipeline, payload_bytes=args.payload, lease_ms=args.lease, work=args.work, rate=args.rate,
        feed=args.feed, backlog=args.backlog, ceiling=args.ceiling, ceiling_requests=args.ceiling_requests,
        pin=args.pin, queues=args.queues, **extra)
    settings.check()
    return settings

