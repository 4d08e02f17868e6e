"""What an --slo verdict is a figure of, planted on synthetic searches: a search
that never held counts against its build (it cannot make a ratio verdict
better), the interval reaches the rates that missed, the printed figure and
interval name the share held and the coverage the order statistics give,
and on a simulated server whose probes pass with a probability that falls
smoothly with the rate, the interval covers the rate it names."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import norm

from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.capacity.slo_result import Probe, Search, SloResult
from echomq_bench.capacity.slo_search import all_of, held_share, in_a_row, search_rate
from echomq_bench.capacity.slo_spec import parse_slo
from echomq_bench.capacity.slo_stats import search_interval
from echomq_bench.records.headlines import headlines
from echomq_bench.records.kinds.capacity import SloEntry
from echomq_bench.records.record import read_record
from echomq_bench.report import record_text
from echomq_bench.report.text import WIDTH

SLO = parse_slo("claim p99 <= 5ms")


def _probe(build: str, search: int, index: int, step: int, attempt: int, rate: float | None,
           passed: bool | None) -> Probe:
    return Probe(build=build, search=search, index=index, step=step, attempt=attempt,
                 phase="closed loop" if rate is None else "bisect", rate=rate, achieved=rate or 30_000.0,
                 cycles_per_s=rate or 30_000.0, p50_ms=0.5, quantile_ms=3.0 if passed else 9.0, timeouts=0,
                 passed=passed, why=() if passed in (True, None) else ("p99 > 5ms",),
                 bound="server" if passed is False else "neither")


def _search(build: str, search: int, rate: float | None, in_a_row: int = 1) -> Search:
    """A search that held `rate` with `in_a_row` probes and missed 1.5% above it on the second probe
    there; or, with `rate` None, one that missed at every rate down to 312.5/s."""
    probes = [_probe(build, search, 0, 0, 1, None, None)]
    if rate is None:
        probes.append(_probe(build, search, 1, 1, 1, 312.5, False))
        return Search(build, f"{build} 7.0.15", search, 1, None, 312.5, False, 20_000.0, tuple(probes))
    probes += [_probe(build, search, len(probes) + i, 1, i + 1, rate, True) for i in range(in_a_row)]
    above = [True, False][: min(2, in_a_row)] if in_a_row > 1 else [False]
    probes += [_probe(build, search, len(probes) + i, 2, i + 1, rate * 1.015, ok) for i, ok in enumerate(above)]
    return Search(build, f"{build} 7.0.15", search, 1, rate, rate * 1.015, True, 30_000.0, tuple(probes))


def _result(rates: dict[str, list[float | None]], in_a_row: int = 1) -> SloResult:
    searches = [_search(b, i + 1, r, in_a_row) for b, rs in rates.items() for i, r in enumerate(rs)]
    return SloResult(SLO, CapacitySettings(duration_s=2.0), tuple(rates), tuple(searches), 0.02, "rotated",
                     {b: {"name": b, "version": f"{b} 7.0.15"} for b in rates}, holds_in_a_row=in_a_row)


# --------------------------------------------------------------------------
# A search that never held is a result, not a gap

BASE = [20_000.0, 20_400.0, 19_700.0, 20_100.0, 19_900.0, 20_300.0, 20_050.0]
BETTER = [r * f for r, f in zip(BASE, (1.10, 1.11, 1.09, 1.10, 1.12, 1.10, 1.09))]


def test_a_search_the_better_build_never_held_takes_its_faster_verdict_away() -> None:
    # valkey holds 10% more than redis in six repetitions and no rate at all in the seventh:
    # dropped, the six would say "faster"; counted, the build that failed cannot be faster for it.
    result = _result({"redis": BASE, "valkey": [*BETTER[:6], None]})
    v = result.verdict("valkey", "redis")
    assert v.verdict in ("inconclusive", "slower") and v.n == 7
    entry = result.compared({"valkey": "redis"}).builds["valkey"]
    assert entry.verdict == "inconclusive (valkey never held in 1 of 7)"
    assert entry.never_held == 1 and entry.search_ratios is not None and len(entry.search_ratios) == 7


def test_a_search_the_worse_build_never_held_keeps_it_slower_and_its_ratio_no_higher() -> None:
    worse = [r * f for r, f in zip(BASE, (0.90, 0.91, 0.89, 0.90, 0.92, 0.90, 0.89))]
    result = _result({"redis": BASE, "valkey": [*worse[:6], None]})
    v = result.verdict("valkey", "redis")
    held = [w / b for w, b in zip(worse[:6], BASE)]
    assert v.verdict == "slower" and v.n == 7
    assert v.ratio < math.exp(sum(map(math.log, held)) / 6)   # the failure counts, as its worst repetition
    assert result.ratios("valkey", "redis").ratios[-1] == pytest.approx(min(held))


def test_a_search_the_baseline_never_held_takes_the_slower_verdict_away() -> None:
    slower = [r * 0.9 for r in BASE]
    result = _result({"redis": [*BASE[:6], None], "valkey": slower})
    v = result.verdict("valkey", "redis")
    assert v.verdict in ("inconclusive", "faster") and v.n == 7
    entry = result.compared({"valkey": "redis"}).builds["valkey"]
    assert entry.verdict == "inconclusive (redis never held in 1 of 7)"


def test_a_build_that_never_held_in_any_search_is_slower_not_unjudged() -> None:
    result = _result({"redis": BASE[:6], "valkey": [None] * 6})
    v = result.verdict("valkey", "redis")
    assert v.verdict == "slower" and v.n == 6 and v.ratio < 312.5 / 19_000.0
    entry = result.compared({"valkey": "redis"}).builds["valkey"]
    assert entry.verdict == "slower (valkey never held in 6 of 6)"
    assert entry.rate_per_s == 0.0 and entry.interval == (0.0, 312.5)


def test_a_repetition_neither_build_held_has_no_ratio_and_is_counted() -> None:
    result = _result({"redis": [*BASE[:6], None], "valkey": [*(r * 0.9 for r in BASE[:6]), None]})
    rates = result.ratios("valkey", "redis")
    assert len(rates.ratios) == 6 and rates.neither_held == 1 and rates.repetitions == 7
    v = result.verdict("valkey", "redis")
    assert v.verdict == "slower" and v.excluded == 1
    assert result.compared({"valkey": "redis"}).builds["valkey"].verdict == "slower (neither held in 1, no ratio)"


# --------------------------------------------------------------------------
# The interval and the figure, named for what they are


def test_the_interval_reaches_the_rates_that_missed() -> None:
    # Six searches that agree to within the resolution: the answer lies between the rate held and
    # the rate that missed, so [min, max] of the rates held alone would sit wholly under it.
    m = search_interval([(20_000.0, 20_300.0)] * 6)
    assert m.interval == (20_000.0, 20_300.0) and m.coverage == pytest.approx(1 - 2 / 64)
    assert search_interval([(20_000.0, None)] * 6).interval == (20_000.0, math.inf)
    nine = search_interval([(1000.0 * i, 1010.0 * i) for i in range(1, 10)])
    assert nine.ranks == (2, 8) and nine.interval == (2000.0, 8080.0) and nine.coverage == pytest.approx(0.9609375)


def test_the_printed_figure_and_interval_say_what_they_are(tmp_path: Path) -> None:
    from echomq_bench.commands.capacity import write_slo

    for m, figure in ((1, "the rate a 2 s probe holds half the time"),
                      (14, "the rate a 2 s probe holds 95% of the time")):
        out = write_slo(tmp_path / str(m), _result({"redis": BASE[:6]}, m))
        text = " ".join(record_text(out).split())
        assert f"Rate at claim p99 <= 5ms per build: {figure}" in text
        assert "(96.9%)" in text and "95% interval" not in text and "96.9% for the 6 searches here" in text
        block = json.loads((out / "summary.json").read_text())["slo"]
        assert block["figure"] == figure and block["holds_in_a_row"] == m
        assert block["held"] == pytest.approx(0.5 ** (1 / m))
        assert all(len(line) <= WIDTH for line in record_text(out).splitlines())
        # The history names the figure by its window and share: a rate at one says nothing of another.
        share = 50 if m == 1 else 95
        assert {h.metric for h in headlines(read_record(out))} == {
            f"capacity.slo.claim_p99_le_5ms.2s_held_{share}.rate_per_s"}
    text = " ".join(record_text(tmp_path / "14").split())
    assert "held 14 of 14" in text and "missed on 2 of 14: p99 > 5ms" in text
    assert "14 probes in a row at it hold the target" in text


def test_an_entry_written_before_the_interval_was_renamed_still_reads() -> None:
    old = SloEntry.from_record({"rate_per_s": 20_100.0, "ci95": [19_500.0, 21_000.0], "coverage": 0.96875, "n": 6})
    assert old.interval == (19_500.0, 21_000.0)


# --------------------------------------------------------------------------
# Probes in a row


@given(held=st.floats(0.5, 0.99))
def test_in_a_row_is_the_fewest_probes_that_reach_the_share(held: float) -> None:
    m = in_a_row(held)
    assert held_share(m) >= held - 1e-12
    assert m == 1 or held_share(m - 1) < held


def test_all_of_stops_at_the_first_probe_that_misses() -> None:
    seen: list[tuple[float, int]] = []
    answers = iter([True, True, False, True])

    def once(rate: float, phase: str, attempt: int) -> bool:
        seen.append((rate, attempt))
        return next(answers)

    rule = all_of(once, 3)
    assert rule(100.0, "bisect") is False and seen == [(100.0, 1), (100.0, 2), (100.0, 3)]
    assert in_a_row(0.5) == 1 and in_a_row(0.95) == 14 and in_a_row(0.99) == 69


def _simulated_coverage(probes_in_a_row: int, runs: int, seed: int) -> float:
    """How often the interval of 6 simulated searches covers the rate at which one probe holds with
    the share `held_share(probes_in_a_row)`: a probe holds with probability
    Phi((ln r50 - ln rate) / width), falling smoothly with the rate."""
    rng = random.Random(seed)
    width, r50 = 0.05, 50_000.0
    truth = r50 * math.exp(-width * float(norm.ppf(held_share(probes_in_a_row))))

    def once(rate: float, phase: str, attempt: int) -> bool:
        return rng.random() < 0.5 * math.erfc((math.log(rate) - math.log(r50)) / (width * math.sqrt(2)))

    covered = 0
    for _ in range(runs):
        found = [search_rate(all_of(once, probes_in_a_row), r50 * 1.12) for _ in range(6)]
        m = search_interval([(f.rate, f.failed_above) for f in found])
        assert m.interval is not None and m.coverage == pytest.approx(1 - 2 / 64)
        covered += m.interval[0] <= truth <= m.interval[1]
    return covered / runs


@pytest.mark.parametrize("held", [0.5, 0.95])
def test_on_a_simulated_server_the_interval_covers_the_rate_it_names(held: float) -> None:
    assert _simulated_coverage(in_a_row(held), runs=120, seed=3) >= 0.9
