"""What a fault scenario is (its plan, context, injection and checks) and the helpers
the scenarios in `echomq_bench.faults.scenarios` share: stopping a consumer mid-lease,
and reading the queue's sets."""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import redis

from echomq._instrument import QueueKeys
from echomq_bench.faults.load import Evidence, Fleet, Worker, last_event
from echomq_bench.faults.proxy import FaultProxy
from echomq_bench.load.audit import AuditReport, Ledger
from echomq_bench.load import drain
from echomq_bench.records.kinds.faults import CheckEntry
from echomq_bench.servers import Server

__all__ = ["Plan", "QUICK", "FULL", "Ctx", "Injection", "Lease", "Scenario", "members", "active_tokens",
           "hold_lease", "freeze", "errorstat", "since", "stopped", "held_attempts"]


@dataclass(frozen=True)
class Plan:
    warmup_s: float
    after_s: float
    drain_s: float
    kills: int
    zombies: int          # half complete when resumed, half retry
    flushes: int
    flush_gap_s: float
    pause_s: float
    oom_headroom: int     # bytes of maxmemory above the memory in use
    oom_refusals: int     # refused enqueues to see before memory is freed
    net_fault_s: float    # how long latency and the bandwidth cap stay on
    resets: int           # rounds of connection resets
    partition_s: float    # how long the blackhole lasts (longer than the 1 s lease)


QUICK = Plan(warmup_s=0.8, after_s=1.0, drain_s=5.0, kills=2, zombies=2, flushes=3, flush_gap_s=0.3,
             pause_s=2.0, oom_headroom=1 << 20, oom_refusals=20, net_fault_s=1.5, resets=6, partition_s=2.0)
FULL = Plan(warmup_s=3.0, after_s=5.0, drain_s=15.0, kills=4, zombies=4, flushes=10, flush_gap_s=0.5,
            pause_s=2.0, oom_headroom=4 << 20, oom_refusals=200, net_fault_s=5.0, resets=20, partition_s=3.0)


@dataclass
class Ctx:
    server: Server
    admin: redis.Redis
    keys: QueueKeys
    fleet: Fleet
    plan: Plan
    rng: random.Random
    proxy: FaultProxy | None = None   # between the load and the server, for the network scenarios


@dataclass
class Injection:
    count: int
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Lease:
    """A lease a stopped consumer holds: its worker, job, token, whether the
    attempt will end in retry, and when it was stopped."""
    worker: str
    jid: str
    token: int
    fail: bool
    t: float


@dataclass(frozen=True)
class Scenario:
    name: str
    fault: str
    recovery: str  # what the recovery time measures
    inject: Callable[[Ctx], Injection]
    check: Callable[[Ctx, Injection, Evidence, Ledger, AuditReport], tuple[list[CheckEntry], float | None]]
    server_args: tuple[str, ...] = ()
    load: dict[str, Any] = field(default_factory=dict)
    embedded_only: bool = False
    expects_loss: bool = False
    proxied: bool = False   # the load goes through a FaultProxy; every lost reply must be resolved


# --------------------------------------------------------------------------
# Helpers the scenarios share


def stopped(pid: int, timeout: float = 0.5) -> bool:
    """Wait until the kernel shows pid stopped, so its log can be read as final."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state in ("T", "t"):
            return True
        time.sleep(0.001)
    return False


def hold_lease(ctx: Ctx, fail: bool | None = None, exclude: tuple[int, ...] = (),
                timeout: float = 10.0) -> tuple[Worker, Lease] | None:
    """Stop a consumer that holds a lease and has not yet sent its answer.

    SIGSTOP, then read its last event: `C` (claimed, nothing in flight)
    means it is mid-lease and stays stopped; anything else gets SIGCONT and
    another consumer is tried. `fail` asks for an attempt that will retry
    (True) or complete (False). The attempt must not be the job's last, so
    that the reaper hands the job on instead of burying it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        candidates = [w for w in ctx.fleet.alive("consumer") if w.pid not in exclude]
        if not candidates:
            return None
        worker = ctx.rng.choice(candidates)
        os.kill(worker.pid, signal.SIGSTOP)
        if stopped(worker.pid):
            last = last_event(worker.path)
            if (last and last[0] == "C" and int(last[2]) < ctx.fleet.settings.max_attempts
                    and (fail is None or (last[3] == "1") == fail)):
                return worker, Lease(worker.label, last[1], int(last[2]), last[3] == "1", time.monotonic())
        os.kill(worker.pid, signal.SIGCONT)
        time.sleep(0.003)
    return None


def members(client: redis.Redis, keys: QueueKeys) -> set[str]:
    """Every id the queue holds, its four sets read in one transaction."""
    return drain.held_ids(client, [keys])


def held_attempts(client: redis.Redis, keys: QueueKeys, ids: set[str]) -> dict[str, int]:
    """The attempts of each held job's row."""
    return drain.attempts(client, keys, ids)


def errorstat(client: redis.Redis, code: str) -> int:
    stats = client.info("errorstats")
    return int(stats.get(f"errorstat_{code}", {}).get("count", 0))


def active_tokens(client: redis.Redis, keys: QueueKeys) -> dict[str, int]:
    """The token each active job's lease carries (its row's attempts)."""
    return drain.attempts(client, keys, drain.places(client, [keys])["active"])


def freeze(ctx: Ctx, workers: list[Worker]) -> None:
    ctx.fleet.signal(workers, signal.SIGSTOP)
    for w in workers:
        stopped(w.pid)


def since(t0: float, t: float | None) -> float | None:
    return None if t is None else t - t0
