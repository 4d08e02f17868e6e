"""Throughput against consumers, the main job's fourth answer, on planted
trials: a growth judged over rounds with its interval, inconclusive below
six rounds with what would decide it, the bound counted trial by trial so a
client-bound run is named, and a schedule that alternates builds and counts.
Each plant goes through the record's files to the report's sentence."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from echomq_bench.capacity.consumers import schedule
from echomq_bench.measurement.growth import WindowRate, growth
from echomq_bench.records import files as results
from echomq_bench.records.headlines import headlines
from echomq_bench.records.kinds.consumers import ConsumersRecord, growth_entries
from echomq_bench.report.kinds.consumers import answer

BUILDS = {"redis7.0": "redis 7.0.15", "redis6.2": "redis 6.2.14"}
TRUE_GROWTH = 6.0          # 1 to 16 consumers, both builds
AT_ONE = 5_000.0           # cycles/s at 1 consumer
META = {"created_utc": "2026-12-05T00:00:00+00:00", "machine": {"cpu_model": "planted", "cpu_count": 2},
        "settings": {"part": "consumers"}}


def _row(build: str, consumers: int, trial: int, value: float, bound: str, order: int) -> dict[str, Any]:
    return {"build": build, "version": BUILDS[build], "consumers": consumers, "trial": trial, "order": order,
            "bound": bound, "metric": "cycles_per_s", "value": value, "unit": "1/s"}


def _planted(trials: int, noise: float, seed: int, *, wild: bool = False,
             bound_at_16: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Rounds of windows at 1, 4 and 16 consumers on two builds, each window off its true rate by a lognormal
    `noise`; `wild` halves redis6.2's first window at 1 consumer (a stall), which alone doubles its first
    round's growth; `bound_at_16`, the bound of each round's window at 16 (default: the server)."""
    rng = np.random.default_rng(seed)
    rows, order = [], 0
    for trial in range(1, trials + 1):
        for build in BUILDS:
            for consumers, factor in ((1, 1.0), (4, 3.5), (16, TRUE_GROWTH)):
                order += 1
                value = AT_ONE * factor * math.exp(rng.normal(0.0, noise))
                if wild and trial == 1 and build == "redis6.2" and consumers == 1:
                    value /= 2
                bound = (bound_at_16[trial - 1] if bound_at_16 else "server") if consumers == 16 else "neither"
                rows.append(_row(build, consumers, trial, value, bound, order))
    return rows


def _run(tmp_path: Path, rows: list[dict[str, Any]], trials: int) -> results.Run:
    summary = ConsumersRecord((1, 4, 16), trials=trials, window_s=0.4, warmup_s=0.2, order_seed=7,
                              builds_given=6, growth=growth_entries(rows, list(BUILDS)))
    folder = tmp_path / "consumers"
    results.write_record(folder, results.Record(kind="consumers", summary=summary.to_record(), meta=META,
                                                tables={"consumers": rows}))
    return results.load(folder)


def _lines(tmp_path: Path, rows: list[dict[str, Any]], trials: int) -> list[str]:
    found = answer(_run(tmp_path, rows, trials), tmp_path)
    assert found is not None
    return list(found.lines)


def _interval(line: str) -> tuple[float, float, float]:
    """(growth, low, high) from `... grows 6.1× on ... (95% CI 5.2–7.0, n = 6; ...`."""
    m = re.search(r"grows ([0-9.]+)× on .* \(95% CI ([0-9.]+)–([0-9.]+), n = ", line)
    assert m, line
    return float(m[1]), float(m[2]), float(m[3])


def test_a_stall_that_one_trial_a_point_would_report_as_growth_sits_inside_an_interval_that_covers_the_truth(
        tmp_path: Path) -> None:
    rows = _planted(6, noise=0.12, seed=3, wild=True)
    first_round = {b: [r["value"] for r in rows if r["build"] == b and r["trial"] == 1 and r["consumers"] in (1, 16)]
                   for b in BUILDS}
    one_trial = sorted(high / low for low, high in first_round.values())
    assert one_trial[1] / one_trial[0] > 1.5, "one trial a point: the stall alone reads as builds that differ"
    lines = _lines(tmp_path, rows, 6)
    assert [line.split(" on ")[1].split(" (")[0] for line in lines] == list(BUILDS.values())   # reference first
    for line in lines:
        ratio, low, high = _interval(line)
        assert low <= TRUE_GROWTH <= high and low <= ratio <= high, line
        assert "n = 6;" in line and "inconclusive" not in line
        assert line.endswith("the bound at 16: the server in 6 of 6 trials."), line


def test_too_few_rounds_say_inconclusive_and_how_many_would_decide(tmp_path: Path) -> None:
    lines = _lines(tmp_path, _planted(2, noise=0.15, seed=5, wild=True), 2)
    assert len(lines) == 2
    for line in lines:
        assert "too few trials for an interval, n = 2;" in line and "95% CI" not in line, line
        assert "): inconclusive, 6 trials a point would decide it; the bound at 16: " in line, line


def test_the_client_bounding_most_trials_is_named_though_the_first_trial_was_the_server_s(tmp_path: Path) -> None:
    rows = _planted(6, noise=0.05, seed=8, bound_at_16=("server", "client", "client", "client", "client", "client"))
    for line in _lines(tmp_path, rows, 6):
        assert ("the bound at 16: the client (the load generator's CPU) in 5 of 6 trials, the server in 1 of 6 "
                "trials; the load generator, not the server, set the pace there, so the server's own growth is "
                "at least this.") in line, line


def test_a_server_already_saturated_by_one_consumer_is_said_not_to_grow(tmp_path: Path) -> None:
    off = (0.995, 1.004, 0.998, 1.003, 0.997, 1.002)
    rows = [_row(b, c, t, 30_000.0 * (off[t - 1] if c == 16 else 1.0), "server", 0)
            for t in range(1, 7) for b in BUILDS for c in (1, 16)]
    for line in _lines(tmp_path, rows, 6):
        assert line.startswith("From 1 to 16 consumers throughput stays at 1.00× on "), line
        assert "): no growth beyond ±2%; the bound at 16: the server in 6 of 6 trials." in line, line


def test_a_record_from_before_rounds_reads_as_one_trial_and_is_inconclusive(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k not in ("trial", "order")} for r in _planted(1, 0.1, seed=1)]
    folder = tmp_path / "old"
    old = results.Record(kind="consumers", summary={"consumers": [1, 4, 16]},
                         meta={**META, "settings": {"window_s": 1.5}}, tables={"consumers": rows})
    results.write_record(folder, old)
    found = answer(results.load(folder), tmp_path)
    # One line for every build: a line each would say the same thing twice.
    assert found is not None and len(found.lines) == 1
    assert found.lines[0].startswith("From 1 to 16 consumers throughput grows ") and "across 2 builds" in found.lines[0]
    assert "n = 1;" in found.lines[0] and "inconclusive, 6 trials a point would decide it" in found.lines[0]
    assert "One trial per point of 1.5 s, builds one after another." in found.footnote


def test_a_round_without_both_ends_is_left_out_and_counted() -> None:
    off = {1: 0.95, 2: 1.05, 3: 0.97, 5: 1.03, 6: 0.96, 7: 1.04}   # round 4 has no window at 8
    windows = [WindowRate("b", t, 1, 1000.0 + t, "neither") for t in range(1, 8)]
    windows += [WindowRate("b", t, 8, (1000.0 + t) * 8 * f, "server") for t, f in off.items()]
    (g,) = growth(windows)
    assert (g.low, g.high, g.verdict.n, g.verdict.excluded) == (1, 8, 6, 1)
    assert g.verdict.verdict == "faster" and g.verdict.ci is not None and g.verdict.ci[0] < 8 < g.verdict.ci[1]
    assert g.bound_at_high == (("server", 6),)


def test_the_record_holds_the_growth_and_the_history_keeps_it(tmp_path: Path) -> None:
    run = _run(tmp_path, _planted(6, noise=0.1, seed=4), 6)
    record = ConsumersRecord.from_record(run.summary)
    assert list(record.growth) == list(BUILDS) and record.trials == 6 and record.order_seed == 7
    assert ConsumersRecord.from_record(record.to_record()) == record
    kept = {(h.build, h.metric): h.value for h in headlines(results.Record("consumers", record.to_record(), {
        "consumers": _planted(6, noise=0.1, seed=4)}))}
    assert kept[("redis7.0", "consumers.growth_1_to_16")] == pytest.approx(record.growth["redis7.0"].ratio.ratio)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_round_holds_every_build_and_count_once_in_a_drawn_order(seed: int) -> None:
    slots = schedule(2, (1, 4, 16), 6, seed)
    assert [s.trial for s in slots] == [t for t in range(1, 7) for _ in range(6)]
    rounds = [[(s.build, s.consumers) for s in slots if s.trial == t] for t in range(1, 7)]
    assert all(sorted(r) == [(b, c) for b in (0, 1) for c in (1, 4, 16)] for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1, "the order is drawn per round, not fixed"
    assert schedule(2, (1, 4, 16), 6, seed) == slots, "the seed gives the order again"
