"""The queue under fire: seven faults, each under a steady load with an audit of every job.

Each scenario starts its own server (an embedded one, from the --server
spec plus the scenario's settings), forks producers, consumers and a pump
(echomq.faultload), lets the load settle, injects its fault, lets the load
run on, stops the producers, lets the consumers drain the queue, and audits
every id minted against the server's sets (echomq.audit):

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
import os
import random
import resource
import secrets
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import redis

from .audit import AuditReport, Ledger, audit
from .dist import DistError, parse_dist
from .faultload import Evidence, Fleet, LoadSettings, Worker, last_event, read_logs
from .errors import EchoMQError
from .keys import QueueKeys
from .servers import redacted_url

__all__ = ["SCENARIOS", "Plan", "QUICK", "FULL", "Outcome", "run_scenario", "configure", "run"]


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


QUICK = Plan(warmup_s=0.8, after_s=1.0, drain_s=5.0, kills=2, zombies=2, flushes=3, flush_gap_s=0.3,
             pause_s=2.0, oom_headroom=1 << 20, oom_refusals=20)
FULL = Plan(warmup_s=3.0, after_s=5.0, drain_s=15.0, kills=4, zombies=4, flushes=10, flush_gap_s=0.5,
            pause_s=2.0, oom_headroom=4 << 20, oom_refusals=200)


@dataclass
class Ctx:
    server: Any
    admin: redis.Redis
    keys: QueueKeys
    fleet: Fleet
    plan: Plan
    rng: random.Random


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
class Check:
    ok: bool
    text: str


@dataclass(frozen=True)
class Scenario:
    name: str
    fault: str
    inject: Callable[[Ctx], Injection]
    check: Callable[[Ctx, Injection, Evidence, Ledger, AuditReport], tuple[list[Check], float | None]]
    server_args: tuple[str, ...] = ()
    load: dict[str, Any] = field(default_factory=dict)
    embedded_only: bool = False
    expects_loss: bool = False


# --------------------------------------------------------------------------
# Helpers the scenarios share


def _stopped(pid: int, timeout: float = 0.5) -> bool:
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


def _hold_lease(ctx: Ctx, fail: bool | None = None, exclude: tuple[int, ...] = (),
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
        if _stopped(worker.pid):
            last = last_event(worker.path)
            if (last and last[0] == "C" and int(last[2]) < ctx.fleet.settings.max_attempts
                    and (fail is None or (last[3] == "1") == fail)):
                return worker, Lease(worker.label, last[1], int(last[2]), last[3] == "1", time.monotonic())
        os.kill(worker.pid, signal.SIGCONT)
        time.sleep(0.003)
    return None


def _members(client: redis.Redis, keys: QueueKeys) -> set[str]:
    out: set[str] = set()
    for key in (keys.pending, keys.active, keys.schedule, keys.dead):
        out |= {m.decode() for m in client.zrange(key, 0, -1)}
    return out


def _errorstat(client: redis.Redis, code: str) -> int:
    stats = client.info("errorstats")
    return int(stats.get(f"errorstat_{code}", {}).get("count", 0))


def _active_tokens(client: redis.Redis, keys: QueueKeys) -> dict[str, int]:
    ids = [m.decode() for m in client.zrange(keys.active, 0, -1)]
    pipe = client.pipeline(transaction=False)
    for jid in ids:
        pipe.hget(keys.job(jid), "attempts")
    return {jid: int(a) for jid, a in zip(ids, pipe.execute()) if a is not None}


def _freeze(ctx: Ctx, workers: list[Worker]) -> None:
    ctx.fleet.signal(workers, signal.SIGSTOP)
    for w in workers:
        _stopped(w.pid)


def _since(t0: float, t: float | None) -> float | None:
    return None if t is None else t - t0


# --------------------------------------------------------------------------
# The scenarios: inject, then check


def crash(ctx: Ctx) -> Injection:
    killed: list[Lease] = []
    for _ in range(ctx.plan.kills):
        held = _hold_lease(ctx)
        if held is None:
            break
        worker, lease = held
        os.kill(worker.pid, signal.SIGKILL)
        killed.append(lease)
        worker.process.join()
        ctx.fleet.start("consumer")  # a supervisor would replace it
    return Injection(len(killed), f"{len(killed)} consumers SIGKILLed mid-lease", {"killed": killed})


def check_crash(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                report: AuditReport) -> tuple[list[Check], float | None]:
    killed: list[Lease] = inj.data["killed"]
    once = [k for k in killed if ledger.accepted[k.jid] == 1 and ledger.accepted_token[k.jid] > k.token]
    releases = [k for k in killed if ev.claimed.get(k.jid, 0) > k.token]
    done = [t for k in killed for j, tok, t, _ in ev.accepted if j == k.jid and tok > k.token]
    recovery = max(done) - min(k.t for k in killed) if killed and len(done) == len(killed) else None
    return [
        Check(len(killed) == ctx.plan.kills, f"{len(killed)}/{ctx.plan.kills} consumers killed while holding a lease"),
        Check(len(releases) == len(killed), f"{len(releases)}/{len(killed)} of their jobs reaped and leased again"),
        Check(len(once) == len(killed), f"{len(once)}/{len(killed)} completed exactly once, by a later holder"),
    ], recovery


def zombie(ctx: Ctx) -> Injection:
    held: list[tuple[Worker, Lease]] = []
    superseded: set[str] = set()
    try:
        for i in range(ctx.plan.zombies):
            got = _hold_lease(ctx, fail=bool(i % 2), exclude=tuple(w.pid for w, _ in held), timeout=15.0)
            if got is not None:
                held.append(got)
        # Past the lease: wait until each job was reaped and leased again (or done).
        deadline = time.monotonic() + ctx.fleet.settings.lease_ms / 1000 + 10
        while len(superseded) < len(held) and time.monotonic() < deadline:
            superseded |= {z.jid for _, z in held if _moved_past(ctx, z)}
            time.sleep(0.02)
    finally:
        ctx.fleet.signal([w for w, _ in held], signal.SIGCONT)
    # Wait for each zombie to send its answer and hear back.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all(_answered(w.path, z) for w, z in held):
        time.sleep(0.02)
    return Injection(len(held), f"{len(held)} consumers SIGSTOPped past their lease, then resumed",
                     {"zombies": [z for _, z in held], "superseded": superseded})


def _moved_past(ctx: Ctx, lease: Lease) -> bool:
    """The job was completed (row gone) or claimed again since this lease."""
    attempts = ctx.admin.hget(ctx.keys.job(lease.jid), "attempts")
    return attempts is None or int(attempts) > lease.token


def _answered(path: Path, lease: Lease) -> bool:
    try:
        lines = path.read_text().split("\n")
    except OSError:
        return False
    return any(line.split(" ")[:3] == [word, lease.jid, str(lease.token)] for line in lines for word in "ARQYNW")


def check_zombie(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                 report: AuditReport) -> tuple[list[Check], float | None]:
    zombies: list[Lease] = inj.data["zombies"]
    refused = {(j, tok, w) for j, tok, _, w in ev.refused + ev.retry_refused}
    accepted = {(j, tok, w) for j, tok, _, w in ev.accepted + ev.retried}
    as_retry = [z for z in zombies if z.fail]
    refused_ok = [z for z in zombies if (z.jid, z.token, z.worker) in refused]
    wrongly = [z for z in zombies if (z.jid, z.token, z.worker) in accepted]
    stands = [z for z in zombies if ledger.accepted_token.get(z.jid, 0) > z.token or _moved_past(ctx, z)]
    done = [t for z in zombies for j, tok, t, _ in ev.accepted if j == z.jid and tok > z.token]
    recovery = max(done) - min(z.t for z in zombies) if zombies and len(done) == len(zombies) else None
    return [
        Check(len(zombies) == ctx.plan.zombies and 0 < len(as_retry) < len(zombies),
              f"{len(zombies)}/{ctx.plan.zombies} zombies made ({len(zombies) - len(as_retry)} to complete, "
              f"{len(as_retry)} to retry)"),
        Check(len(inj.data["superseded"]) == len(zombies), f"{len(inj.data['superseded'])}/{len(zombies)} of their "
              "jobs taken over by a new holder while they slept"),
        Check(len(refused_ok) == len(zombies) and not wrongly,
              f"{len(refused_ok)}/{len(zombies)} zombie answers refused (EMQSTALE), {len(wrongly)} accepted"),
        Check(len(stands) == len(zombies), f"{len(stands)}/{len(zombies)} new holders' results stand"),
    ], recovery


def pause(ctx: Ctx) -> Injection:
    pid = ctx.server.pid
    t_stop = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(ctx.plan.pause_s)
    finally:
        os.kill(pid, signal.SIGCONT)
    return Injection(1, f"server SIGSTOPped {ctx.plan.pause_s:g} s", {"t_stop": t_stop, "t_resume": time.monotonic()})


def check_pause(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                report: AuditReport) -> tuple[list[Check], float | None]:
    t = inj.data["t_resume"]
    after = [a for a in ev.accepted if a[2] >= t]
    return [
        Check(ev.unanswered > 0, f"{ev.unanswered} client calls timed out during the pause"),
        Check(len(after) > 0, f"{len(after)} completes accepted after the server resumed"),
    ], _since(t, ev.first_after("A", t))


def restart_aof(ctx: Ctx) -> Injection:
    t = time.monotonic()
    os.kill(ctx.server.pid, signal.SIGKILL)
    ctx.server.restart()
    return Injection(1, "server SIGKILLed, restarted from its AOF", {"t_kill": t, "t_up": time.monotonic()})


def check_restart(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                  report: AuditReport) -> tuple[list[Check], float | None]:
    t = inj.data["t_kill"]
    after = [a for a in ev.accepted if a[2] >= inj.data["t_up"]]
    noscript = _errorstat(ctx.admin, "NOSCRIPT")
    return [
        Check(noscript > 0 and not ev.errors, f"{noscript} NOSCRIPT replies after the restart, all reloaded"
              " by the client without an error"),
        Check(len(after) > 0, f"{len(after)} completes accepted after the restart"),
    ], _since(t, ev.first_after("A", t))


def restart_nopersist(ctx: Ctx) -> Injection:
    # Freeze the clients so the set of jobs that dies with the server is known
    # exactly: consumers first, so some pending work builds up to be lost.
    consumers = ctx.fleet.alive("consumer")
    others = ctx.fleet.alive("producer") + ctx.fleet.alive("pump")
    _freeze(ctx, consumers)
    try:
        time.sleep(0.3)
        _freeze(ctx, others)
        held = _settled_members(ctx)
        t = time.monotonic()
        os.kill(ctx.server.pid, signal.SIGKILL)
        ctx.server.restart()
        t_up = time.monotonic()
    finally:
        ctx.fleet.signal(consumers + others, signal.SIGCONT)
    return Injection(1, "server SIGKILLed, restarted with nothing on disk",
                     {"held": held, "t_kill": t, "t_up": t_up})


def _settled_members(ctx: Ctx) -> set[str]:
    """The queue's ids once two reads 50 ms apart agree: a frozen client may
    still have one request on its way, which the server serves first."""
    held = _members(ctx.admin, ctx.keys)
    for _ in range(100):
        time.sleep(0.05)
        again = _members(ctx.admin, ctx.keys)
        if again == held:
            break
        held = again
    return held


def check_nopersist(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                    report: AuditReport) -> tuple[list[Check], float | None]:
    expected = inj.data["held"] & ledger.enqueued
    completed = {j for j, n in ledger.accepted.items() if n}
    lost = ledger.enqueued - completed - _members(ctx.admin, ctx.keys)
    checks, recovery = check_restart(ctx, inj, ev, ledger, report)
    return [
        Check(len(expected) > 0, f"{len(expected)} jobs were on the server when it died"),
        Check(report.lost == len(expected) and lost == expected,
              f"the audit reports {report.lost} lost: exactly those jobs"),
        *checks,
    ], recovery


def script_flush(ctx: Ctx) -> Injection:
    times = []
    for _ in range(ctx.plan.flushes):
        time.sleep(ctx.plan.flush_gap_s)
        times.append(time.monotonic())
        ctx.admin.script_flush()
    return Injection(len(times), f"SCRIPT FLUSH x{len(times)}", {"times": times})


def check_flush(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                report: AuditReport) -> tuple[list[Check], float | None]:
    noscript = _errorstat(ctx.admin, "NOSCRIPT")
    gaps = [_since(t, ev.first_after("A", t)) for t in inj.data["times"]]
    return [
        Check(noscript >= len(inj.data["times"]) and not ev.errors,
              f"{noscript} NOSCRIPT replies, all reloaded by the client without an error"),
    ], None if None in gaps else max(gaps)  # type: ignore[type-var]


def oom(ctx: Ctx) -> Injection:
    admin, plan = ctx.admin, ctx.plan
    saved = admin.config_get("maxmemory")["maxmemory"], admin.config_get("maxmemory-policy")["maxmemory-policy"]
    consumers = ctx.fleet.alive("consumer")
    producers = ctx.fleet.alive("producer")
    _freeze(ctx, consumers)  # hold the consumers back so pending work fills the memory
    try:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", int(admin.info("memory")["used_memory"]) + plan.oom_headroom)
        deadline = time.monotonic() + 20
        refused: list[str] = []
        while time.monotonic() < deadline and len(refused) < plan.oom_refusals:
            time.sleep(0.05)
            refused = [jid for w in producers for jid in _oom_ids(w.path)]
        pipe = admin.pipeline(transaction=False)
        for jid in refused:
            pipe.exists(ctx.keys.job(jid))
            pipe.zscore(ctx.keys.pending, jid)
        answers = pipe.execute()
        half = [jid for jid, row, score in zip(refused, answers[::2], answers[1::2]) if row or score is not None]
        t_free = time.monotonic()
        ctx.fleet.signal(consumers, signal.SIGCONT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and read_logs(w.path for w in producers).first_after("E", t_free) is None:
            time.sleep(0.02)
    finally:
        ctx.fleet.signal(consumers, signal.SIGCONT)
        admin.config_set("maxmemory", saved[0])
        admin.config_set("maxmemory-policy", saved[1])
    return Injection(1, f"maxmemory = in use + {plan.oom_headroom >> 10} KiB, noeviction",
                     {"refused_seen": len(refused), "half": half, "t_free": t_free})


def _oom_ids(path: Path) -> list[str]:
    try:
        return [line.split(" ")[1] for line in path.read_text().split("\n") if line.startswith("O ")]
    except OSError:
        return []


def check_oom(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
              report: AuditReport) -> tuple[list[Check], float | None]:
    t = inj.data["t_free"]
    refused = len(ev.oom_refused)
    return [
        Check(inj.data["refused_seen"] >= ctx.plan.oom_refusals,
              f"{refused} enqueues refused with OutOfMemoryError (OOM) while memory was full"),
        Check(not inj.data["half"], f"{len(inj.data['half'])} half-written rows or pending entries of refused ids"),
        Check(ev.first_after("E", t) is not None, "enqueue accepted again once consumers freed memory"),
    ], _since(t, ev.first_after("E", t))


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    # No simulated failures here: a killed job must end completed, exactly once.
    Scenario("crash", "consumers SIGKILLed mid-lease", crash, check_crash, load={"fail_rate": 0.0}),
    Scenario("zombie", "consumers SIGSTOPped past their lease, resumed", zombie, check_zombie,
             load={"fail_rate": 0.3}),
    Scenario("pause", "server SIGSTOPped 2 s", pause, check_pause, embedded_only=True),
    Scenario("restart-aof", "server killed, restarted from AOF (fsync always)", restart_aof, check_restart,
             server_args=("--appendonly", "yes", "--appendfsync", "always"), embedded_only=True),
    Scenario("restart-nopersist", "server killed, restarted with nothing on disk", restart_nopersist,
             check_nopersist, server_args=("--appendonly", "no", "--save", ""), embedded_only=True,
             expects_loss=True),
    Scenario("script-flush", "SCRIPT FLUSH mid-run", script_flush, check_flush),
    Scenario("oom", "maxmemory with noeviction", oom, check_oom, load={"payload_bytes": 4096, "lease_ms": 30_000}),
)}


# --------------------------------------------------------------------------
# Running one scenario


@dataclass
class Outcome:
    server: str
    build: str
    scenario: str
    fault: str
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
    outcome = Outcome(spec.name, "", scenario.name, scenario.fault)
    if scenario.embedded_only and spec.kind != "embedded":
        outcome.skipped = "needs an embedded server (it signals or restarts the server process)"
        return outcome
    if spec.kind == "embedded":
        spec = replace(spec, args=(*spec.args, *scenario.server_args))
    try:
        return _run(outcome, spec, scenario, plan, base, log_root, seed, on_server)
    except (redis.RedisError, EchoMQError, OSError) as exc:
        # One scenario that cannot run (a URL server's user may not CONFIG SET) is a failed line.
        outcome.passed = False
        outcome.checks = [Check(False, f"the scenario could not run: {type(exc).__name__}: {redacted_url(str(exc))}")]
        return outcome


def _run(outcome: Outcome, spec: Any, scenario: Scenario, plan: Plan, base: LoadSettings, log_root: Path,
         seed: int, on_server: Callable[[Any], None]) -> Outcome:
    from .meta import server_settings
    from .servers import server_version, start

    server = start(spec)
    name = f"faults-{scenario.name}-{secrets.token_hex(3)}"
    keys = QueueKeys(name)
    try:
        admin = server.client(socket_timeout=10)
        outcome.build = server_version(admin)
        outcome.server_settings = server_settings(admin)
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
        outcome.wall_s = time.monotonic() - wall0
        cpu1, run1 = _cpu(admin)
        rusage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if run1 == run0:  # the same server process throughout: its counters are comparable
            outcome.server_cpu = (cpu1 - cpu0) / outcome.wall_s
        children_cpu = rusage1.ru_utime + rusage1.ru_stime - rusage0.ru_utime - rusage0.ru_stime
        outcome.client_cpu = children_cpu / outcome.wall_s
        _judge(outcome, scenario, ctx, injection, read_logs(fleet.paths()))
    finally:
        if spec.kind != "embedded":
            _delete_queue(server, keys)
        server.stop()
    return outcome


def _judge(outcome: Outcome, scenario: Scenario, ctx: Ctx, injection: Injection, ev: Evidence) -> None:
    places = _members(ctx.admin, ctx.keys) | injection.data.get("held", set())
    zombies = {(z.jid, z.token) for z in injection.data.get("zombies", ())}
    ledger = ev.ledger(places, zombies)
    report = audit(ctx.admin, [ctx.keys.name], ledger)
    active = _active_tokens(ctx.admin, ctx.keys)
    retry_current = [r for r in ev.retry_refused if active.get(r[0]) == r[1]]
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
    outcome.faults, outcome.recovery_s, outcome.checks = injection.count, recovery, checks
    outcome.fault = injection.text
    outcome.jobs, outcome.completed, outcome.lost = report.enqueued, report.completed, report.lost
    outcome.double_accepted = report.double_accepted
    outcome.refused_unexpected = report.refused_not_superseded + len(retry_current)
    outcome.refused_expected = report.refused + len(ev.retry_refused) - outcome.refused_unexpected
    outcome.unanswered = ev.unanswered
    outcome.audit = report.to_dict()
    outcome.passed = all(c.ok for c in checks)


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
    parser.description = __doc__.split("\n\n")[1] if __doc__ else None
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
    from . import meta
    from .results import ResultsError, new_run_dir, write_json, write_tidy

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
    for spec in args.server:
        for name in names:
            print(f"faults: {spec.name} {name} ...", file=sys.stderr, flush=True)
            outcome = run_scenario(spec, SCENARIOS[name], plan, base, out / "logs", args.seed,
                                   on_server=lambda s: seen.setdefault(s.name, meta.describe_server(s)))
            outcomes.append(outcome)
        print(format_table([o for o in outcomes if o.server == spec.name]), flush=True)
    passed = all(o.passed is not False for o in outcomes)
    info = meta.collect(quick=args.quick, scenarios=names, plan=plan.__dict__, load=base.__dict__, seed=args.seed)
    info["servers"] = list(seen.values())
    write_json(out / "meta.json", info)
    write_json(out / "summary.json", {"passed": passed, "quick": args.quick,
                                      "scenarios": [o.to_dict() for o in outcomes]})
    write_tidy(out / "faults.csv", _tidy(outcomes))
    print(f"{'PASS' if passed else 'FAIL'}: {sum(o.passed is True for o in outcomes)} passed, "
          f"{sum(o.passed is False for o in outcomes)} failed, {sum(o.passed is None for o in outcomes)} skipped"
          f" -> {out}")
    return 0 if passed else 1


def _preflight(specs: list[Any]) -> None:
    from .servers import find_binary, start

    for spec in specs:
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
        lines.append(f"-- {o.scenario}: {o.fault}")
        lines.extend(f"   {'ok  ' if c.ok else 'FAIL'} {c.text}" for c in o.checks)
    return "\n".join(lines)
