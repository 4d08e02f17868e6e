"""The soak: one build under the steady fault load for a long while, struck
by a seeded nemesis schedule (echomq_bench.faults.nemesis) that mixes
process and network faults, then drained, audited and its call log checked
like every scenario.

The load runs through a fault proxy the whole time, so a network fault can
strike at any moment; the process faults act on the server or the workers
directly. Each fault is injected by its scenario's own code (the seven
process scenarios of echomq_bench.faults.scenarios and the three network
ones of echomq_bench.faults.netscenarios) with a plan cut down to one
strike; `bandwidth` and `half-open` alone are one proxy call each.

The server runs with appendonly yes and appendfsync always, so a restart
loses nothing (restart-nopersist, which loses by design, has no place in a
soak that must lose nothing). The load makes no simulated failures, so every
call whose reply is lost is an enqueue, a claim or a complete, each of which
the server's state classifies (echomq_bench.faults.ambiguous).
"""

from __future__ import annotations

import random
import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import redis

from echomq import EchoMQError
from echomq._instrument import QueueKeys
from echomq_bench.errors import BenchError, SettingsError
from echomq_bench.progress import ProgressFn
from echomq_bench.faults.base import QUICK, Ctx, Injection, members
from echomq_bench.faults.evidence import Evidence
from echomq_bench.faults.calllog_run import call_log_check, mark_struck
from echomq_bench.faults.load import Fleet, LoadSettings, read_logs
from echomq_bench.faults.nemesis import HOLD_S, KINDS, Fault, counts, schedule
from echomq_bench.faults.netscenarios import BANDWIDTH, Through, net_latency, net_partition, net_reset, proxy_of
from echomq_bench.faults.proxy import FaultProxy
from echomq_bench.faults.runner import audit_held, drain
from echomq_bench.faults.scenarios import SCENARIOS
from echomq_bench.faults.soakstats import RECOVERY_MEANS, by_kind, per_second, recovery_s
from echomq_bench.records.kinds.faults import AuditEntry, CheckEntry, SoakEntry, StruckEntry
from echomq_bench.servers import redacted_url

__all__ = ["SoakError", "SOAK_PLAN", "SOAK_SERVER_ARGS", "SOAK_BANDWIDTH", "ACTIONS", "tallied",
           "run_soak"]

SOAK_SERVER_ARGS = ("--appendonly", "yes", "--appendfsync", "always")
SOAK_BANDWIDTH = BANDWIDTH // 8   # bytes/s: tight enough that a batch of replies queues behind it
# One strike of each scenario's fault, each as long as the schedule plans it.
SOAK_PLAN = replace(QUICK, kills=1, zombies=1, flushes=2, flush_gap_s=0.2, pause_s=HOLD_S["pause"],
                    oom_headroom=128 << 10, oom_refusals=20, net_fault_s=HOLD_S["latency"], resets=2,
                    partition_s=2.0)


class SoakError(SettingsError):
    """A soak asked for with settings it cannot run under; nothing has started."""


def _bandwidth(ctx: Ctx) -> Injection:
    proxy = proxy_of(ctx)
    proxy.bandwidth(SOAK_BANDWIDTH)
    time.sleep(HOLD_S["bandwidth"])
    proxy.clear()
    return Injection(1, f"{SOAK_BANDWIDTH / 1000:g} kB/s per direction per connection for {HOLD_S['bandwidth']:g} s")


def _half_open(ctx: Ctx) -> Injection:
    cut = proxy_of(ctx).half_open()
    return Injection(cut, f"{cut} connections half-open (the server's side closed, the client's silent)")


ACTIONS: dict[str, Callable[[Ctx], Injection]] = {
    "kill": SCENARIOS["crash"].inject, "zombie": SCENARIOS["zombie"].inject, "pause": SCENARIOS["pause"].inject,
    "restart": SCENARIOS["restart-aof"].inject, "script-flush": SCENARIOS["script-flush"].inject,
    "oom": SCENARIOS["oom"].inject, "latency": net_latency, "bandwidth": _bandwidth, "reset": net_reset,
    "partition": net_partition, "half-open": _half_open,
}
assert set(ACTIONS) == set(KINDS), "every kind the schedule draws has its action"


def tallied(soak: SoakEntry) -> SoakEntry:
    """The soak with what its faults and figures add up to: faults injected by kind (in the order of
    KINDS), recovery per kind, the lost replies left unresolved, and what recovery means."""
    done = [f for f in soak.faults if f.injected]
    return replace(soak, injected={k: n for k in KINDS if (n := sum(f.kind == k for f in done))},
                   kinds=tuple(by_kind([(f.kind, f.family, f.recovery_s) for f in soak.faults])),
                   ambiguous_unresolved=soak.ambiguous - soak.ambiguous_resolved, recovery_means=RECOVERY_MEANS)


def run_soak(spec: Any, duration_s: float, seed: int, base: LoadSettings, log_root: Path,
             on_server: Callable[[Any], None] = lambda s: None, log: ProgressFn = print) -> SoakEntry:
    """One soak on one embedded server; the schedule is `schedule(seed, duration_s)`."""
    from echomq_bench.records.meta import server_settings
    from echomq_bench.servers import server_version, start

    plan = schedule(seed, duration_s)
    server = start(replace(spec, args=(*spec.args, *SOAK_SERVER_ARGS)))
    keys = QueueKeys(f"soak-{secrets.token_hex(3)}")
    try:
        admin = server.client(socket_timeout=10)
        result = SoakEntry(spec.name, server_version(admin), seed, duration_s, counts(plan),
                           server_settings=server_settings(admin))
        on_server(server)
        settings = replace(base, fail_rate=0.0)  # see the module docstring
        log_dir = log_root / f"{spec.name}-soak"
        log_dir.mkdir(parents=True, exist_ok=True)
        proxy = FaultProxy(server.host, server.port, seed=seed).start()
        fleet = Fleet(Through(server, proxy), keys.name, settings, log_dir, seed, kinds=KINDS)
        ctx = Ctx(server, admin, keys, fleet, SOAK_PLAN, random.Random(seed), proxy)
        t0 = time.monotonic()
        try:
            fleet.start_all()
            struck = _strike(ctx, plan, t0, duration_s, log)
            t_stop = time.monotonic()
            fleet.stop_producers()
            drain(ctx, SOAK_PLAN.drain_s + settings.lease_ms / 1000)
        finally:
            fleet.stop()
            proxy.stop()
        t_end = time.monotonic()
        return tallied(replace(result, wall_s=t_end - t0,
                               **_judge(ctx, read_logs(fleet.paths()), struck, (t0, t_stop, t_end))))
    finally:
        server.stop()


# A fault that cannot be injected fails the soak, not the run: the load is still audited.
_INJECT_ERRORS = (redis.RedisError, EchoMQError, BenchError, OSError, RuntimeError, TypeError)

Strike = tuple[Fault, float, float, Injection | None, str]   # fault, start, end, what it did


def _strike(ctx: Ctx, plan: tuple[Fault, ...], t0: float, duration_s: float, log: ProgressFn
            ) -> list[Strike]:
    """Each fault at its planned time, unless the one before overran: then
    once that one's recovery gap is over. Last, the last gap."""
    out: list[Strike] = []
    ready = t0
    for fault in plan:
        _sleep_until(max(t0 + fault.at_s, ready))
        start = time.monotonic()
        injection: Injection | None
        try:
            with ctx.fleet.strike(fault.kind):
                injection = ACTIONS[fault.kind](ctx)
            text = injection.text
        except _INJECT_ERRORS as exc:
            injection, text = None, f"could not inject: {type(exc).__name__}: {redacted_url(str(exc))}"
        mark_struck(ctx.fleet, fault.kind, injection)
        end = time.monotonic()
        log(f"  {start - t0:7.1f} s  {fault.kind:<12} {text}")
        out.append((fault, start, end, injection, text))
        ready = end + fault.gap_s
    _sleep_until(max(t0 + duration_s, ready))
    return out


def _sleep_until(t: float) -> None:
    wait = t - time.monotonic()
    if wait > 0:
        time.sleep(wait)


def _judge(ctx: Ctx, ev: Evidence, struck: list[Strike], times: tuple[float, float, float]) -> dict[str, Any]:
    """The soak's verdict fields: the audit, every lost reply classified, and each fault's recovery."""
    t0, t_stop, t_end = times
    places = members(ctx.admin, ctx.keys)
    zombies = {(z.jid, z.token) for _, _, _, inj, _ in struck if inj is not None for z in inj.data.get("zombies", ())}
    held = audit_held(ctx, ev, places, zombies)
    answered = sorted(a.t for a in ev.accepted)
    limits = [start for _, start, *_ in struck[1:]] + [t_stop]
    faults = [StruckEntry(f.kind, f.family, f.at_s, round(start - t0, 3), round(end - t0, 3),
                          text, inj is not None and inj.count > 0, recovery_s(answered, start, end, limit))
              for (f, start, end, inj, text), limit in zip(struck, limits)]
    done = sum(f.injected for f in faults)
    checked, judged = call_log_check(ctx.fleet, ctx.admin, ctx.keys)
    checks = [CheckEntry(done == len(struck), f"{done}/{len(struck)} scheduled faults injected"),
              CheckEntry(held.ambiguity.ok, held.ambiguity.text()), *held.checks, checked]
    report = held.report
    return dict(faults=tuple(faults), timeline=tuple(per_second(answered, t0, t_end)), jobs=report.enqueued,
                completed=report.completed, lost=report.lost, double_accepted=report.double_accepted,
                ambiguous=held.ambiguity.total, ambiguous_resolved=held.ambiguity.resolved,
                unanswered=ev.unanswered, refused_expected=held.refused_expected,
                refused_unexpected=held.refused_unexpected, checks=tuple(checks), passed=all(c.ok for c in checks),
                audit=AuditEntry.from_record({**report.to_dict(), "ambiguous": held.ambiguity.to_dict()}),
                history=judged)
