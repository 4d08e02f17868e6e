"""Work-time distributions, as users write them on the command line.

    const:20ms                      always 20 ms (const:0 for capacity runs)
    exp:mean=20ms                   exponential
    lognormal:median=50ms,p99=400ms lognormal fixed by two quantiles
    uniform:lo=10ms,hi=30ms         uniform
    empirical:FILE                  measured work times: a CSV (seconds, ms, ... by column
                                    header), a work-time histogram (.hdr blob, .hgrm text in
                                    ms) or the results folder of an earlier run holding one

Durations take us, ms, s or m; a bare number is milliseconds. Each
distribution both samples (for the load) and answers sf(x) = P(work > x)
(for the lease model), so the model and the measurement use one definition.
"""

from __future__ import annotations

import csv
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Protocol

from echomq_bench.errors import SettingsError

__all__ = ["Distribution", "parse_duration_ms", "parse_dist", "DistError", "load_work_times", "load_work_file",
           "WORK_HISTOGRAM"]

_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}
_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|ms|s|m)?\s*")
Z99 = NormalDist().inv_cdf(0.99)
# The file name under which a run keeps the work times it measured (an HDR
# histogram blob in microseconds), so a later run can take them with
# --work-from RUN_DIR.
WORK_HISTOGRAM = "work.hdr"
# A histogram of more observations than this is read as this many evenly
# spaced quantiles: the sf keeps a resolution of 1 in 200 000.
MAX_EMPIRICAL = 200_000


class DistError(SettingsError):
    """A distribution string that does not parse; the message names the problem."""


def parse_duration_ms(text: str) -> float:
    match = _DURATION.fullmatch(text)
    if not match:
        raise DistError(f"bad duration {text!r}: want a number with us, ms, s or m (e.g. 250ms, 1.5s)")
    return float(match[1]) * _UNITS_MS[match[2] or "ms"]


class Distribution(Protocol):
    # Read-only: the distributions are frozen dataclasses.
    @property
    def spec(self) -> str: ...

    def sample_ms(self, rng: random.Random) -> float: ...
    def sf(self, x_ms: float) -> float: ...
    def quantile_ms(self, p: float) -> float: ...


@dataclass(frozen=True)
class Const:
    spec: str
    value_ms: float

    def sample_ms(self, rng: random.Random) -> float:
        return self.value_ms

    def sf(self, x_ms: float) -> float:
        return 1.0 if self.value_ms > x_ms else 0.0

    def quantile_ms(self, p: float) -> float:
        return self.value_ms


@dataclass(frozen=True)
class Exponential:
    spec: str
    mean_ms: float

    def sample_ms(self, rng: random.Random) -> float:
        return rng.expovariate(1.0 / self.mean_ms)

    def sf(self, x_ms: float) -> float:
        return 1.0 if x_ms < 0 else math.exp(-x_ms / self.mean_ms)

    def quantile_ms(self, p: float) -> float:
        return -self.mean_ms * math.log1p(-p)


@dataclass(frozen=True)
class LogNormal:
    spec: str
    median_ms: float
    p99_ms: float

    @property
    def mu(self) -> float:
        return math.log(self.median_ms)

    @property
    def sigma(self) -> float:
        return (math.log(self.p99_ms) - math.log(self.median_ms)) / Z99

    def sample_ms(self, rng: random.Random) -> float:
        return rng.lognormvariate(self.mu, self.sigma)

    def sf(self, x_ms: float) -> float:
        if x_ms <= 0:
            return 1.0
        return 1.0 - NormalDist(self.mu, self.sigma).cdf(math.log(x_ms))

    def quantile_ms(self, p: float) -> float:
        return math.exp(NormalDist(self.mu, self.sigma).inv_cdf(p))


@dataclass(frozen=True)
class Uniform:
    spec: str
    lo_ms: float
    hi_ms: float

    def sample_ms(self, rng: random.Random) -> float:
        return rng.uniform(self.lo_ms, self.hi_ms)

    def sf(self, x_ms: float) -> float:
        return min(1.0, max(0.0, (self.hi_ms - x_ms) / (self.hi_ms - self.lo_ms)))

    def quantile_ms(self, p: float) -> float:
        return self.lo_ms + p * (self.hi_ms - self.lo_ms)


@dataclass(frozen=True)
class Empirical:
    spec: str
    values_ms: tuple[float, ...] = field(repr=False)

    def sample_ms(self, rng: random.Random) -> float:
        return rng.choice(self.values_ms)

    def sf(self, x_ms: float) -> float:
        import bisect

        return 1.0 - bisect.bisect_right(self.values_ms, x_ms) / len(self.values_ms)

    def quantile_ms(self, p: float) -> float:
        i = min(len(self.values_ms) - 1, max(0, math.ceil(p * len(self.values_ms)) - 1))
        return self.values_ms[i]


def _params(kind: str, body: str, names: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in filter(None, body.split(",")):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in names:
            raise DistError(f"{kind}: bad parameter {part!r}; want {', '.join(n + '=DURATION' for n in names)}")
        out[key.strip()] = parse_duration_ms(value)
    missing = [n for n in names if n not in out]
    if missing:
        raise DistError(f"{kind}: missing {', '.join(missing)}")
    return out


def load_work_times(path: Path) -> tuple[float, ...]:
    """Work times from a CSV: the first column whose header names a unit
    (work_ms, seconds, ...), else the first column, read as milliseconds."""
    if not path.is_file():
        raise DistError(f"empirical: no such file {path}")
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise DistError(f"empirical: {path} is empty")
    header, scale, column = rows[0], 1.0, 0
    for i, name in enumerate(header):
        low = name.strip().lower()
        if low.endswith(("_ms", "ms")):
            column, scale = i, 1.0
            break
        if low.endswith(("_s", "seconds", "sec")):
            column, scale = i, 1000.0
            break
    body = rows[1:] if not is_number(header[column]) else rows
    try:
        values = sorted(float(r[column]) * scale for r in body if r and r[column].strip())
    except ValueError as exc:
        raise DistError(f"empirical: {path}: {exc}") from None
    if not values or values[0] < 0:
        raise DistError(f"empirical: {path} has no non-negative work times")
    return tuple(values)


def _from_counts(pairs: list[tuple[float, int]], source: Path) -> tuple[float, ...]:
    pairs = sorted((v, c) for v, c in pairs if c > 0)
    total = sum(c for _, c in pairs)
    if total == 0:
        raise DistError(f"empirical: {source} holds an empty histogram")
    if total <= MAX_EMPIRICAL:
        return tuple(v for v, c in pairs for _ in range(c))
    out: list[float] = []
    i, seen = 0, pairs[0][1]
    for j in range(MAX_EMPIRICAL):
        rank = (j + 0.5) / MAX_EMPIRICAL * total
        while seen < rank:
            i += 1
            seen += pairs[i][1]
        out.append(pairs[i][0])
    return tuple(out)


def _load_hgrm(path: Path) -> tuple[float, ...]:
    """HdrHistogram's percentile text (Value Percentile TotalCount ...), values in ms."""
    from echomq_bench.measurement.latency import read_hgrm

    pairs: list[tuple[float, int]] = []
    last = 0
    for value, _, total in read_hgrm(path):
        pairs.append((value, total - last))
        last = total
    return _from_counts(pairs, path)


def _load_hdr_blob(path: Path) -> tuple[float, ...]:
    """An encoded HDR histogram (echomq_bench.measurement.latency's wire form), values in microseconds."""
    from echomq_bench.measurement.latency import Latency

    try:
        hist = Latency.decode(path.read_text().strip()).hist
    except Exception as exc:  # hdrh raises a variety of errors on a bad blob
        raise DistError(f"empirical: {path} is not an encoded HDR histogram ({type(exc).__name__})") from None
    pairs = [(it.value_iterated_to / 1000.0, int(it.count_added_in_this_iter_step))
             for it in hist.get_recorded_iterator()]
    return _from_counts(pairs, path)


def load_work_file(path: Path) -> tuple[float, ...]:
    """Sorted work times (ms) from a CSV, an .hgrm, an .hdr blob, or a results
    folder holding work.hdr (or a single work*.hgrm)."""
    if path.is_dir():
        candidates = [path / WORK_HISTOGRAM] if (path / WORK_HISTOGRAM).is_file() else sorted(path.glob("work*.hgrm"))
        if len(candidates) != 1:
            raise DistError(f"empirical: {path} is a folder without a work-time histogram "
                            f"({WORK_HISTOGRAM} or one work*.hgrm)")
        path = candidates[0]
    if not path.is_file():
        raise DistError(f"empirical: no such file {path}")
    if path.suffix == ".hgrm":
        return _load_hgrm(path)
    if path.suffix == ".hdr":
        return _load_hdr_blob(path)
    return load_work_times(path)


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_dist(spec: str) -> Distribution:
    """A distribution from its spec; DistError names what is wrong."""
    if not isinstance(spec, str) or ":" not in spec:
        raise DistError(f"bad distribution {spec!r}: want KIND:PARAMS, e.g. const:0, exp:mean=20ms, "
                        "lognormal:median=50ms,p99=400ms, uniform:lo=10ms,hi=30ms, empirical:FILE")
    kind, body = spec.split(":", 1)
    if kind == "const":
        return Const(spec, parse_duration_ms(body))
    if kind == "exp":
        p = _params(kind, body, ("mean",))
        if p["mean"] <= 0:
            raise DistError("exp: mean must be above 0")
        return Exponential(spec, p["mean"])
    if kind == "lognormal":
        p = _params(kind, body, ("median", "p99"))
        if not 0 < p["median"] < p["p99"]:
            raise DistError("lognormal: want 0 < median < p99")
        return LogNormal(spec, p["median"], p["p99"])
    if kind == "uniform":
        p = _params(kind, body, ("lo", "hi"))
        if not 0 <= p["lo"] < p["hi"]:
            raise DistError("uniform: want 0 <= lo < hi")
        return Uniform(spec, p["lo"], p["hi"])
    if kind == "empirical":
        return Empirical(spec, load_work_file(Path(body)))
    raise DistError(f"unknown distribution kind {kind!r} in {spec!r}: want const, exp, lognormal, uniform or empirical")
