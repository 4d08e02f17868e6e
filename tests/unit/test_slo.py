"""--slo without a server: the target's spellings, the bisection as a pure
function of a pass/fail rule, the order-statistic interval of a median, the
probe's pass rule, the pairing of searches between builds, and what the
record of a search prints."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.capacity.slo import judge_probe
from echomq_bench.capacity.slo_result import Probe, Search, SloResult
from echomq_bench.capacity.slo_search import search_rate
from echomq_bench.measurement.intervals import median_interval, order_coverage
from echomq_bench.capacity.slo_spec import SloSpec, parse_slo, slo_option
from echomq_bench.measurement.latency import Latency
from echomq_bench.records.headlines import headlines
from echomq_bench.records.record import read_record
from echomq_bench.report import record_text
from echomq_bench.report.text import WIDTH

# --------------------------------------------------------------------------
# The target


@pytest.mark.parametrize("text, quantile, limit_ms, shown", [
    ("claim p99 <= 5ms", 99.0, 5.0, "claim p99 <= 5ms"),
    ("claim p99<=5ms", 99.0, 5.0, "claim p99 <= 5ms"),
    ("p99.9 <= 800us", 99.9, 0.8, "claim p99.9 <= 800us"),
    ("p99.9<=800µs", 99.9, 0.8, "claim p99.9 <= 800µs"),
    ("  CLAIM P50 <= 1.5 s ", 50.0, 1500.0, "claim p50 <= 1.5s"),
    ("p90 <= .5ms", 90.0, 0.5, "claim p90 <= 0.5ms"),
    ("claim p99 <= 2s", 99.0, 2000.0, "claim p99 <= 2s"),
])
def test_a_target_parses_in_every_spelling(text: str, quantile: float, limit_ms: float, shown: str) -> None:
    slo = parse_slo(text)
    assert (slo.verb, slo.quantile, slo.text) == ("claim", quantile, shown)
    assert slo.limit_ms == pytest.approx(limit_ms)


@pytest.mark.parametrize("text, fragment", [
    ("", "the target is empty"),
    ("   ", "the target is empty"),
    ("claim p99", "has no '<='"),
    ("claim p99 < 5ms", "written '<=' (not '<')"),
    ("claim p99 >= 5ms", "written '<=' (not '>=')"),
    ("claim p99 = 5ms", "written '<=' (not '=')"),
    ("complete p99 <= 5ms", "verb 'complete': only claim's latency is timed from its intended start"),
    ("cycle p99 <= 5ms", "verb 'cycle'"),
    ("p100 <= 5ms", "quantile 'p100' is outside p50..p99.9"),
    ("p99.99 <= 5ms", "quantile 'p99.99' is outside p50..p99.9"),
    ("p10 <= 5ms", "quantile 'p10' is outside p50..p99.9"),
    ("99 <= 5ms", "bad quantile '99'"),
    ("pmax <= 5ms", "bad quantile 'pmax'"),
    ("claim p99 <= 5", "limit '5' has no unit"),
    ("claim p99 <= 5m", "unknown unit 'm'"),
    ("claim p99 <= 5ns", "unknown unit 'ns'"),
    ("claim p99 <= 0ms", "must be more than 0"),
    ("claim p99 <= fast", "bad limit 'fast'"),
    ("claim p99 <= -5ms", "bad limit '-5ms'"),
    ("claim p99 <=", "bad limit ''"),
    ("the claim p99 <= 5ms", "want [claim] pNN before '<='"),
])
def test_a_bad_target_is_refused_naming_what_is_wrong(text: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_slo(text)
    assert fragment in str(info.value)
    with pytest.raises(argparse.ArgumentTypeError, match=".+"):
        slo_option(text)


def test_a_target_names_its_metric_and_round_trips_as_json() -> None:
    slo = parse_slo("p99.9 <= 800µs")
    assert slo.key == "claim_p99.9_le_800us"
    assert slo.to_dict() == {"text": "claim p99.9 <= 800µs", "key": "claim_p99.9_le_800us", "verb": "claim",
                             "quantile": 99.9, "name": "p99.9", "limit_ms": 0.8}


# --------------------------------------------------------------------------
# The bisection, as a pure function of a pass/fail rule


def _below(threshold: float) -> Any:
    return lambda rate, phase: rate <= threshold


@pytest.mark.parametrize("threshold, upper", [
    (1234.0, 5000.0),     # below the upper rate: halved, then bisected
    (4999.0, 5000.0),     # just below it
    (5000.0, 5000.0),     # at it: passes, the double fails
    (12_000.0, 5000.0),   # above it: doubled, then bisected
    (100.0, 5000.0),      # far below: halved several times
])
def test_the_search_finds_the_threshold_within_its_resolution(threshold: float, upper: float) -> None:
    found = search_rate(_below(threshold), upper, resolution=0.02)
    assert found.rate is not None and found.failed_above is not None
    assert found.rate <= threshold < found.failed_above <= found.rate * 1.02
    assert found.rate >= threshold / 1.02
    assert found.resolved
    assert found.steps[0].rate == upper and found.steps[0].phase == "bracket"


def test_the_search_says_when_nothing_held_and_when_everything_did() -> None:
    none = search_rate(lambda rate, phase: False, 6400.0)
    assert none.rate is None and none.failed_above == pytest.approx(100.0)   # halved down to 1/64
    assert [s.rate for s in none.steps] == [6400.0 / 2 ** k for k in range(7)] and not none.resolved
    every = search_rate(lambda rate, phase: True, 1000.0)
    assert every.rate == 8000.0 and every.failed_above is None and not every.resolved
    assert [s.rate for s in every.steps] == [1000.0, 2000.0, 4000.0, 8000.0]


@settings(max_examples=200, deadline=None)
@given(threshold=st.floats(1.0, 1e6), upper=st.floats(100.0, 1e6), resolution=st.floats(0.005, 0.5))
def test_any_threshold_in_reach_is_found_within_the_resolution(threshold: float, upper: float,
                                                               resolution: float) -> None:
    found = search_rate(_below(threshold), upper, resolution=resolution)
    if threshold < upper / 64:
        assert found.rate is None
    elif threshold >= upper * 8:
        assert found.rate == upper * 8 and found.failed_above is None
    else:
        assert found.rate is not None and found.failed_above is not None
        assert found.rate <= threshold < found.failed_above <= found.rate * (1 + resolution) * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(outcomes=st.lists(st.booleans(), min_size=1, max_size=60))
def test_with_any_noise_the_rate_is_the_highest_pass_and_the_next_probe_up_failed(outcomes: list[bool]) -> None:
    # Probes that pass or fail in no order by rate: the answer is still the highest rate that
    # passed, and the probe just above it (the lowest rate tried above it) failed.
    answers = iter(outcomes + [False] * 100)
    found = search_rate(lambda rate, phase: next(answers), 1000.0, resolution=0.05)
    passed = [s.rate for s in found.steps if s.passed]
    assert found.rate == (max(passed) if passed else None)
    above = [s for s in found.steps if found.rate is None or s.rate > found.rate]
    if found.failed_above is not None:
        assert min(above, key=lambda s: s.rate).rate == found.failed_above
    assert all(not s.passed for s in above)


def test_the_search_refuses_a_rate_it_cannot_start_from() -> None:
    for upper in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="upper rate"):
            search_rate(_below(10.0), upper)
    with pytest.raises(ValueError, match="resolution"):
        search_rate(_below(10.0), 100.0, resolution=0.0)


# --------------------------------------------------------------------------
# The interval of a median from order statistics


def test_coverage_of_order_statistics_is_the_binomial_one() -> None:
    assert order_coverage(6, 1) == pytest.approx(1 - 2 / 64)        # 96.9%
    assert order_coverage(5, 1) == pytest.approx(1 - 2 / 32)        # 93.8%: below 95%
    assert order_coverage(9, 2) == pytest.approx(1 - 2 * 10 / 512)  # 96.1%
    with pytest.raises(ValueError):
        order_coverage(6, 4)


@pytest.mark.parametrize("n, ranks", [(6, (1, 6)), (7, (1, 7)), (8, (1, 8)), (9, (2, 8)), (10, (2, 9)),
                                      (12, (3, 10)), (20, (6, 15))])
def test_the_interval_is_the_narrowest_that_covers_95_percent(n: int, ranks: tuple[int, int]) -> None:
    values = [float(10 * (i + 1)) for i in reversed(range(n))]   # given in any order
    m = median_interval(values)
    assert m.ranks == ranks and m.ci == (10.0 * ranks[0], 10.0 * ranks[1])
    assert m.coverage is not None and m.coverage >= 0.95 and m.text == ""
    k = ranks[0]
    assert k + 1 > (n + 1) // 2 or order_coverage(n, k + 1) < 0.95   # one rank narrower falls short
    assert m.median == pytest.approx(np.median(values))


@pytest.mark.parametrize("n", [1, 2, 5])
def test_fewer_than_six_searches_give_no_interval(n: int) -> None:
    m = median_interval([100.0 + i for i in range(n)])
    assert m.ci is None and m.coverage is None
    assert m.text == f"inconclusive ({n} search{'' if n == 1 else 'es'})"


# --------------------------------------------------------------------------
# A probe's pass rule


def _run(latencies_ms: list[float], *, requested: float = 1000.0, achieved: float = 1000.0, timeouts: int = 0,
         errors: int = 0, scheduled: int = 1000, sent: int = 1000) -> Any:
    hist = Latency()
    for ms in latencies_ms:
        hist.record_ms(ms)
    account = {"requested_per_s": requested, "achieved_per_s": achieved, "timeouts": timeouts,
               "scheduled": scheduled, "sent": sent}
    return SimpleNamespace(open_loop=account, latency={"claim": hist}, settings=CapacitySettings(rate=requested),
                           counts={"errors": errors})


def test_a_probe_holds_when_its_quantile_and_its_schedule_hold() -> None:
    slo = parse_slo("claim p99 <= 5ms")
    quantile, why = judge_probe(_run([1.0] * 985 + [4.0] * 15), slo)
    assert why == [] and quantile == pytest.approx(4.0, rel=0.01)
    assert judge_probe(_run([1.0] * 980 + [9.0] * 20), slo)[1] == ["p99 > 5ms"]


def test_a_probe_short_of_its_schedule_fails_however_fast_its_claims() -> None:
    slo = parse_slo("claim p99 <= 5ms")
    _, why = judge_probe(_run([1.0] * 1000, achieved=979.0), slo)
    assert why == ["97% of schedule"]          # 97.9% is rounded down, never read as 98%
    assert judge_probe(_run([1.0] * 1000, achieved=980.0), slo)[1] == []
    assert judge_probe(_run([1.0] * 1000, sent=990), slo)[1] == ["10 due unsent"]
    assert judge_probe(_run([1.0] * 1000, errors=3), slo)[1] == ["3 errors"]


def test_claims_with_no_reply_count_at_the_reply_timeout() -> None:
    slo = parse_slo("claim p99 <= 5ms")
    # 995 fast answers and 5 lost: p99 is still fast; 20 lost push it to the 5 s reply timeout.
    quantile, why = judge_probe(_run([1.0] * 995, timeouts=5), slo)
    assert quantile < 5.0 and why == ["5 no reply"]
    quantile, why = judge_probe(_run([1.0] * 980, timeouts=20), slo)
    assert quantile == pytest.approx(5000.0, rel=0.01) and why == ["p99 > 5ms", "20 no reply"]


# --------------------------------------------------------------------------
# Searches paired between builds, and the record they make

SLO = parse_slo("claim p99 <= 5ms")


def _probe(build: str, search: int, index: int, rate: float | None, passed: bool | None, **kw: Any) -> Probe:
    return Probe(build=build, search=search, index=index, step=index, attempt=1,
                 phase="closed loop" if rate is None else "bisect",
                 rate=rate, achieved=rate or 30_000.0, cycles_per_s=rate or 30_000.0, p50_ms=0.5,
                 quantile_ms=3.0 if passed else 9.0, timeouts=0, passed=passed,
                 why=() if passed in (True, None) else ("p99 > 5ms",), bound="server" if passed is False else "neither",
                 server=f"redis://127.0.0.1:{6000 + 100 * search + index}/0", **kw)


def _search(build: str, search: int, rate: float, order: int = 1) -> Search:
    probes = (_probe(build, search, 0, None, None), _probe(build, search, 1, rate * 1.5, False),
              _probe(build, search, 2, rate, True), _probe(build, search, 3, rate * 1.015, False))
    return Search(build, f"{build} 7.0.15", search, order, rate, rate * 1.015, True, 30_000.0, probes,
                  {"name": build, "version": f"{build} 7.0.15", "allocator": "jemalloc-5.3.0"})


def _result(rates: dict[str, list[float]]) -> SloResult:
    searches = [_search(b, i + 1, r) for b, rs in rates.items() for i, r in enumerate(rs)]
    return SloResult(SLO, CapacitySettings(duration_s=2.0), tuple(rates), tuple(searches), 0.02, "rotated",
                     {b: {"name": b, "version": f"{b} 7.0.15"} for b in rates})


def test_searches_pair_by_repetition_and_are_judged_as_compare_judges_trials() -> None:
    base = [20_000.0, 21_000.0, 19_500.0, 20_500.0, 20_200.0, 19_800.0]
    result = _result({"redis": base, "valkey": [r * 0.9 for r in base]})
    rates = result.ratios("valkey", "redis")
    assert rates.ratios == pytest.approx([0.9] * 6) and rates.neither_held == 0 and rates.never_held == 0
    v = result.verdict("valkey", "redis")
    assert v.verdict == "slower" and v.n == 6 and v.ratio == pytest.approx(0.9)
    block = result.compared({"redis": "redis", "valkey": "redis"})
    assert block.builds["redis"].verdict == "baseline"
    assert block.builds["valkey"].verdict == "slower" and block.builds["valkey"].baseline == "redis"
    assert block.builds["valkey"].rate_per_s == pytest.approx(np.median(base) * 0.9)
    assert block.ratio_method is not None and result.block().ratio_method is None
    few = _result({"redis": base[:3], "valkey": base[:3]}).compared({"valkey": "redis"})
    assert few.builds["valkey"].verdict == "inconclusive (3 searches)"
    detail = few.builds["valkey"].verdict_detail
    assert detail is not None and detail.label().endswith("] inconclusive (3 searches)")


def test_a_search_where_nothing_held_is_a_zero_rate_and_a_ratio_no_better_than_its_worst() -> None:
    result = _result({"redis": [20_000.0] * 6, "valkey": [18_000.0] * 6})
    nothing = replace(result.searches[-1], rate=None, failed_above=312.5, resolved=False)
    result = replace(result, searches=result.searches[:-1] + (nothing,))
    rates = result.ratios("valkey", "redis")
    assert rates.ratios == pytest.approx([0.9] * 6) and rates.never_held == 1
    assert result.compared({"valkey": "redis"}).builds["valkey"].verdict == "slower (valkey never held in 1 of 6)"
    entry = result.entry("valkey")
    assert entry.search_rates[-1] is None and entry.never_held == 1
    # The zero counts as a rate; the interval runs to the highest rate that missed.
    assert entry.interval == (0.0, 18_000.0 * 1.015) and entry.rate_per_s == 18_000.0
    assert "search 6: no rate down to" in " ".join(entry.warnings)


def test_an_slo_record_prints_its_rate_interval_and_every_probe(tmp_path: Path) -> None:
    from echomq_bench.commands.capacity import write_slo

    result = _result({"redis": [20_000.0, 21_000.0, 19_500.0, 20_500.0, 20_200.0, 19_800.0]})
    out = write_slo(tmp_path / "slo", result, argv=["echomq-bench", "capacity", "--slo", "claim p99 <= 5ms"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "capacity" and summary["slo"]["target"]["text"] == "claim p99 <= 5ms"
    entry = summary["slo"]["builds"]["redis"]
    assert entry["interval"] == [19_500.0, pytest.approx(21_315.0)] and entry["n"] == 6
    text = record_text(out)
    assert all(len(line) <= WIDTH for line in text.splitlines())
    row = next(line.split() for line in text.splitlines() if line.startswith("redis  redis"))
    assert row[:6] == ["redis", "redis", "7.0.15", "20,100", "19,500..21,315", "(96.9%)"]
    assert "Rate at claim p99 <= 5ms" in text
    probes = [line.split() for line in text.splitlines() if line.startswith("redis ") and "bisect" in line]
    assert len(probes) == 18 and any(p[-1] == "held" for p in probes)
    # The results history keeps the median rate, named by its target.
    figures = {h.metric: h.value for h in headlines(read_record(out))}
    assert figures == {"capacity.slo.claim_p99_le_5ms.2s_held_50.rate_per_s": pytest.approx(20_100.0)}


def test_the_spec_type_is_what_the_parser_keeps() -> None:
    from echomq_bench.cli import build_parser

    argv = ["capacity", "--slo", "claim p99<=5ms", "--slo-trials", "3", "--slo-resolution", "5%"]
    args = build_parser(argv).parse_args(argv)
    assert args.slo == SloSpec("claim", 99.0, 5.0, "5ms") and args.slo_trials == 3
    assert args.slo_resolution == pytest.approx(0.05)
