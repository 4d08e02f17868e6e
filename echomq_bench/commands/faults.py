"""The queue under fire: seven faults, each under a steady load with an audit of every job.

Each scenario starts its own server (an embedded one, from the --server
spec plus the scenario's settings), forks producers, consumers and a pump
(echomq_bench.faults.load), lets the load settle, injects its fault, lets the load
run on, stops the producers, lets the consumers drain the queue, and audits
every id minted against the server's sets (echomq_bench.load.audit):

    crash              consumers SIGKILLed mid-lease: their jobs are reaped and completed once
    zombie             consumers SIGSTOPped past their lease, then resumed: their complete
                       and retry are refused; the new holder's result stands
    pause              the server SIGSTOPped for 2 s: clients time out and carry on
    restart-aof        the server SIGKILLed and restarted, appendonly yes, appendfsync always:
                       scripts reload transparently, nothing is lost
    restart-nopersist  the same with nothing on disk: the audit must report the loss, with
                       counts equal to what the server held when it died
    script-flush       SCRIPT FLUSH mid-run: transparent reload
    oom                maxmemory under noeviction: enqueue refused with a clear error, no
                       half-written row, the queue recovers when memory frees

A scenario passes when its own checks and the audit hold; for
restart-nopersist, detecting the loss exactly is the pass.
"""

from __future__ import annotations

import argparse
import random
import resource
import secrets
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import redis

from echomq_bench.load.audit import audit
from echomq_bench.measurement.workdist import DistError, parse_dist
from echomq.errors import EchoMQError
from echomq_bench.faults.load import Evidence, Fleet, LoadSettings, read_logs
from echomq_bench.progress import Progress
from echomq_bench.faults.scenarios import (FULL, QUICK, SCENARIOS, Check, Ctx, Injection, Plan, Scenario, active_tokens,
                             members)
from echomq.keys import QueueKeys
from echomq_bench.servers.embedded import redacted_url

__all__ = ["SCENARIOS", "Plan", "QUICK", "FULL", "Outcome", "run_scenario", "format_table", "configure", "run"]


# --------------------------------------------------------------------------
# Running one scenario


@dataclass(frozen=True)
class Outcome:
    server: str
    build: str
    scenario: str
    fault: str
    recovery_means: str = ""
    jobs: int = 0
    completed: int = 0
    faults: int = 0
    lost: int = 0
    double_accepted: int = 0
    refused_expected: int = 0
    refused_unexpected: int = 0
    unanswered: int = 0
    recovery_s: float | None = None
    passed: bool | None = None
    checks: list[Check] = field(default_factory=list)
    audit: dict[str, Any] = field(default_factory=dict)
    server_cpu: float | None = None
    client_cpu: float | None = None
    wall_s: float = 0.0
    skipped: str | None = None
    server_settings: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "checks"}
        out["checks"] = [{"ok": c.ok, "text": c.text} for c in self.checks]
        return out


def _drain(ctx: Ctx, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    k = ctx.keys
    while time.monotonic() < deadline:
        try:
            if ctx.admin.zcard(k.pending) + ctx.admin.zcard(k.active) + ctx.admin.zcard(k.schedule) == 0:
                return
        except redis.RedisError:
            pass
        time.sleep(0.05)


def _cpu(client: redis.Redis) -> tuple[float, str]:
    info = client.info("cpu")
    main = float(info.get("used_cpu_sys_main_thread", info["used_cpu_sys"])) + float(
        info.get("used_cpu_user_main_thread", info["used_cpu_user"]))
    return main, str(client.info("server").get("run_id"))


def run_scenario(spec: Any, scenario: Scenario, plan: Plan, base: LoadSettings, log_root: Path,
                 seed: int, on_server: Callable[[Any], None] = lambda s: None) -> Outcome:
    outcome = Outcome(spec.name, "", scenario.name, scenario.fault, recovery_means=scenario.recovery)
    if scenario.embedded_only and spec.kind != "embedded":
        return replace(outcome, skipped="needs an embedded server (it signals or restarts the server process)")
    if spec.kind == "embedded":
        spec = replace(spec, args=(*spec.args, *scenario.server_args))
    try:
        return _run(outcome, spec, scenario, plan, base, log_root, seed, on_server)
    except (redis.RedisError, EchoMQError, OSError) as exc:
        # One scenario that cannot run (a URL server's user may not CONFIG SET) is a failed line.
        return replace(outcome, passed=False, checks=[
            Check(False, f"the scenario could not run: {type(exc).__name__}: {redacted_url(str(exc))}")])


def _run(outcome: Outcome, spec: Any, scenario: Scenario, plan: Plan, base: LoadSettings, log_root: Path,
         seed: int, on_server: Callable[[Any], None]) -> Outcome:
    from echomq_bench.records.meta import server_settings
    from echomq_bench.servers.embedded import server_version, start

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
        fleet = Fleet(server, name, settings, log_dir, seed)
        ctx = Ctx(server, admin, keys, fleet, plan, random.Random(seed))
        cpu0, run0 = _cpu(admin)
        rusage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall0 = time.monotonic()
        try:
            fleet.start_all()
            time.sleep(plan.warmup_s)
            injection = scenario.inject(ctx)
            time.sleep(plan.after_s)
            fleet.stop_producers()
            _drain(ctx, plan.drain_s + settings.lease_ms / 1000)
        finally:
            fleet.stop()
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
    """The outcome's verdict fields, from the audit and the workers' logs."""
    places = members(ctx.admin, ctx.keys) | injection.data.get("held", set())
    zombies = {(z.jid, z.token) for z in injection.data.get("zombies", ())}
    ledger = ev.ledger(places, zombies)
    report = audit(ctx.admin, [ctx.keys.name], ledger)
    active = active_tokens(ctx.admin, ctx.keys)
    retry_current = [r for r in ev.retry_refused if active.get(r.jid) == r.token]
    checks, recovery = scenario.check(ctx, injection, ev, ledger, report)
    lost_ok = report.lost > 0 if scenario.expects_loss else report.lost == 0
    checks += [
        Check(report.enqueued > 0 and report.completed > 0,
              f"load ran: {report.enqueued} jobs enqueued, {report.completed} completed"),
        Check(lost_ok and report.in_two_places == 0 and report.unknown == 0,
              f"audit: lost {report.lost}, in two places {report.in_two_places}, unknown ids {report.unknown}"
              + (" (a loss is expected and must be reported)" if scenario.expects_loss else "")),
        Check(report.double_accepted == 0 and report.zombie_accepted == 0,
              f"completes accepted twice {report.double_accepted}, zombie completes accepted {report.zombie_accepted}"),
        Check(report.refused_not_superseded == 0 and not retry_current,
              f"{report.refused + len(ev.retry_refused)} completes and retries refused, "
              f"{report.refused_not_superseded + len(retry_current)} of them from the current holder"),
        Check(not ev.errors, f"{len(ev.errors)} unexpected client errors" + (f": {ev.errors[0]}" if ev.errors else "")),
    ]
    refused_unexpected = report.refused_not_superseded + len(retry_current)
    return dict(faults=injection.count, recovery_s=recovery, checks=checks, fault=injection.text,
                jobs=report.enqueued, completed=report.completed, lost=report.lost,
                double_accepted=report.double_accepted, refused_unexpected=refused_unexpected,
                refused_expected=report.refused + len(ev.retry_refused) - refused_unexpected,
                unanswered=ev.unanswered, audit=report.to_dict(), passed=all(c.ok for c in checks))


def _delete_queue(server: Any, keys: QueueKeys) -> None:
    try:
        with server.client() as client:
            pattern = keys.base.replace("{", "\\{").replace("}", "\\}") + "*"
            doomed = list(client.scan_iter(match=pattern, count=1000))
            for i in range(0, len(doomed), 1000):
                client.delete(*doomed[i:i + 1000])
    except redis.RedisError:
        pass


# --------------------------------------------------------------------------
# The command


def _dist(text: str) -> str:
    try:
        parse_dist(text)
    except DistError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"rate must be a number of jobs/s, got {text!r}") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"rate must be from 1 to 10000 jobs/s per producer, got {text}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n", 1)[1].strip() if __doc__ else None
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--quick", action="store_true", help="short runs, fewer faults (CI)")
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS), metavar="NAME",
                        help=f"run only these (repeatable): {', '.join(SCENARIOS)}")
    parser.add_argument("--out", type=Path, metavar="DIR", help="results folder (default results/<utc>-faults)")
    parser.add_argument("--work", type=_dist, default=LoadSettings.work, metavar="DIST",
                        help=f"consumer work time per job (default {LoadSettings.work})")
    parser.add_argument("--rate", type=_rate, default=LoadSettings.rate, metavar="JOBS_S",
                        help=f"enqueue rate per producer (default {LoadSettings.rate:g})")
    parser.add_argument("--seed", type=int, default=1, help="seed for the load and the choice of victims")


def run(args: argparse.Namespace) -> int:
    from echomq_bench.records import meta
    from echomq_bench.records.files import ResultsError, new_run_dir
    from echomq_bench.records.record import Record, write_record

    _preflight(args.server)  # a bad server fails here, before a results folder exists
    try:
        out = new_run_dir("faults", args.out)
    except OSError as exc:
        raise ResultsError(f"cannot make the results folder {args.out or 'under results/'}: {exc.strerror}") from None
    plan = QUICK if args.quick else FULL
    base = replace(LoadSettings(), work=args.work, rate=args.rate)
    names = args.scenario or list(SCENARIOS)
    seen: dict[str, Any] = {}
    outcomes: list[Outcome] = []
    progress = Progress(label="faults")
    for spec in args.server:
        for name in names:
            progress.end(f"{spec.name} {name} ...")
            outcome = run_scenario(spec, SCENARIOS[name], plan, base, out / "logs", args.seed,
                                   on_server=lambda s: seen.setdefault(s.name, meta.describe_server(s)))
            outcomes.append(outcome)
        print(format_table([o for o in outcomes if o.server == spec.name]), flush=True)
    passed = all(o.passed is not False for o in outcomes)
    info = meta.collect(quick=args.quick, scenarios=names, plan=plan.__dict__, load=base.__dict__, seed=args.seed)
    info["servers"] = list(seen.values())
    write_record(out, Record(kind="faults", meta=info, tables={"faults": _tidy(outcomes)},
                             summary={"passed": passed, "quick": args.quick,
                                      "scenarios": [o.to_dict() for o in outcomes]}))
    print(f"{'PASS' if passed else 'FAIL'}: {sum(o.passed is True for o in outcomes)} passed, "
          f"{sum(o.passed is False for o in outcomes)} failed, {sum(o.passed is None for o in outcomes)} skipped"
          f" -> {out}")
    return 0 if passed else 1


def _preflight(specs: list[Any]) -> None:
    from echomq_bench.servers.embedded import ServerSpecError, find_binary, start

    for spec in specs:
        if spec.kind == "cluster":
            raise ServerSpecError(f"faults runs on single servers, not the cluster {spec.describe()!r}; "
                                  "for a cluster's faults use: echomq-bench failover")
        if spec.kind == "embedded":
            find_binary(spec.binary)
        else:
            start(spec)  # PINGs it: unreachable, or a wrong password, is a clear error now


def _tidy(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    rows = []
    for o in outcomes:
        if o.skipped:
            continue
        for metric, value, unit in (("jobs", o.jobs, "jobs"), ("completed", o.completed, "jobs"),
                                    ("faults", o.faults, "faults"), ("lost", o.lost, "jobs"),
                                    ("double_accepted", o.double_accepted, "jobs"),
                                    ("refused_expected", o.refused_expected, "calls"),
                                    ("refused_unexpected", o.refused_unexpected, "calls"),
                                    ("unanswered", o.unanswered, "calls"),
                                    ("recovery", o.recovery_s, "s"), ("server_main_cpu", o.server_cpu, "share"),
                                    ("client_cpu", o.client_cpu, "cores"), ("passed", int(bool(o.passed)), "bool")):
            rows.append({"server": o.server, "build": o.build, "scenario": o.scenario,
                         "metric": metric, "value": value, "unit": unit})
    return rows


def format_table(outcomes: list[Outcome]) -> str:
    if not outcomes:
        return ""
    head = f"== {outcomes[0].server}: {next((o.build for o in outcomes if o.build), '?')} =="
    cols = f"{'scenario':<18} {'jobs':>6} {'faults':>6} {'lost':>5} {'double':>6} {'refused ok':>10} " \
           f"{'recovery':>9}  verdict"
    lines = [head, cols]
    for o in outcomes:
        if o.skipped:
            lines.append(f"{o.scenario:<18} skipped: {o.skipped}")
            continue
        rec = "-" if o.recovery_s is None else f"{o.recovery_s:.2f} s"
        verdict = "PASS" if o.passed else "FAIL"
        if o.passed and o.lost:
            verdict += " (loss detected)"
        lines.append(f"{o.scenario:<18} {o.jobs:>6} {o.faults:>6} {o.lost:>5} {o.double_accepted:>6} "
                     f"{o.refused_expected:>10} {rec:>9}  {verdict}")
    for o in outcomes:
        if o.skipped:
            continue
        lines.append(f"-- {o.scenario}: {o.fault}; recovery = {o.recovery_means}")
        lines.extend(f"   {'ok  ' if c.ok else 'FAIL'} {c.text}" for c in o.checks)
    return "\n".join(lines)
