"""The network faults of `echomq-bench faults`: the load reaches the server
through a `FaultProxy` (echomq_bench.faults.proxy) and the proxy misbehaves.

    net-latency    latency with jitter each way and a bandwidth cap, then lifted
    net-reset      rounds of connection resets, each swallowing replies of calls
                   that ran: the calls are lost from the caller's side only
    net-partition  a blackhole longer than the lease, then half-open connections

Every call whose reply was lost is classified afterwards from the server's
state (echomq_bench.faults.ambiguous); the runner requires all resolved.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

from echomq_bench.faults.base import Ctx, Injection, Scenario, since
from echomq_bench.faults.evidence import Evidence
from echomq_bench.faults.proxy import FaultProxy
from echomq_bench.load.audit import AuditReport, Ledger
from echomq_bench.records.kinds.faults import CheckEntry
from echomq_bench.servers import Server

__all__ = ["Through", "NET_SCENARIOS", "proxy_of", "LATENCY_MS", "JITTER_MS", "BANDWIDTH", "DROPS_PER_RESET"]

LATENCY_MS = 20.0
JITTER_MS = 10.0
BANDWIDTH = 64_000        # bytes/s, each direction of each connection
RESET_GAP_S = 0.15
DROPS_PER_RESET = 2       # replies swallowed (with their connection) before each round of resets
HALF_OPEN_AFTER_S = 0.5   # after the partition heals
EDGE_S = 0.05             # a reply already on its way when a fault starts may still arrive


@dataclass(frozen=True)
class Through:
    """A server as the load sees it through the proxy: same credentials, the proxy's port."""

    server: Server
    proxy: FaultProxy

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(**{**self.server.connection_kwargs(), "host": "127.0.0.1", "port": self.proxy.port,
                              **kwargs})


def proxy_of(ctx: Ctx) -> FaultProxy:
    """The proxy between the load and the server, which a network fault needs."""
    if ctx.proxy is None:
        raise RuntimeError("a network fault runs with a proxy between the load and the server")
    return ctx.proxy


def net_latency(ctx: Ctx) -> Injection:
    proxy = proxy_of(ctx)
    proxy.latency(LATENCY_MS, JITTER_MS)
    proxy.bandwidth(BANDWIDTH)
    t_on = time.monotonic()
    time.sleep(ctx.plan.net_fault_s)
    t_off = time.monotonic()
    proxy.clear()
    return Injection(1, f"latency {LATENCY_MS:g} ms + up to {JITTER_MS:g} ms jitter each way, "
                        f"{BANDWIDTH // 1000} kB/s per direction, for {ctx.plan.net_fault_s:g} s",
                     {"t_on": t_on, "t_off": t_off})


def check_latency(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                  report: AuditReport) -> tuple[list[CheckEntry], float | None]:
    t_on, t_off = inj.data["t_on"], inj.data["t_off"]
    under = sorted(a.t - a.sent for a in ev.accepted if a.sent >= t_on and a.t <= t_off)
    floor = 2 * LATENCY_MS / 1000
    fastest = f"{under[0] * 1000:.1f} ms" if under else "-"
    return [
        CheckEntry(len(under) > 0, f"{len(under)} completes sent and accepted under the fault"),
        CheckEntry(bool(under) and under[0] >= floor,
                   f"the fastest of them took {fastest}: at least the {floor * 1000:g} ms the proxy adds"),
    ], since(t_off, ev.first_sent_after(t_off))


def net_reset(ctx: Ctx) -> Injection:
    proxy = proxy_of(ctx)
    for _ in range(ctx.plan.resets):
        time.sleep(RESET_GAP_S)
        proxy.drop_next_reply(DROPS_PER_RESET)
        time.sleep(RESET_GAP_S)
        proxy.reset()
    t_last = time.monotonic()
    proxy.clear()
    cut = proxy.counts["resets"] + proxy.counts["replies_dropped"]
    return Injection(ctx.plan.resets, f"{ctx.plan.resets} rounds: {DROPS_PER_RESET} replies swallowed with "
                                      f"their connection, then every connection reset ({cut} connections in all)",
                     {"t_last": t_last, "dropped": proxy.counts["replies_dropped"], "cut": cut})


def check_reset(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                report: AuditReport) -> tuple[list[CheckEntry], float | None]:
    t_last = inj.data["t_last"]
    after = [a for a in ev.accepted if a.sent >= t_last]
    return [
        CheckEntry(inj.data["dropped"] > 0, f"{inj.data['dropped']} replies of calls that ran were swallowed"),
        CheckEntry(ev.unanswered >= inj.data["dropped"],
                   f"{ev.unanswered} calls heard no reply (at least the {inj.data['dropped']} swallowed)"),
        CheckEntry(len(after) > 0, f"{len(after)} completes accepted after the last reset"),
    ], since(t_last, ev.first_sent_after(t_last))


def net_partition(ctx: Ctx) -> Injection:
    proxy = proxy_of(ctx)
    t_cut = time.monotonic()
    proxy.blackhole()
    time.sleep(ctx.plan.partition_s)
    proxy.heal()
    t_heal = time.monotonic()
    time.sleep(HALF_OPEN_AFTER_S)
    half = proxy.half_open()
    t_half = time.monotonic()
    return Injection(2, f"partition {ctx.plan.partition_s:g} s (nothing forwarded, connections held), "
                        f"then {half} connections half-open",
                     {"t_cut": t_cut, "t_heal": t_heal, "t_half": t_half, "half": half})


def check_partition(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                    report: AuditReport) -> tuple[list[CheckEntry], float | None]:
    d = inj.data
    inside = [a for a in ev.accepted if d["t_cut"] + EDGE_S < a.t < d["t_heal"]]
    healed = [a for a in ev.accepted if d["t_heal"] <= a.sent < d["t_half"]]
    after_half = [a for a in ev.accepted if a.sent >= d["t_half"]]
    return [
        CheckEntry(not inside, f"{len(inside)} completes answered inside the partition"),
        CheckEntry(len(healed) > 0, f"{len(healed)} completes accepted once it healed"),
        CheckEntry(d["half"] > 0 and len(after_half) > 0,
                   f"{d['half']} connections left half-open; {len(after_half)} completes accepted after"),
    ], since(d["t_heal"], ev.first_sent_after(d["t_heal"]))


# No simulated failures: every call the network can lose here is an enqueue,
# a claim or a complete, each of which the server's state classifies.
_LOAD = {"fail_rate": 0.0}

NET_SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("net-latency", "latency, jitter and a bandwidth cap on the network",
             "fault lifted to the first complete sent after it accepted", net_latency, check_latency,
             load=_LOAD, proxied=True),
    Scenario("net-reset", "connections reset, replies of calls that ran lost",
             "last reset to the first complete sent after it accepted", net_reset, check_reset,
             load=_LOAD, proxied=True),
    Scenario("net-partition", "a partition longer than the lease, then half-open connections",
             "partition healed to the first complete sent after it accepted", net_partition, check_partition,
             load=_LOAD, proxied=True),
)}
