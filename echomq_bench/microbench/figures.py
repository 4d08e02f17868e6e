"""The microbenchmarks' data: one batch's calls, and the figures, comparisons and
tidy rows a run's batches pool into (each figure is typical server time over a
reference's, with a bootstrap standard error over rounds)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from echomq_bench.measurement.stats import Floats, bootstrap_sd, median, quartiles
from echomq_bench.microbench.cases import CASES, KEEP, SUB_US_KEEP
from echomq_bench.microbench.settings import Settings

__all__ = ["Batch", "Figure", "Comparison", "Measurement", "typical", "figure", "pooled_ratio",
           "reference_figures", "BOOTSTRAP"]

BOOTSTRAP = 200


def typical(values: Floats, keep: float = KEEP) -> float:
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
        def r(x: float, d: int = 4) -> float:
            return round(float(x), d)

        return {"command": self.command, "calls": self.calls, "server_us": r(self.server_us, 3),
                "server_us_mean": r(self.server_us_mean, 3), "client_us": r(self.client_us, 2),
                "reference": self.reference, "server_ratio": r(self.server_ratio),
                "server_ratio_se": r(self.server_ratio_se),
                "server_ratio_iqr": [r(x) for x in self.server_ratio_iqr], "noop_ratio": r(self.noop_ratio),
                "client_ratio": r(self.client_ratio), "client_ratio_iqr": [r(x) for x in self.client_ratio_iqr]}


def _quotient(num: float, den: float) -> float:
    """num / den, NaN when den is 0: commandstats counts whole microseconds, so a
    short round of a no-op can read 0, and that round then has no ratio."""
    return num / den if den > 0 else float("nan")


def pooled_ratio(num: Sequence[Sequence[float]], den: Sequence[Sequence[float]], *,
                 keep_num: float = KEEP, keep_den: float = KEEP, bootstrap: bool = True,
                 seed: int = 0) -> tuple[float, float]:
    """typical(all of num) / typical(all of den), and its relative standard
    error from resampling the rounds (each round's num and den stay paired)."""
    ratio = _quotient(typical(np.concatenate([np.asarray(x, float) for x in num]), keep_num),
                      typical(np.concatenate([np.asarray(x, float) for x in den]), keep_den))
    rounds = len(num)
    if rounds < 3 or not ratio > 0 or not bootstrap:
        return ratio, float("nan")

    def resampled(pick: npt.NDArray[np.int64]) -> float:
        a = np.concatenate([np.asarray(num[j], float) for j in pick])
        b = np.concatenate([np.asarray(den[j], float) for j in pick])
        return _quotient(typical(a, keep_num), typical(b, keep_den))

    return ratio, bootstrap_sd(resampled, rounds, BOOTSTRAP, seed) / ratio


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
    per_round = [_quotient(typical(b.server_us, keep), typical(r)) for b, r in zip(batches, ref)]
    per_round = [q for q in per_round if not np.isnan(q)]
    noop_ratio, _ = pooled_ratio(server, [b.noop_us for b in batches], keep_num=keep, bootstrap=False)
    client = np.concatenate([b.client_us for b in batches])
    ping_client = np.concatenate([b.ping_client_us for b in batches])
    c_round = [median(b.client_us) / median(b.ping_client_us) for b in batches]
    all_server = np.concatenate([np.asarray(s, float) for s in server])
    return Figure(name, cmd, int(len(all_server)), typical(all_server, keep), float(all_server.mean()),
                  median(client), reference, ratio, se, quartiles(per_round), noop_ratio,
                  median(client) / median(ping_client), quartiles(c_round))


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
                            ("client_us_p50", median(b.client_us), "us"),
                            ("noop_server_us_typical", typical(b.noop_us), "us"),
                            *((("read_100_server_us_typical", typical(b.ref_us), "us"),) if b.ref_us else ()),
                            ("ping_client_us_p50", median(b.ping_client_us), "us")):
                        yield {**base, "metric": metric, "value": round(value, 4), "unit": unit}

