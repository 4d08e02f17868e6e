"""Per-verb microbenchmarks: each verb from a prepared state (echomq_bench.microbench.cases),
two figures each.

    client round trip   perf_counter around one call through `Queue`, one
                        call per round trip
    server time         INFO commandstats: the usec delta of the verb's
                        command (EVALSHA for the scripts) -- the server's own
                        clock, script execution only

Two reference operations run in the same session, the no-op script
(`return 0`) and PING, and every figure is also read as a ratio to them:
server time over the no-op script's server time, round trip over PING's.
A machine that is slower today slows a verb and its references alike. The
two verbs that move 100 jobs get a third reference of their weight, a
script that reads 100 rows: a no-op's 2 µs are all fixed cost and track
their 500 µs of work badly (their ratio to it wandered 45% between runs
here, to the 100-row read 7%).

A batch is n iterations of: the verb, the no-op script, PING, INFO
commandstats. The INFO after every call gives each call's server time on
its own, so the references are measured within a millisecond of the verb
and a call that the kernel preempted (hundreds of µs on a busy 2-core
machine; a no-op script's batch mean read 2.6x its median here) can be told
from one that ran undisturbed: `typical` is the mean of the faster half.
The plain batch delta (all usec / calls) is kept beside it as
`server_us_mean`.

A run is `rounds` rounds; each round runs every case once as one batch, in
an order rotated every round. A figure pools every call of every round; its
standard error comes from a bootstrap over rounds. With a second script
folder, a verb also runs under those scripts, A B A B call by call on the
same state: the comparison the regression gate (echomq_bench.microbench.gate) trusts most.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import redis

from echomq_bench.errors import MeasurementError
from echomq_bench.measurement.serverstats import commandstats_entry, process_cpu_s, sample, usage
from echomq_bench.microbench.cases import CASES, REFERENCES, VERB_CASES, Case, Env, Sizes
from echomq_bench.microbench.figures import Batch, Comparison, Figure, Measurement, figure, typical
from echomq_bench.microbench.settings import FULL, QUICK, Settings

__all__ = [
    "Settings", "FULL", "QUICK", "Sizes", "Batch", "Figure", "Comparison", "Measurement", "MicrobenchError",
    "Env", "Case", "CASES", "VERB_CASES", "REFERENCES", "run_batch", "measure", "MeasureOptions", "typical",
    "figure",
]


class MicrobenchError(MeasurementError):
    """A batch that did not measure what it claims: a wrong reply, or calls
    on the server that this process did not make."""


def run_batch(cases: Sequence[Case], n: int) -> list[Batch]:
    """n iterations; each runs every case once (one case, or the same verb
    under two script folders, A B A B), each call followed by the no-op
    script (EVAL, so commandstats keeps it apart from the verbs' EVALSHA),
    PING, and INFO commandstats, whose delta from the previous INFO is each
    call's server time. The references thus run within a millisecond of the
    verb, under the same load. Setup outside the calls is untimed."""
    env = cases[0].env
    for case in cases:
        case.prepare(n)
    out = [Batch(c.name, [0] * n, [0.0] * n, [0] * n, [0.0] * n, [0] * n, [0.0] * n,
                 *(([0] * n, [0.0] * n) if c.reference == "read_100" else ())) for c in cases]
    replies: list[list[object]] = [[None] * n for _ in cases]
    gc_was = gc.isenabled()
    gc.disable()
    try:
        stats = env.client.info("commandstats")
        for i in range(n):
            for case, batch, got in zip(cases, out, replies):
                stats = _timed_call(env, case, batch, got, i, stats)
                if case.reference == "read_100":
                    stats = _heavy_reference(env, case, batch, i, stats)
    finally:
        if gc_was:
            gc.enable()
    for case, got in zip(cases, replies):
        case.after(got)
        wrong = [r for r in got if not case.ok(r)]
        if wrong:
            raise MicrobenchError(f"{case.name}: {len(wrong)} of {n} calls replied unexpectedly, "
                                  f"e.g. {wrong[0]!r}")
    return out


def _stat_delta(now: dict[str, Any], before: dict[str, Any], command: str) -> tuple[int, int]:
    """(calls, usec) of `command` between two INFO commandstats replies."""
    (calls1, usec1), (calls0, usec0) = commandstats_entry(now, command), commandstats_entry(before, command)
    return calls1 - calls0, usec1 - usec0


def _timed_call(env: Env, case: Case, batch: Batch, got: list[object], i: int,
                stats: dict[str, Any]) -> dict[str, Any]:
    """Call i of one case, then the no-op script and PING, each timed; the
    INFO after them gives each one's server time. Returns that INFO."""
    clock = time.perf_counter
    client = env.client
    noop, ping = env.noop_eval, client.ping
    args = case.before(i)
    t0 = clock()
    got[i] = case.call(*args)
    t1 = clock()
    noop()
    t2 = clock()
    ping()
    t3 = clock()
    now = client.info("commandstats")
    delta = {c: _stat_delta(now, stats, c) for c in (case.command, "eval", "ping")}
    if [d[0] for d in delta.values()] != [1, 1, 1]:
        raise MicrobenchError(
            f"{case.name}: between two INFOs the server counted "
            + ", ".join(f"{d[0]} {c.upper()}" for c, d in delta.items())
            + " where this process sent one of each; another client is using the server, "
            "so its time cannot be attributed")
    batch.server_us[i] = delta[case.command][1]
    batch.noop_us[i] = delta["eval"][1]
    batch.ping_us[i] = delta["ping"][1]
    batch.client_us[i] = (t1 - t0) * 1e6
    batch.noop_client_us[i] = (t2 - t1) * 1e6
    batch.ping_client_us[i] = (t3 - t2) * 1e6
    return now


def _heavy_reference(env: Env, case: Case, batch: Batch, i: int, stats: dict[str, Any]) -> dict[str, Any]:
    """The heavy reference, between its own two INFOs (both are EVAL)."""
    clock, read_100 = time.perf_counter, env.read_100_eval
    t4 = clock()
    read_100()
    t5 = clock()
    now = env.client.info("commandstats")
    calls, usec = _stat_delta(now, stats, "eval")
    if calls != 1:
        raise MicrobenchError(f"{case.name}: the server counted {calls} EVAL for one reference "
                              "call; another client is using the server")
    batch.ref_us[i] = usec
    batch.ref_client_us[i] = (t5 - t4) * 1e6
    return now


@dataclass(frozen=True)
class MeasureOptions:
    """What one microbenchmark run measures and how it names it."""

    server: str = "?"
    version: str = "?"
    settings: Settings = FULL
    cases: Sequence[str] | None = None            # None: every verb
    lua_dir: Path | str | None = None             # the scripts measured (default: the package's lua/)
    ab_lua_dir: Path | str | None = None          # a second folder, interleaved call by call with lua_dir
    ab_cases: Sequence[str] = ()                  # the cases that also run under ab_lua_dir
    progress: Callable[[str], None] | None = None


def measure(client: redis.Redis, options: MeasureOptions = MeasureOptions()) -> Measurement:
    """`settings.rounds` rounds of every case (or of `cases`) on one server.

    With ab_lua_dir, each case in ab_cases also runs under that folder's
    scripts, interleaved call by call with the current ones on the same
    state (see Measurement.comparisons)."""
    o = options
    names = list(o.cases) if o.cases else [c.name for c in VERB_CASES]
    unknown = [n for n in list(names) + list(o.ab_cases) if n not in CASES]
    if unknown:
        raise ValueError(f"unknown microbench case(s) {unknown}; known: {sorted(CASES)}")
    env = Env(client, sizes=o.settings.sizes, lua_dir=o.lua_dir)
    try:
        if o.progress:
            o.progress("preparing state")
        live = {n: CASES[n](env) for n in names}
        alt = {n: CASES[n](env, lua_dir=o.ab_lua_dir) for n in o.ab_cases if n in live} if o.ab_lua_dir else {}
        for _ in range(o.settings.warmup_rounds):
            for name, case in live.items():
                run_batch([case] + ([alt[name]] if name in alt else []), min(5, o.settings.calls_for(case)))
        s0, cpu0, t0 = sample(client), process_cpu_s(), time.perf_counter()
        rounds, ab_rounds = _rounds(live, alt, o)
        use = usage(s0, sample(client))
        cpu = process_cpu_s() - cpu0
        return Measurement(o.server, o.version, env.scripts_dir(), o.settings, rounds,
                           ab_rounds if alt else [], str(o.ab_lua_dir) if alt else None,
                           wall_s=time.perf_counter() - t0, server_main_cpu_s=use.main_cpu_s, client_cpu_s=cpu)
    finally:
        env.close()


def _rounds(live: dict[str, Case], alt: dict[str, Case],
            o: MeasureOptions) -> tuple[list[dict[str, Batch]], list[dict[str, Batch]]]:
    """Every case once per round, the order rotated; a case with an A/B twin runs beside it."""
    rounds: list[dict[str, Batch]] = []
    ab_rounds: list[dict[str, Batch]] = []
    order = list(live)
    for r in range(o.settings.rounds):
        if o.progress:
            o.progress(f"round {r + 1}/{o.settings.rounds}")
        shift = r % len(order)   # rotate, so no case always follows the same neighbour
        got: dict[str, Batch] = {}
        got_ab: dict[str, Batch] = {}
        for name in order[shift:] + order[:shift]:
            case = live[name]
            if name in alt:
                # Alternate which variant goes first in each round.
                pair = [case, alt[name]] if r % 2 == 0 else [alt[name], case]
                b = run_batch(pair, o.settings.calls_for(case))
                got[name], got_ab[name] = (b[0], b[1]) if r % 2 == 0 else (b[1], b[0])
            else:
                got[name] = run_batch([case], o.settings.calls_for(case))[0]
        rounds.append({n: got[n] for n in order})
        ab_rounds.append(got_ab)
    return rounds, ab_rounds
