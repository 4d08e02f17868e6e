"""What a capacity run is asked to do, checked before anything runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal

from echomq_bench.errors import BenchError

__all__ = ["CapacitySettings", "DEFAULT_SETTINGS", "CapacityError", "refuse_clusters"]


class CapacityError(BenchError):
    """The driver could not run or its run cannot be trusted; the message says why."""


@dataclass(frozen=True)
class CapacitySettings:
    duration_s: float = 10.0
    warmup_s: float = 1.0
    processes: int = 1
    connections: int = 4          # per process
    pipeline: int = 64            # jobs in flight per connection
    payload_bytes: int = 64
    lease_ms: int = 60_000
    work: str = "const:0"         # echomq_bench.measurement.workdist spec; 0 for capacity
    rate: float | None = None     # cycles/s over all processes: open loop; None: closed loop
    reply_timeout_s: float = 5.0  # open loop: replies still owed when the window closes are awaited this long
    feed: Literal["backlog", "produce"] = "backlog"
    backlog: int | None = None    # jobs to pre-fill; None: enough for BACKLOG_RATE cycles/s (session.py)
    ceiling: bool = True
    ceiling_requests: int = 100_000
    pin: bool = True
    queues: int | None = None     # None: 1 on one server, one per master on a cluster
    ledger: bool = False          # keep every id, then audit the server's sets against it
    keep_keys: bool = False       # leave the queue's keys on the server after the run

    def check(self) -> None:
        problems = []
        if not self.duration_s > 0:
            problems.append(f"duration must be > 0 s, got {self.duration_s}")
        if self.warmup_s < 0:
            problems.append(f"warmup must be >= 0 s, got {self.warmup_s}")
        for name in ("processes", "connections", "pipeline", "lease_ms", "queues", "ceiling_requests"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.payload_bytes < 0:
            problems.append(f"payload must be >= 0 bytes, got {self.payload_bytes}")
        if self.rate is not None and not self.rate > 0:
            problems.append(f"rate must be > 0 cycles/s, got {self.rate}")
        if not self.reply_timeout_s > 0:
            problems.append(f"reply timeout must be > 0 s, got {self.reply_timeout_s}")
        if self.feed not in ("backlog", "produce"):
            problems.append(f"feed must be backlog or produce, got {self.feed!r}")
        if self.backlog is not None and self.backlog < 0:
            problems.append(f"backlog must be >= 0 jobs, got {self.backlog}")
        from echomq_bench.measurement.workdist import DistError, parse_dist

        try:
            parse_dist(self.work)
        except DistError as exc:
            problems.append(str(exc))
        if problems:
            raise CapacityError("bad capacity settings: " + "; ".join(problems))


DEFAULT_SETTINGS = CapacitySettings()


def refuse_clusters(specs: Iterable[Any], command: str = "compare") -> None:
    """CapacityError before anything starts when a spec is a cluster.

    compare loads every build on one server core, in turns or together, and
    judges a difference from their shares of it; a cluster is several main
    threads on several cores, so there is no one core to share. A cluster's
    capacity is `echomq-bench capacity --server redis-cluster` (per node).
    """
    clusters = [spec.describe() for spec in specs if getattr(spec, "kind", None) == "cluster"]
    if clusters:
        raise CapacityError(
            f"{', '.join(clusters)}: {command} shares one server core between builds, and a cluster has a main "
            "thread per node; measure each cluster on its own with `echomq-bench capacity --server "
            f"{clusters[0]}` (per-node rows), or each node's build with --server redis|valkey")
