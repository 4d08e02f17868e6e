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
same state: the comparison the regression gate (echomq_bench.commands.gate) trusts most.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import redis

from echomq_bench.microbench.cases import CASES, KEEP, REFERENCES, SUB_US_KEEP, VERB_CASES, Case, Env, Sizes
from echomq_bench.measurement.serverstats import commandstats_entry, process_cpu_s, sample, usage

__all__ = [
    "Settings", "FULL", "QUICK", "Sizes", "Batch", "Figure", "Comparison", "Measurement", "MicrobenchError",
    "Env", "Case", "CASES", "VERB_CASES", "REFERENCES", "run_batch", "measure", "typical", "figure",
]

BOOTSTRAP = 200


class MicrobenchError(RuntimeError):
    """A batch that did not measure what it claims: a wrong reply, or calls
    on the server that this process did not make."""


@dataclass(frozen=True)
class Settings:
    rounds: int = 20
    calls: int = 50            # calls per batch
    heavy_calls: int = 12      # for cases whose every call needs 100 fresh rows
    warmup_rounds: int = 1
    sizes: Sizes = field(default_factory=Sizes)

    def calls_for(self, case: "Case") -> int:
        return self.heavy_calls if case.heavy else self.calls


FULL = Settings()
QUICK = Settings(rounds=8, calls=25, heavy_calls=6)


# -- measuring ---------------------------------------------------------------------------


def typical(values: Sequence[float], keep: float = KEEP) -> float:
    """The mean of the faster half (`keep`) of the calls.

    On a shared machine a call's server time is its script's work plus
    whatever the kernel and the neighbours added (a preempted call reads
    hundreds of µs). The faster half holds the calls that ran undisturbed;
    its mean, unlike a median of whole microseconds, still resolves
    fractions of a µs. Sub-µs commands (PING, ZCARD) read 0 or 1 µs per
    call, so they keep 90%: their few slow calls are the ones to drop."""
    if not len(values):
        return float("nan")
    arr = np.asarray(values, dtype=float)
    k = max(1, int(round(len(arr) * keep)))
    return float(np.partition(arr, k - 1)[:k].mean())


@dataclass(frozen=True)
class Batch:
    """One batch of one case: per call, the verb's server time (commandstats
    usec delta, whole µs) and round trip (µs), and the same for the no-op
    script and PING that ran right after it -- and, for a heavy verb, for
    the 100-row reference too (ref_*; empty otherwise)."""
    case: str
    server_us: list[int]
    client_us: list[float]
    noop_us: list[int]
    noop_client_us: list[float]
    ping_us: list[int]
    ping_client_us: list[float]
    ref_us: list[int] = field(default_factory=list)
    ref_client_us: list[float] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.server_us)

    @property
    def server_us_mean(self) -> float:
        """The plain commandstats delta over the batch, per call."""
        return sum(self.server_us) / len(self.server_us)

    def reference_us(self, reference: str) -> list[int]:
        return self.ref_us if reference == "read_100" else self.noop_us


def run_batch(cases: Sequence[Case], n: int) -> list[Batch]:
    """n iterations; each runs every case once (one case, or the same verb
    under two script folders, A B A B), each call followed by the no-op
    script (EVAL, so commandstats keeps it apart from the verbs' EVALSHA),
    PING, and INFO commandstats, whose delta from the previous INFO is each
    call's server time. The references thus run within a millisecond of the
    verb, under the same load. Setup outside the calls is untimed."""
    env = cases[0].env
    client = env.client
    for case in cases:
        case.prepare(n)
    out = [Batch(c.name, [0] * n, [0.0] * n, [0] * n, [0.0] * n, [0] * n, [0.0] * n,
                 *(([0] * n, [0.0] * n) if c.reference == "read_100" else ())) for c in cases]
    replies: list[list[object]] = [[None] * n for _ in cases]
    clock = time.perf_counter
    noop, ping = env.noop_eval, client.ping
    gc_was = gc.isenabled()
    gc.disable()
    try:
        stats = client.info("commandstats")
        for i in range(n):
            for case, batch, got in zip(cases, out, replies):
                args = case.before(i)
                t0 = clock()
                got[i] = case.call(*args)
                t1 = clock()
                noop()
                t2 = clock()
                ping()
                t3 = clock()
                now = client.info("commandstats")
                delta = {c: (commandstats_entry(now, c)[0] - commandstats_entry(stats, c)[0], commandstats_entry(now, c)[1] - commandstats_entry(stats, c)[1])
                         for c in (case.command, "eval", "ping")}
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
                stats = now
                if case.reference == "read_100":
                    # The heavy reference, between its own two INFOs (both are EVAL).
                    t4 = clock()
                    env.read_100_eval()
                    t5 = clock()
                    now = client.info("commandstats")
                    calls, usec = (a - b for a, b in zip(commandstats_entry(now, "eval"), commandstats_entry(stats, "eval")))
                    if calls != 1:
                        raise MicrobenchError(f"{case.name}: the server counted {calls} EVAL for one reference "
                                              "call; another client is using the server")
                    batch.ref_us[i] = usec
                    batch.ref_client_us[i] = (t5 - t4) * 1e6
                    stats = now
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


@dataclass(frozen=True)
class Figure:
    """One case over a run, every call of every round pooled.

    server_ratio is typical(server µs) / typical(reference µs) over the same
    batches, the reference being the one of the verb's weight: the no-op
    script, or for the 100-job verbs the 100-row read (a no-op tracks them
    badly: its 2 µs are all fixed cost, theirs all work). noop_ratio is the
    same against the no-op script for every verb. client_ratio is
    median(round trip) / median(PING round trip). *_se is the relative
    standard error of the ratio from a bootstrap over rounds; *_iqr the
    interquartile range of the per-round ratios."""
    case: str
    command: str
    calls: int
    server_us: float
    server_us_mean: float
    client_us: float
    reference: str
    server_ratio: float
    server_ratio_se: float
    server_ratio_iqr: tuple[float, float]
    noop_ratio: float
    client_ratio: float
    client_ratio_iqr: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        r = lambda x, d=4: round(float(x), d)  # noqa: E731
        return {"command": self.command, "calls": self.calls, "server_us": r(self.server_us, 3),
                "server_us_mean": r(self.server_us_mean, 3), "client_us": r(self.client_us, 2),
                "reference": self.reference, "server_ratio": r(self.server_ratio),
                "server_ratio_se": r(self.server_ratio_se),
                "server_ratio_iqr": [r(x) for x in self.server_ratio_iqr], "noop_ratio": r(self.noop_ratio),
                "client_ratio": r(self.client_ratio), "client_ratio_iqr": [r(x) for x in self.client_ratio_iqr]}


def _iqr(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        v = float(values[0]) if len(values) else float("nan")
        return v, v
    q1, q3 = np.percentile(np.asarray(values, dtype=float), [25, 75])
    return float(q1), float(q3)


def pooled_ratio(num: Sequence[Sequence[float]], den: Sequence[Sequence[float]], *,
                 keep_num: float = KEEP, keep_den: float = KEEP, bootstrap: bool = True,
                 seed: int = 0) -> tuple[float, float]:
    """typical(all of num) / typical(all of den), and its relative standard
    error from resampling the rounds (each round's num and den stay paired)."""
    ratio = typical(np.concatenate([np.asarray(x, float) for x in num]), keep_num) / typical(
        np.concatenate([np.asarray(x, float) for x in den]), keep_den)
    rounds = len(num)
    if rounds < 3 or not ratio > 0 or not bootstrap:
        return ratio, float("nan")
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, rounds, rounds)
        a = np.concatenate([np.asarray(num[j], float) for j in pick])
        b = np.concatenate([np.asarray(den[j], float) for j in pick])
        reps.append(typical(a, keep_num) / typical(b, keep_den))
    return ratio, float(np.std(reps) / ratio)


def figure(batches: Sequence[Batch], name: str | None = None, command: str | None = None,
           keep: float | None = None, reference: str | None = None) -> Figure:
    """The figure of one case from its batches (one per round)."""
    name = name or batches[0].case
    known = CASES.get(name)
    cmd = command or (known.command if known else "?")
    keep = keep if keep is not None else (known.keep if known else KEEP)
    reference = reference or (known.reference if known else "noop_script")
    server = [b.server_us for b in batches]
    ref = [b.reference_us(reference) for b in batches]
    ratio, se = pooled_ratio(server, ref, keep_num=keep)
    per_round = [typical(b.server_us, keep) / typical(r) for b, r in zip(batches, ref)]
    noop_ratio, _ = pooled_ratio(server, [b.noop_us for b in batches], keep_num=keep, bootstrap=False)
    client = np.concatenate([b.client_us for b in batches])
    ping_client = np.concatenate([b.ping_client_us for b in batches])
    c_round = [float(np.median(b.client_us) / np.median(b.ping_client_us)) for b in batches]
    all_server = np.concatenate([np.asarray(s, float) for s in server])
    return Figure(name, cmd, int(len(all_server)), typical(all_server, keep), float(all_server.mean()),
                  float(np.median(client)), reference, ratio, se, _iqr(per_round), noop_ratio,
                  float(np.median(client) / np.median(ping_client)), _iqr(c_round))


def reference_figures(batches: Sequence[Batch]) -> dict[str, Figure]:
    """The references pooled over every batch of the run (the 100-row read
    over the heavy verbs' batches), each against the no-op script."""
    out = {}
    for name, command, keep, s_attr, c_attr in (
            ("noop_script", "eval", KEEP, "noop_us", "noop_client_us"),
            ("ping", "ping", SUB_US_KEEP, "ping_us", "ping_client_us"),
            ("read_100", "eval", KEEP, "ref_us", "ref_client_us")):
        fake = [Batch(name, getattr(b, s_attr), getattr(b, c_attr), b.noop_us, b.noop_client_us,
                      b.ping_us, b.ping_client_us) for b in batches if getattr(b, s_attr)]
        if fake:
            out[name] = figure(fake, name, command, keep, "noop_script")
    return out


@dataclass(frozen=True)
class Comparison:
    """A verb under two script folders, interleaved call by call: typical
    server time with the candidate scripts over typical server time with the
    baseline's, pooled over rounds; se from a bootstrap over rounds."""
    case: str
    ratio: float
    se: float
    now_us: float
    base_us: float


@dataclass(frozen=True)
class Measurement:
    server: str
    version: str
    lua_dir: str
    settings: Settings
    rounds: list[dict[str, Batch]]
    ab_rounds: list[dict[str, Batch]] = field(default_factory=list)   # the same verbs, baseline scripts
    ab_lua_dir: str | None = None
    wall_s: float = 0.0
    server_main_cpu_s: float = 0.0
    client_cpu_s: float = 0.0

    @property
    def cases(self) -> list[str]:
        seen: list[str] = []
        for r in self.rounds:
            seen.extend(c for c in r if c not in seen)
        return seen

    def batches(self, case: str) -> list[Batch]:
        return [r[case] for r in self.rounds if case in r]

    def figures(self) -> dict[str, Figure]:
        out = reference_figures([b for r in self.rounds for b in r.values()])
        out.update({c: figure(self.batches(c)) for c in self.cases})
        return out

    def comparisons(self) -> dict[str, Comparison]:
        out = {}
        for case in sorted({c for r in self.ab_rounds for c in r}, key=self.cases.index):
            now = [r[case].server_us for r, a in zip(self.rounds, self.ab_rounds) if case in a]
            base = [a[case].server_us for a in self.ab_rounds if case in a]
            keep = CASES[case].keep
            ratio, se = pooled_ratio(now, base, keep_num=keep, keep_den=keep)
            out[case] = Comparison(case, ratio, se, typical(np.concatenate(now), keep),
                                   typical(np.concatenate(base), keep))
        return out

    def merge(self, other: "Measurement") -> "Measurement":
        """This run's rounds followed by other's (the same server and cases)."""
        return replace(self, rounds=self.rounds + other.rounds, ab_rounds=self.ab_rounds + other.ab_rounds,
                       settings=replace(self.settings, rounds=self.settings.rounds + other.settings.rounds),
                       wall_s=self.wall_s + other.wall_s,
                       server_main_cpu_s=self.server_main_cpu_s + other.server_main_cpu_s,
                       client_cpu_s=self.client_cpu_s + other.client_cpu_s)

    @property
    def server_utilization(self) -> float:
        return self.server_main_cpu_s / self.wall_s if self.wall_s else 0.0

    @property
    def client_utilization(self) -> float:
        return self.client_cpu_s / self.wall_s if self.wall_s else 0.0

    def tidy_rows(self, **condition: Any) -> Iterable[dict[str, Any]]:
        """One row per batch and metric."""
        for scripts, rounds in (("now", self.rounds), ("baseline", self.ab_rounds)):
            for n, r in enumerate(rounds):
                for case, b in r.items():
                    base = {**condition, "build": self.server, "scripts": scripts, "round": n, "case": case,
                            "calls": b.calls}
                    for metric, value, unit in (
                            ("server_us_typical", typical(b.server_us, CASES[case].keep), "us"),
                            ("server_us_mean", b.server_us_mean, "us"),
                            ("client_us_p50", float(np.median(b.client_us)), "us"),
                            ("noop_server_us_typical", typical(b.noop_us), "us"),
                            *((("read_100_server_us_typical", typical(b.ref_us), "us"),) if b.ref_us else ()),
                            ("ping_client_us_p50", float(np.median(b.ping_client_us)), "us")):
                        yield {**base, "metric": metric, "value": round(value, 4), "unit": unit}


def measure(client: redis.Redis, *, server: str = "?", version: str = "?", settings: Settings = FULL,
            cases: Sequence[str] | None = None, lua_dir: Path | str | None = None,
            ab_lua_dir: Path | str | None = None, ab_cases: Sequence[str] = (),
            progress: Callable[[str], None] | None = None) -> Measurement:
    """`settings.rounds` rounds of every case (or of `cases`) on one server.

    With ab_lua_dir, each case in ab_cases also runs under that folder's
    scripts, interleaved call by call with the current ones on the same
    state (see Measurement.comparisons)."""
    names = list(cases) if cases else [c.name for c in VERB_CASES]
    unknown = [n for n in list(names) + list(ab_cases) if n not in CASES]
    if unknown:
        raise ValueError(f"unknown microbench case(s) {unknown}; known: {sorted(CASES)}")
    env = Env(client, sizes=settings.sizes, lua_dir=lua_dir)
    try:
        if progress:
            progress("preparing state")
        live = {n: CASES[n](env) for n in names}
        alt = {n: CASES[n](env, lua_dir=ab_lua_dir) for n in ab_cases if n in live} if ab_lua_dir else {}
        for _ in range(settings.warmup_rounds):
            for name, case in live.items():
                run_batch([case] + ([alt[name]] if name in alt else []), min(5, settings.calls_for(case)))
        rounds: list[dict[str, Batch]] = []
        ab_rounds: list[dict[str, Batch]] = []
        s0, cpu0, t0 = sample(client), process_cpu_s(), time.perf_counter()
        order = list(live)
        for r in range(settings.rounds):
            if progress:
                progress(f"round {r + 1}/{settings.rounds}")
            shift = r % len(order)   # rotate, so no case always follows the same neighbour
            got: dict[str, Batch] = {}
            got_ab: dict[str, Batch] = {}
            for name in order[shift:] + order[:shift]:
                case = live[name]
                if name in alt:
                    # Alternate which variant goes first in each round.
                    pair = [case, alt[name]] if r % 2 == 0 else [alt[name], case]
                    b = run_batch(pair, settings.calls_for(case))
                    got[name], got_ab[name] = (b[0], b[1]) if r % 2 == 0 else (b[1], b[0])
                else:
                    got[name] = run_batch([case], settings.calls_for(case))[0]
            rounds.append({n: got[n] for n in order})
            ab_rounds.append(got_ab)
        use = usage(s0, sample(client))
        cpu = process_cpu_s() - cpu0
        return Measurement(server, version, env.scripts_dir(), settings, rounds,
                           ab_rounds if alt else [], str(ab_lua_dir) if alt else None,
                           wall_s=time.perf_counter() - t0, server_main_cpu_s=use.main_cpu_s, client_cpu_s=cpu)
    finally:
        env.close()
