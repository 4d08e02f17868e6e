"""The workload flags `capacity` and `compare` share, and the capacity settings read from them."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.options import add_ceiling, add_out, duration_s, number, rate, whole_ms, work_dist

__all__ = ["QUICK", "add_workload_options", "settings_from_args"]

# What --quick changes, unless the flag itself is given: a few seconds a build.
QUICK = {"duration_s": 2.0, "warmup_s": 0.5, "ceiling_requests": 20_000}


def settings_from_args(args: argparse.Namespace, *, duration_s: float = 10.0, **extra: Any) -> CapacitySettings:
    """The settings the workload flags (`add_workload_options`) ask for."""
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


def add_workload_options(parser: argparse.ArgumentParser, *, duration_default: str,
                         pipeline_default: int | None = None) -> None:
    """The capacity workload flags `capacity` and `compare` share. Values that
    --quick changes default to None here; see settings_from_args."""
    d = CapacitySettings()
    d = replace(d, pipeline=pipeline_default) if pipeline_default is not None else d
    g = parser.add_argument_group("workload")
    g.add_argument("--duration", type=duration_s, default=None, metavar="DURATION",
                   help=f"measured window per run, e.g. 10s, 500ms (default {duration_default})")
    g.add_argument("--warmup", type=duration_s, default=None, metavar="DURATION",
                   help=f"load before the window opens (default {d.warmup_s:g}s)")
    g.add_argument("--processes", type=number(int, 1), default=d.processes, metavar="N",
                   help=f"driver processes, per master on a cluster (default {d.processes})")
    g.add_argument("--connections", type=number(int, 1), default=d.connections, metavar="N",
                   help=f"connections per process (default {d.connections})")
    g.add_argument("--pipeline", type=int, default=d.pipeline, metavar="N",
                   help=f"jobs in flight per connection (default {d.pipeline})")
    g.add_argument("--payload", type=number(int, 0), default=d.payload_bytes, metavar="BYTES",
                   help=f"payload size in bytes (default {d.payload_bytes})")
    g.add_argument("--lease", type=whole_ms, default=d.lease_ms, metavar="DURATION",
                   help=f"lease per claim, e.g. 60s, 500ms (default {d.lease_ms // 1000}s)")
    g.add_argument("--work", type=work_dist, default=d.work, metavar="DIST",
                   help="simulated work per job, e.g. const:0 (default, capacity), exp:mean=2ms")
    g.add_argument("--rate", type=rate, default=None, metavar="JOBS_PER_S",
                   help="jobs/s offered over all queues, open loop (on a cluster split over the queues); latency "
                        "from each claim's intended start (default: closed loop, as fast as the server answers)")
    g.add_argument("--feed", choices=("backlog", "produce"), default=d.feed,
                   help="backlog: drain a pre-filled backlog (default); produce: producers keep pending fed")
    g.add_argument("--backlog", type=number(int, 0), default=None, metavar="JOBS",
                   help="jobs to pre-fill (default: enough for 80,000 jobs/s through warm-up and window)")
    g.add_argument("--queues", type=int, default=d.queues, metavar="N",
                   help="queues to spread the load over (default: 1 on a server, one per master on a cluster, "
                        "named so that they land on different masters)")
    add_ceiling(g)
    g.add_argument("--ceiling-requests", type=number(int, 1), default=None, metavar="N",
                   help=f"claims the C client sends for the ceiling (default {d.ceiling_requests:,})")
    g.add_argument("--no-pin", dest="pin", action="store_false",
                   help="do not pin the server to one core and the driver to the others")
    add_out(parser)
