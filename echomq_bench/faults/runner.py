"""Running one fault scenario: its own server, the load forked around it, the fault
injected, the queue drained, every job audited and the call log checked;
what it found is the record's `ScenarioEntry` (`echomq_bench.records.kinds.faults`).

The scenarios themselves are `echomq_bench.faults.scenarios`; the load is
`echomq_bench.faults.load`.
"""

from __future__ import annotations

import random
import resource
import secrets
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import redis

from echomq import EchoMQError
from echomq._instrument import QueueKeys
from echomq_bench.errors import BenchError
from echomq_bench.faults.ambiguous import Ambiguity, classify
from echomq_bench.faults.base import Ctx, Injection, Plan, Scenario, active_tokens, held_attempts
from echomq_bench.faults.calllog_run import call_log_check, mark_struck
from echomq_bench.faults.netscenarios import Through
from echomq_bench.faults.proxy import FaultProxy
from echomq_bench.faults.load import Evidence, Fleet, LoadSettings, read_logs
from echomq_bench.load.audit import AuditReport, Ledger, audit
from echomq_bench.load.bulk import drop_queue
from echomq_bench.load.drain import drain as drain_queues, held_ids
from echomq_bench.records.kinds.faults import AuditEntry, CheckEntry, ScenarioEntry
from echomq_bench.servers import redacted_url

__all__ = ["Audited", "run_scenario", "audit_held", "drain"]


# --------------------------------------------------------------------------
# Running one scenario


def drain(ctx: Ctx, timeout: float) -> bool:
    """Wait for the scenario's queue to settle (`echomq_bench.load.drain`)."""
    return drain_queues(ctx.admin, [ctx.keys], timeout)


def _cpu(client: redis.Redis) -> tuple[float, str]:
    info = client.info("cpu")
    main = float(info.get("used_cpu_sys_main_thread", info["used_cpu_sys"])) + float(
        info.get("used_cpu_user_main_thread", info["used_cpu_user"]))
    return main, str(client.info("server").get("run_id"))


def run_scenario(spec: Any, scenario: Scenario, plan: Plan, base: LoadSettings, log_root: Path,
                 seed: int, on_server: Callable[[Any], None] = lambda s: None) -> ScenarioEntry:
    outcome = ScenarioEntry(spec.name, "", scenario.name, scenario.fault, recovery_means=scenario.recovery)
    if scenario.embedded_only and spec.kind != "embedded":
        return replace(outcome, skipped="needs an embedded server (it signals or restarts the server process)")
    if spec.kind == "embedded":
        spec = replace(spec, args=(*spec.args, *scenario.server_args))
    try:
        return _run(outcome, spec, scenario, plan, base, log_root, seed, on_server)
    except (redis.RedisError, EchoMQError, BenchError, OSError) as exc:
        # One scenario that cannot run (a URL server's user may not CONFIG SET) is a failed line.
        return replace(outcome, passed=False, checks=(
            CheckEntry(False, f"the scenario could not run: {type(exc).__name__}: {redacted_url(str(exc))}"),))


def _run(outcome: ScenarioEntry, spec: Any, scenario: Scenario, plan: Plan, base: LoadSettings, log_root: Path,
         seed: int, on_server: Callable[[Any], None]) -> ScenarioEntry:
    from echomq_bench.records.meta import server_settings
    from echomq_bench.servers import server_version, start

    server = start(spec)
    name = f"faults-{scenario.name}-{secrets.token_hex(3)}"
    keys = QueueKeys(name)
    try:
        admin = server.client(socket_timeout=10)
        outcome = replace(outcome, build=server_version(admin), server_settings=server_settings(admin))
        on_server(server)
        settings = replace(base, **scenario.load)
        log_dir = log_root / f"{spec.name}-{scenario.name}"
        log_dir.mkdir(parents=True, exist_ok=True)
        proxy = FaultProxy(server.host, server.port, seed=seed).start() if scenario.proxied else None
        fleet = Fleet(server if proxy is None else Through(server, proxy), name, settings, log_dir, seed,
                      kinds=(scenario.name,))
        ctx = Ctx(server, admin, keys, fleet, plan, random.Random(seed), proxy)
        cpu0, run0 = _cpu(admin)
        rusage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall0 = time.monotonic()
        try:
            fleet.start_all()
            time.sleep(plan.warmup_s)
            with fleet.strike(scenario.name):
                injection = scenario.inject(ctx)
            mark_struck(fleet, scenario.name, injection)
            time.sleep(plan.after_s)
            fleet.stop_producers()
            drain(ctx, plan.drain_s + settings.lease_ms / 1000)
        finally:
            fleet.stop()
            if proxy is not None:
                proxy.stop()
        wall_s = time.monotonic() - wall0
        cpu1, run1 = _cpu(admin)
        rusage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # The same server process throughout, or its counters are not comparable.
        server_cpu = (cpu1 - cpu0) / wall_s if run1 == run0 else None
        children_cpu = rusage1.ru_utime + rusage1.ru_stime - rusage0.ru_utime - rusage0.ru_stime
        return replace(outcome, wall_s=wall_s, server_cpu=server_cpu, client_cpu=children_cpu / wall_s,
                       **_judge(scenario, ctx, injection, read_logs(fleet.paths())))
    finally:
        if spec.kind != "embedded":
            _delete_queue(server, keys)
        server.stop()


def _judge(scenario: Scenario, ctx: Ctx, injection: Injection, ev: Evidence) -> dict[str, Any]:
    """The scenario's figures and verdict, from the audit and the workers' logs."""
    places = held_ids(ctx.admin, [ctx.keys]) | injection.data.get("held", set())
    zombies = {(z.jid, z.token) for z in injection.data.get("zombies", ())}
    held = audit_held(ctx, ev, places, zombies, scenario.expects_loss)
    own, recovery = scenario.check(ctx, injection, ev, held.ledger, held.report)
    # Elsewhere the classification is reported, not judged (see docs/guide/faults.md).
    ambiguous = [CheckEntry(held.ambiguity.ok, held.ambiguity.text())] if scenario.proxied else []
    checked, judged = call_log_check(ctx.fleet, ctx.admin, ctx.keys, scenario.expects_loss)
    checks = own + ambiguous + held.checks + [checked]
    report = held.report
    return dict(faults=injection.count, recovery_s=recovery, checks=tuple(checks), fault=injection.text,
                jobs=report.enqueued, completed=report.completed, lost=report.lost,
                double_accepted=report.double_accepted, refused_unexpected=held.refused_unexpected,
                refused_expected=held.refused_expected, unanswered=ev.unanswered,
                ambiguous=held.ambiguity.total, ambiguous_resolved=held.ambiguity.resolved,
                audit=AuditEntry.from_record({**report.to_dict(), "ambiguous": held.ambiguity.to_dict()}),
                passed=all(c.ok for c in checks),
                history=judged)


@dataclass(frozen=True)
class Audited:
    """The audit of a run under faults, and the checks every such run holds."""

    ledger: Ledger
    report: AuditReport
    ambiguity: Ambiguity
    checks: list[CheckEntry]
    refused_unexpected: int
    refused_expected: int


def audit_held(ctx: Ctx, ev: Evidence, places: set[str], zombies: set[tuple[str, int]],
               expects_loss: bool = False) -> Audited:
    """Every id minted audited against `places` (what the server holds, or
    held before a loss), every lost reply classified, and the checks common
    to every run under faults."""
    ledger = ev.ledger(places, zombies)
    report = audit(ctx.admin, [ctx.keys.name], ledger)
    active = active_tokens(ctx.admin, ctx.keys)
    retry_current = [r for r in ev.retry_refused if active.get(r.jid) == r.token]
    ambiguity = classify(ev, places, held_attempts(ctx.admin, ctx.keys, places))
    lost_ok = report.lost > 0 if expects_loss else report.lost == 0
    checks = [
        CheckEntry(report.enqueued > 0 and report.completed > 0,
                   f"load ran: {report.enqueued} jobs enqueued, {report.completed} completed"),
        CheckEntry(lost_ok and report.in_two_places == 0 and report.unknown == 0,
                   f"audit: lost {report.lost}, in two places {report.in_two_places}, unknown ids {report.unknown}"
                   + (" (a loss is expected and must be reported)" if expects_loss else "")),
        CheckEntry(report.double_accepted == 0 and report.zombie_accepted == 0,
                   f"completes accepted twice {report.double_accepted}, "
                   f"zombie completes accepted {report.zombie_accepted}"),
        CheckEntry(report.refused_not_superseded == 0 and not retry_current,
                   f"{report.refused + len(ev.retry_refused)} completes and retries refused, "
                   f"{report.refused_not_superseded + len(retry_current)} of them from the current holder"),
        CheckEntry(not ev.errors,
                   f"{len(ev.errors)} unexpected client errors" + (f": {ev.errors[0]}" if ev.errors else "")),
    ]
    unexpected = report.refused_not_superseded + len(retry_current)
    return Audited(ledger, report, ambiguity, checks, unexpected,
                   report.refused + len(ev.retry_refused) - unexpected)


def _delete_queue(server: Any, keys: QueueKeys) -> None:
    try:
        with server.client() as client:
            drop_queue(client, keys.name, sweep=True)
    except redis.RedisError:
        pass
