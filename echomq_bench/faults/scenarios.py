"""The faults of `echomq-bench faults`: seven process faults here and the
network ones of `echomq_bench.faults.netscenarios`; for each, how it is injected
into a running load and what must then hold.

A scenario is a pair of functions: `inject(ctx) -> Injection` acts on the
server or the worker processes while the load runs; `check(...)` reads the
workers' evidence, the merged ledger and the audit afterwards and returns
its own checks and the recovery time. The runner (echomq_bench.faults.runner) adds the
audit's checks common to all.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import redis

from echomq_bench.faults.base import (FULL, QUICK, Ctx, Injection, Lease, Plan, Scenario, active_tokens,
                                      errorstat, freeze, hold_lease, members, since)
from echomq_bench.faults.load import Evidence, Worker, read_logs
from echomq_bench.faults.netscenarios import NET_SCENARIOS
from echomq_bench.load.audit import AuditReport, Ledger
from echomq_bench.records.kinds.faults import CheckEntry
from echomq_bench.servers import EmbeddedServer, ServerError

__all__ = ["Plan", "QUICK", "FULL", "Ctx", "Injection", "Lease", "Scenario", "SCENARIOS",
           "members", "active_tokens"]


# --------------------------------------------------------------------------
# The scenarios: inject, then check


def crash(ctx: Ctx) -> Injection:
    killed: list[Lease] = []
    for _ in range(ctx.plan.kills):
        held = hold_lease(ctx)
        if held is None:
            break
        worker, lease = held
        os.kill(worker.pid, signal.SIGKILL)
        killed.append(lease)
        worker.process.join()
        ctx.fleet.start("consumer")  # a supervisor would replace it
    return Injection(len(killed), f"{len(killed)} consumers SIGKILLed mid-lease", {"killed": killed})


def check_crash(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                report: AuditReport) -> tuple[list[CheckEntry], float | None]:
    killed: list[Lease] = inj.data["killed"]
    once = [k for k in killed if ledger.accepted[k.jid] == 1 and ledger.accepted_token[k.jid] > k.token]
    releases = [k for k in killed if ev.claimed.get(k.jid, 0) > k.token]
    done = [a.t for k in killed for a in ev.accepted if a.jid == k.jid and a.token > k.token]
    recovery = max(done) - min(k.t for k in killed) if killed and len(done) == len(killed) else None
    return [
        CheckEntry(len(killed) == ctx.plan.kills,
                   f"{len(killed)}/{ctx.plan.kills} consumers killed while holding a lease"),
        CheckEntry(len(releases) == len(killed),
                   f"{len(releases)}/{len(killed)} of their jobs reaped and leased again"),
        CheckEntry(len(once) == len(killed), f"{len(once)}/{len(killed)} completed exactly once, by a later holder"),
    ], recovery


def zombie(ctx: Ctx) -> Injection:
    held: list[tuple[Worker, Lease]] = []
    superseded: dict[str, float] = {}  # job -> when a new holder had it
    try:
        for i in range(ctx.plan.zombies):
            got = hold_lease(ctx, fail=bool(i % 2), exclude=tuple(w.pid for w, _ in held), timeout=15.0)
            if got is not None:
                held.append(got)
        # Past the lease: wait until each job was reaped and leased again (or done).
        deadline = time.monotonic() + ctx.fleet.settings.lease_ms / 1000 + 10
        while len(superseded) < len(held) and time.monotonic() < deadline:
            superseded.update({z.jid: time.monotonic() for _, z in held
                               if z.jid not in superseded and _moved_past(ctx, z)})
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
                 report: AuditReport) -> tuple[list[CheckEntry], float | None]:
    zombies: list[Lease] = inj.data["zombies"]
    refused = {(a.jid, a.token, a.worker) for a in ev.refused + ev.retry_refused}
    accepted = {(a.jid, a.token, a.worker) for a in ev.accepted + ev.retried}
    as_retry = [z for z in zombies if z.fail]
    refused_ok = [z for z in zombies if (z.jid, z.token, z.worker) in refused]
    wrongly = [z for z in zombies if (z.jid, z.token, z.worker) in accepted]
    stands = [z for z in zombies if ledger.accepted_token.get(z.jid, 0) > z.token or _moved_past(ctx, z)]
    taken = inj.data["superseded"]
    recovery = max(taken[z.jid] - z.t for z in zombies) if zombies and len(taken) == len(zombies) else None
    return [
        CheckEntry(len(zombies) == ctx.plan.zombies and 0 < len(as_retry) < len(zombies),
                   f"{len(zombies)}/{ctx.plan.zombies} zombies made ({len(zombies) - len(as_retry)} to complete, "
                   f"{len(as_retry)} to retry)"),
        CheckEntry(len(inj.data["superseded"]) == len(zombies),
                   f"{len(inj.data['superseded'])}/{len(zombies)} of their "
                   "jobs taken over by a new holder while they slept"),
        CheckEntry(len(refused_ok) == len(zombies) and not wrongly,
                   f"{len(refused_ok)}/{len(zombies)} zombie answers refused (EMQSTALE), {len(wrongly)} accepted"),
        CheckEntry(len(stands) == len(zombies), f"{len(stands)}/{len(zombies)} new holders' results stand"),
    ], recovery


def _process(ctx: Ctx) -> tuple[EmbeddedServer, int]:
    """The server process and its pid, for the scenarios that signal or restart it (embedded-only)."""
    server = ctx.server
    if not isinstance(server, EmbeddedServer) or server.pid is None:
        raise TypeError(f"{server.name}: this scenario needs a running embedded server")
    return server, server.pid


def pause(ctx: Ctx) -> Injection:
    _, pid = _process(ctx)
    t_stop = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(ctx.plan.pause_s)
    finally:
        os.kill(pid, signal.SIGCONT)
    return Injection(1, f"server SIGSTOPped {ctx.plan.pause_s:g} s", {"t_stop": t_stop, "t_resume": time.monotonic()})


def check_pause(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                report: AuditReport) -> tuple[list[CheckEntry], float | None]:
    t = inj.data["t_resume"]
    after = [a for a in ev.accepted if a.t >= t]
    return [
        CheckEntry(ev.unanswered > 0, f"{ev.unanswered} client calls timed out during the pause"),
        CheckEntry(len(after) > 0, f"{len(after)} completes accepted after the server resumed"),
    ], since(t, ev.first_after("A", t))


def restart_aof(ctx: Ctx) -> Injection:
    server, pid = _process(ctx)
    t = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    server.restart()
    return Injection(1, "server SIGKILLed, restarted from its AOF", {"t_kill": t, "t_up": time.monotonic()})


def check_restart(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                  report: AuditReport, persisted: bool = True) -> tuple[list[CheckEntry], float | None]:
    t_up = inj.data["t_up"]
    after = [a for a in ev.accepted if a.sent >= t_up]
    noscript = errorstat(ctx.admin, "NOSCRIPT")
    if persisted and scripts_persist(ctx.admin):
        # Redis before 7.0 kept its script cache in the persisted state, so the
        # restarted server already knows every script: no reload is needed.
        scripts = CheckEntry(noscript == 0 and not ev.errors, f"{noscript} NOSCRIPT replies after the restart: this "
                             "build restores its scripts from its AOF (Redis before 7.0), and every call went through")
    else:
        scripts = CheckEntry(noscript > 0 and not ev.errors, f"{noscript} NOSCRIPT replies after the restart, all "
                             "reloaded by the client without an error")
    return [scripts, CheckEntry(len(after) > 0, f"{len(after)} completes accepted by the restarted server")], \
        since(inj.data["t_kill"], ev.first_sent_after(t_up))


def scripts_persist(admin: redis.Redis) -> bool:
    """Whether the server restores loaded scripts across a restart: Redis 7.0
    made the script cache volatile; Redis 6.2 persisted it (Valkey forked 7.2)."""
    info = admin.info("server")
    if info.get("valkey_version"):
        return False
    major = str(info.get("redis_version", "7")).split(".")[0]
    return major.isdigit() and int(major) < 7


def restart_nopersist(ctx: Ctx) -> Injection:
    # Freeze the clients so the set of jobs that dies with the server is known
    # exactly: consumers first, so some pending work builds up to be lost.
    consumers = ctx.fleet.alive("consumer")
    others = ctx.fleet.alive("producer") + ctx.fleet.alive("pump")
    freeze(ctx, consumers)
    try:
        time.sleep(0.3)
        freeze(ctx, others)
        held = _settledmembers(ctx)
        server, pid = _process(ctx)
        t = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        server.restart()
        t_up = time.monotonic()
    finally:
        ctx.fleet.signal(consumers + others, signal.SIGCONT)
    return Injection(1, "server SIGKILLed, restarted with nothing on disk",
                     {"held": held, "t_kill": t, "t_up": t_up})


def _settledmembers(ctx: Ctx) -> set[str]:
    """The queue's ids once two reads 50 ms apart agree: a frozen client may
    still have one request on its way, which the server serves first."""
    held = members(ctx.admin, ctx.keys)
    for _ in range(100):
        time.sleep(0.05)
        again = members(ctx.admin, ctx.keys)
        if again == held:
            break
        held = again
    return held


def check_nopersist(ctx: Ctx, inj: Injection, ev: Evidence, ledger: Ledger,
                    report: AuditReport) -> tuple[list[CheckEntry], float | None]:
    expected = inj.data["held"] & ledger.enqueued
    completed = {j for j, n in ledger.accepted.items() if n}
    lost = ledger.enqueued - completed - members(ctx.admin, ctx.keys)
    # Nothing persisted, so no build has its scripts back: NOSCRIPT on every one.
    checks, recovery = check_restart(ctx, inj, ev, ledger, report, persisted=False)
    return [
        CheckEntry(len(expected) > 0, f"{len(expected)} jobs were on the server when it died"),
        CheckEntry(report.lost == len(expected) and lost == expected,
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
                report: AuditReport) -> tuple[list[CheckEntry], float | None]:
    noscript = errorstat(ctx.admin, "NOSCRIPT")
    gaps = [since(t, ev.first_sent_after(t)) for t in inj.data["times"]]
    known = [g for g in gaps if g is not None]
    return [
        CheckEntry(noscript >= len(inj.data["times"]) and not ev.errors,
                   f"{noscript} NOSCRIPT replies, all reloaded by the client without an error"),
    ], max(known) if len(known) == len(gaps) else None


def _config(admin: redis.Redis, name: str) -> str:
    value = admin.config_get(name).get(name)
    if value is None:
        raise ServerError(f"the server has no {name} setting")
    return value


def oom(ctx: Ctx) -> Injection:
    admin, plan = ctx.admin, ctx.plan
    saved = _config(admin, "maxmemory"), _config(admin, "maxmemory-policy")
    consumers = ctx.fleet.alive("consumer")
    producers = ctx.fleet.alive("producer")
    freeze(ctx, consumers)  # hold the consumers back so pending work fills the memory
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
              report: AuditReport) -> tuple[list[CheckEntry], float | None]:
    t = inj.data["t_free"]
    refused = len(ev.oom_refused)
    return [
        CheckEntry(inj.data["refused_seen"] >= ctx.plan.oom_refusals,
                   f"{refused} enqueues refused with OutOfMemoryError (OOM) while memory was full"),
        CheckEntry(not inj.data["half"],
                   f"{len(inj.data['half'])} half-written rows or pending entries of refused ids"),
        CheckEntry(ev.first_after("E", t) is not None, "enqueue accepted again once consumers freed memory"),
    ], since(t, ev.first_after("E", t))


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    # No simulated failures here: a killed job must end completed, exactly once.
    Scenario("crash", "consumers SIGKILLed mid-lease", "kill to the last killed job completed by its next holder",
             crash, check_crash, load={"fail_rate": 0.0}),
    # More consumers than zombies, so that someone is awake to take their jobs over.
    Scenario("zombie", "consumers SIGSTOPped past their lease, resumed", "stop to the last zombie's job leased again",
             zombie, check_zombie, load={"fail_rate": 0.3, "consumers": 6}),
    Scenario("pause", "server SIGSTOPped 2 s", "SIGCONT to the first complete accepted", pause, check_pause,
             embedded_only=True),
    Scenario("restart-aof", "server killed, restarted from AOF (fsync always)",
             "kill to the first complete the restarted server accepted", restart_aof, check_restart,
             server_args=("--appendonly", "yes", "--appendfsync", "always"), embedded_only=True),
    Scenario("restart-nopersist", "server killed, restarted with nothing on disk",
             "kill to the first complete the restarted server accepted", restart_nopersist, check_nopersist,
             server_args=("--appendonly", "no", "--save", ""), embedded_only=True, expects_loss=True),
    Scenario("script-flush", "SCRIPT FLUSH mid-run", "flush to the first complete sent after it accepted (worst flush)",
             script_flush, check_flush),
    Scenario("oom", "maxmemory with noeviction", "consumers resumed to the first enqueue accepted",
             oom, check_oom, load={"payload_bytes": 4096, "lease_ms": 30_000}),
    *NET_SCENARIOS.values(),
)}
