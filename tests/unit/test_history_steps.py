"""The history's step verdict at its unit, one run: runs close in time drift
together, and a flat series whose runs are correlated gets no step called;
a real step still is, with its n and interval; and a build comparison's
per-build figures are series of their own for each set of builds that
shared the run. No server: synthetic series through the history's own reader."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from echomq_bench.measurement.steps import fit_segments, flag_steps
from echomq_bench.records.fingerprint import fingerprint_id
from echomq_bench.records.history import read_history
from echomq_bench.records.record import Record
from echomq_bench.records.files import write_record
from echomq_bench.report.history import all_series, flagged, inconclusive

START = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
FP = {"cpu_model": "Test CPU", "cpu_flags_sha256": "0123456789abcdef", "cores": 2, "server_version": "redis 7.0.15",
      "allocator": "jemalloc-5.3.0"}


def ar1(seed: int, n: int, rho: float, spread: float) -> np.ndarray:
    """n runs of a 10 µs figure whose relative noise is AR(1): lag-1 correlation rho, sd `spread`."""
    rng = np.random.default_rng(seed)
    noise = np.empty(n)
    noise[0] = rng.normal(0, spread)
    for i in range(1, n):
        noise[i] = rho * noise[i - 1] + rng.normal(0, spread * np.sqrt(1 - rho * rho))
    return 10.0 * (1 + noise)


def frame_of(series: Mapping[str, Iterable[float]]) -> pd.DataFrame:
    """A history frame: one metric per series, one revision an hour, one machine."""
    rows = [{"run_key": f"{i}", "revision": f"rev-{i:03d}",
             "created_utc": (START + dt.timedelta(hours=i)).isoformat(timespec="seconds"),
             "metric": metric, "build": "redis", "fingerprint_id": "fp", "value": float(v), "unit": "us",
             "better": "lower"} for metric, values in series.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


# -- correlated runs: what asv's fit alone takes for steps -------------------------------------


FLAT = 400          # flat series of 16 runs, rho 0.7, 6% spread


def test_flat_correlated_series_get_at_most_5_percent_steps_called() -> None:
    """asv's fit flags 7-10% of such series (docs/measurements/scripts/history_correlated.py); the
    verdict, allowing for the correlation, calls a step in at most 5% of them."""
    flat = {f"m{seed:03d}": ar1(seed, 16, 0.7, 0.06) for seed in range(FLAT)}
    asv_alone = sum(bool(flag_steps(fit_segments(list(y)))) for y in flat.values())
    assert asv_alone > 0.06 * FLAT      # the plant: these series are the ones the fit alone gets wrong
    series = all_series(frame_of(flat))
    called = {s.metric for s in flagged(series)}
    assert len(called) <= 0.05 * FLAT
    # What asv flagged and was not called is said, as inconclusive, not dropped.
    assert len(called) + len({s.metric for s in inconclusive(series)}) >= asv_alone


def test_one_drifting_series_flagged_by_the_fit_is_inconclusive() -> None:
    y = ar1(17, 12, 0.7, 0.06)
    assert [s.index for s in flag_steps(fit_segments(list(y)))] == [3]   # asv's fit alone: a step at run 4
    series = all_series(frame_of({"m": y}))
    assert flagged(series) == []
    (undecided,) = inconclusive(series)
    assert undecided.revision == "rev-003" and not undecided.called
    assert undecided.low < 0 < undecided.high   # its interval holds no change
    assert (undecided.runs_before, undecided.runs_after) == (3, 9)
    assert undecided.more_runs is not None and undecided.more_runs > 0   # what would decide it


# -- a real step is still called, with n and its interval ---------------------------------------


def test_a_15_percent_step_is_called_at_its_run_with_its_interval() -> None:
    """15% at 2% spread, 6 runs before it and 8 after: called at exactly its run in at least 90% of 100
    series, on independent and on correlated runs (the rates: history_correlated.py)."""
    for rho in (0.0, 0.7):
        stepped = {}
        for seed in range(100):
            y = ar1(1000 + seed, 14, rho, 0.02)
            y[6:] *= 1.15
            stepped[f"m{seed:03d}"] = y
        steps = flagged(all_series(frame_of(stepped)))
        at_its_run = [s for s in steps if s.revision == "rev-006"]
        assert len(at_its_run) >= 90, rho
        assert len(steps) == len(at_its_run)     # and nowhere else
        assert all(s.low > 0 and s.runs_before + s.runs_after <= 14 for s in at_its_run)
        assert sum((s.runs_before, s.runs_after) == (6, 8) for s in at_its_run) >= 0.9 * len(at_its_run)
        # The planted change, 10 -> 11.5 µs, inside the interval of nearly every one.
        assert sum(s.low < 1.5 < s.high for s in at_its_run) >= 0.9 * len(at_its_run), rho


# -- the build comparison's series, keyed by the builds that shared the run -------------------


def compare_record(n: int, builds: Sequence[str], cycles: float, us: float) -> Record:
    """A compare run at hour n, every build at the same figures: redis's share of the core is 1 / builds."""
    fps = {b: {**FP, "server_version": f"{b} 1.0"} for b in builds}
    meta = {"created_utc": (START + dt.timedelta(hours=n)).isoformat(timespec="seconds"),
            "git": {"commit": hashlib.sha1(f"commit {n}".encode()).hexdigest(), "dirty": False},
            "servers": [{"name": b, "version": f"{b} 1.0", "fingerprint": fps[b]} for b in builds]}
    entry: dict[str, Any] = {"cycles_per_s": {"median": cycles / len(builds)},
                             "server_us_per_cycle": {"median": us}, "claim_p99_ms": {"median": 0.5 * len(builds)}}
    summary = {"baseline": "redis", "trials": 10, "interleave": "together", "company": sorted(builds),
               "builds": {b: {**entry, "version": f"{b} 1.0"} for b in builds}}
    return Record(kind="compare", summary=summary, meta=meta)


def test_a_builds_own_compare_figures_are_a_series_per_company(tmp_path: Path) -> None:
    """Six runs of redis beside valkey, then six beside five builds: its share of the core falls from a half
    to a sixth. That is other company, not a step."""
    two, six = ["redis", "valkey"], ["redis", "redis6.2", "valkey", "valkey8.1", "valkey9.1", "redis8.2"]
    for n in range(12):
        write_record(tmp_path / f"r{n:02d}", compare_record(n, two if n < 6 else six, 40000 * (1 + 0.01 * (n % 3)),
                                                            12.0 + 0.1 * (n % 2)))
    series = [s for s in all_series(read_history()) if s.build == "redis"]
    assert flagged(series) == [] and inconclusive(series) == []
    names = {s.metric: len(s.points) for s in series}
    for figure in ("cycles_per_s", "server_us_per_cycle", "claim_p99_ms"):
        assert names[f"compare.{figure}_among_redis+valkey"] == 6
        assert names[f"compare.{figure}_among_redis+redis6.2+redis8.2+valkey+valkey8.1+valkey9.1"] == 6
    assert {s.fingerprint_id for s in series} == {fingerprint_id(FP | {"server_version": "redis 1.0"})}
