"""The empirical lease sweep: every lease at once, each on its own queue.

One process per lease (so no lease waits on another's GIL), each with

    consumers   threads that claim with the lease, draw a work time and sleep
                it, then complete; with probability crash_rate they instead
                "crash": sleep a uniform fraction of the work, abandon the
                job and never touch it again (and, like a restarted worker,
                go on to the next job)
    a producer  that keeps a backlog in pending, so consumers never idle
    a pump      that calls reap(cap) once every reap interval, at a random
                phase, on a fixed schedule

All leases run side by side on one server over the same window, so they
share the machine's noise instead of each meeting a different moment of it.
Attempts claimed inside the window are counted; the run goes on after the
window until each counted attempt is resolved (completed, refused, or its
crashed job claimed again), up to a hard cap after which the rest are
reported as censored.

Durations are nominal (what the user's system sees) and run at
1/time_scale of that: a time scale of 60 runs leases of minutes as leases of
seconds. Everything measured is scaled back before it is reported. The
overheads of the client (round trips, sleep overshoot) are not scaled, so
a large time scale magnifies them; the model takes the measured overhead
as an input, which keeps the comparison fair at any scale.

After the sweep, alone on the server, the runner measures what one reap
call costs the server (commandstats, empty and full calls) and drains a mass
crash of K jobs against the cap.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import time
from typing import Any

import redis

from echomq import EchoMQError
from echomq_bench.errors import BenchError, MeasurementError
from echomq_bench.measurement.latency import Latency
from echomq_bench.servers import redacted_url
from echomq_bench.measurement.serverstats import sample, usage
from echomq_bench.lease.calibrate import mass_crash, reap_cost
from echomq_bench.load.bulk import delete_keys, drop_queue
from echomq_bench.load.harness import Harness
from echomq_bench.lease.records import LeaseData, MassCrash, ReapCost, SweepData
from echomq_bench.lease.settings import DEFAULT_WORK, SettingsError, SweepSettings, auto_leases
from echomq_bench.lease.worker import PROGRESS_FIELDS, connect_spec, lease_worker
from echomq_bench.progress import ProgressFn, silent

__all__ = [
    "DEFAULT_WORK",
    "SweepSettings",
    "SettingsError",
    "SweepError",
    "LeaseData",
    "MassCrash",
    "ReapCost",
    "SweepData",
    "auto_leases",
    "collect",
    "work_latency",
]

READY_TIMEOUT_S = 120.0
JOIN_S = 10.0     # for the lease processes to exit once they have reported
REPORT_S = 30.0   # past the window's end and its tail's cap, for them to report
TICK_S = 0.1      # how often the progress line (and the window's end) is looked at


# --------------------------------------------------------------------------
# The orchestrator


class SweepError(MeasurementError):
    """The sweep could not finish: a lease process or the server failed.
    The message says which; nothing half-measured is returned."""


def collect(server: Any, settings: SweepSettings, progress: ProgressFn | None = None,
            leases_ms: tuple[float, ...] | None = None) -> SweepData:
    """Run the sweep on `server` and return its raw data (see `run_sweep`
    for the analysed result); SweepError when it cannot finish."""
    settings.check()
    try:
        return _collect(server, settings, progress, leases_ms)
    except SweepError:
        raise
    except (redis.RedisError, EchoMQError, BenchError) as exc:
        raise SweepError(f"the sweep on {server.name} failed: {redacted_url(str(exc))}") from exc


def _collect(server: Any, settings: SweepSettings, progress: ProgressFn | None,
             leases_ms: tuple[float, ...] | None) -> SweepData:
    leases = tuple(leases_ms or settings.leases_ms or auto_leases(settings.dist(), settings.budget))
    tag = secrets.token_hex(3)
    spec = connect_spec(server)
    client = server.client()
    version = server.version()
    progress = progress or silent
    wall0 = time.perf_counter()
    progress(f"starting {len(leases)} lease processes x {settings.consumers} consumers")
    try:
        with Harness(error=SweepError, grace_s=JOIN_S) as harness:
            counters = harness.ctx.Array("d", PROGRESS_FIELDS * len(leases), lock=False)
            for i, lease in enumerate(leases):
                harness.fork(f"lease process {lease:g} ms", lease_worker, spec, i, settings, lease, counters, tag)
            harness.ready(READY_TIMEOUT_S)
            window = _window(settings, leases)
            harness.go(window)
            time.sleep(max(0.0, window[0] - time.perf_counter()))
            lease_data, use = _gather(harness, client, leases, counters, window, progress)
        cost = mass = None
        if settings.mass_crash > 0 and settings.mass_crash_reps > 0:
            progress(f"measuring reap cost, then {settings.mass_crash_reps} mass crash(es) of {settings.mass_crash} "
                     "jobs")
            cost = reap_cost(client, settings, tag)
            # The drain after the deadline does not depend on the lease; a short
            # one (half a reap interval) keeps the wait before it short.
            mass = mass_crash(client, settings, settings.reap_every_ms / 2, tag, random.Random(settings.seed))
    except BaseException:
        # A sweep that fails leaves no queue either: on a server reached by URL
        # it would stay among someone's own keys. A server that cannot be
        # reached to clean up keeps the error that says why.
        with contextlib.suppress(redis.RedisError, OSError):
            delete_keys(client, list(client.scan_iter(match=f"emq:{{lease-{tag}-*", count=1000)))
        raise
    for i in range(len(leases)):
        drop_queue(client, f"lease-{tag}-{i}", sweep=True)
    return SweepData(
        settings=settings,
        server_name=server.name,
        server_version=version,
        leases=lease_data,
        reap_cost=cost,
        mass=mass,
        server_utilization=use.utilization,
        server_cpu_s=use.cpu_s,
        client_cpu_s=sum(d.cpu_s for d in lease_data),
        window_s=settings.duration_s,
        wall_s=time.perf_counter() - wall0,
        evalsha_calls=use.calls("evalsha"),
        evalsha_usec=use.usec("evalsha"),
    )


def _window(settings: SweepSettings, leases: tuple[float, ...]) -> tuple[float, float, float]:
    """The measured window's start and end (perf_counter seconds), and how long after its end
    a process may still wait for its last jobs to settle."""
    dist = settings.dist()
    start = time.perf_counter() + settings.warmup_s
    end = start + settings.duration_s
    scale = settings.time_scale
    longest = max(settings.real_lease_ms(x) for x in leases) / 1000.0
    cap = (longest + 2 * settings.reap_every_ms / scale / 1000.0
           + min(dist.quantile_ms(0.9999) / scale / 1000.0, 10.0) + 1.0)
    return start, end, cap


def _gather(harness: Harness, client: Any, leases: tuple[float, ...], counters: Any,
            window: tuple[float, float, float], progress: ProgressFn) -> tuple[list[LeaseData], Any]:
    """Each process's data once all have reported, and the server's usage over the window."""
    start, end, cap = window
    s0 = sample(client)
    sampled_end = None

    def tick() -> None:
        nonlocal sampled_end
        now = time.perf_counter()
        if sampled_end is None and now >= end:
            sampled_end = sample(client)
        done = sum("result" in child.heard for child in harness.children)
        progress(_progress_line(now, start, end, leases, counters, done))

    results: list[LeaseData] = harness.results(end + cap + REPORT_S - time.perf_counter(), tick=tick,
                                               every_s=TICK_S)
    if sampled_end is None:
        sampled_end = sample(client)
    return results, usage(s0, sampled_end)


def _progress_line(now: float, start: float, end: float, leases: tuple[float, ...], counters: Any,
                   done: int) -> str:
    if now < start:
        head = "warming up"
    elif now < end:
        head = f"{now - start:5.0f}/{end - start:.0f} s"
    else:
        head = f"tail {now - end:4.1f} s ({done}/{len(leases)} done)"
    parts = []
    for i, lease in enumerate(leases):
        n = int(counters[i * PROGRESS_FIELDS])
        refused = int(counters[i * PROGRESS_FIELDS + 1])
        parts.append(f"{_short_ms(lease)}: {n} runs {refused} refused")
    return f"lease sweep {head} | " + " | ".join(parts)


def _short_ms(ms: float) -> str:
    if ms >= 60_000:
        return f"{ms / 60_000:g}m"
    if ms >= 1000:
        return f"{ms / 1000:g}s"
    return f"{ms:g}ms"


def work_latency(data: SweepData) -> Latency:
    """The work times the consumers measured (sleep from claim reply to
    complete, nominal), merged over all leases: what --work-from reads back."""
    lat = Latency()
    for d in data.leases:
        for t1, t2 in zip(d.live["t1"], d.live["t2"]):
            lat.record_ms((t2 - t1) * 1000 * data.settings.time_scale)
    return lat

