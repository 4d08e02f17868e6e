"""The one statistics home (measurement.stats and measurement.intervals), checked against scipy,
the standard library and textbook values."""

from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest
from scipy import stats as st

from echomq_bench.measurement.intervals import (MIN_TRIALS, binom_cdf, median_interval, order_coverage, order_ranks,
                                                prediction_bound, quantile_ci, rate_ci, t_half_width, wilson)
from echomq_bench.measurement.stats import (bootstrap_ci, bootstrap_sd, median, nearest_rank, quantile, quartiles,
                                            quantiles, round_ratio, span, spread)

SAMPLES = [[3.0], [2.0, 1.0], [5, 1, 4, 2, 3], [0.3, 0.1, 0.7, 0.2, 0.9, 0.4],
           *(np.random.default_rng(n).lognormal(size=n).tolist() for n in (7, 20, 101))]


@pytest.mark.parametrize("xs", SAMPLES, ids=lambda xs: f"n{len(xs)}")
def test_median_is_the_standard_librarys(xs: list[float]) -> None:
    assert median(xs) == statistics.median(xs)
    assert median(iter(xs)) == statistics.median(xs)
    assert median(np.asarray(xs)) == statistics.median(xs)


def test_median_of_nothing_is_nan() -> None:
    assert math.isnan(median([]))


def test_spread_and_span_as_records_hold_them() -> None:
    assert span([4, 1, 9, 2]) == (1.0, 9.0)
    assert spread([4, 1, 9, 2]) == {"median": 3.0, "min": 1.0, "max": 9.0}
    with pytest.raises(ValueError):
        span([])


@pytest.mark.parametrize("xs", SAMPLES, ids=lambda xs: f"n{len(xs)}")
def test_quantile_is_numpys_linear_quantile(xs: list[float]) -> None:
    for q in (0.0, 0.25, 0.5, 0.99, 1.0):
        assert quantile(xs, q) == float(np.quantile(xs, q))
    assert math.isnan(quantile([], 0.5))


@pytest.mark.parametrize("xs", SAMPLES, ids=lambda xs: f"n{len(xs)}")
def test_linear_quartiles_are_numpys_percentiles(xs: list[float]) -> None:
    q1, q3 = np.percentile(xs, [25, 75])
    assert quartiles(xs) == (float(q1), float(q3))


@pytest.mark.parametrize("n", [4, 5, 6, 7, 21, 22])
def test_weibull_quartiles_are_the_standard_librarys_exclusive_quartiles(n: int) -> None:
    rng = random.Random(n)
    xs = sorted(rng.uniform(0.5, 3.0) for _ in range(n))
    q1, _, q3 = statistics.quantiles(xs, n=4)
    assert quartiles(xs, method="weibull") == pytest.approx((q1, q3), rel=1e-12)


def test_quartiles_of_one_value_and_of_none() -> None:
    assert quartiles([2.5]) == (2.5, 2.5)
    assert all(math.isnan(v) for v in quartiles([]))


def test_nearest_rank_is_a_measured_value() -> None:
    assert nearest_rank([3.0, 1.0, 2.0], 0.5) == 2.0 and nearest_rank([3.0, 1.0, 2.0], 0.99) == 3.0
    assert nearest_rank([10.0, 20.0, 30.0, 40.0], 0.5) == 20.0
    assert nearest_rank([], 0.5) is None


def test_round_ratio_is_the_median_over_shared_rounds() -> None:
    assert round_ratio({1: 10.0, 2: 10.0, 3: 10.0}, {1: 11.0, 2: 12.0, 4: 50.0}) == pytest.approx(1.15)
    assert round_ratio({1: 10.0}, {2: 10.0}) is None


def test_bootstrap_of_the_median_brackets_it() -> None:
    rng = random.Random(3)
    xs = [rng.gauss(1.0, 0.1) for _ in range(40)]
    value, lo, hi = bootstrap_ci(xs, n_boot=2000)
    assert value == median(xs) and lo < value < hi


# ---------------------------------------------------------------- intervals


@pytest.mark.parametrize("df", [1, 2, 5, 11, 13, 25, 40, 200])
def test_t_half_width_is_scipys_t_interval(df: int) -> None:
    xs = np.random.default_rng(df).normal(10.0, 2.0, size=df + 1)
    lo, hi = st.t.interval(0.95, df, loc=xs.mean(), scale=st.sem(xs))
    assert t_half_width(xs) == pytest.approx((hi - lo) / 2, rel=1e-12)
    assert t_half_width(xs[:1]) == math.inf


def test_rate_interval_is_the_t_interval_of_the_batch_rates() -> None:
    # Twelve batches (11 degrees of freedom): the t point is scipy's 2.2010, where the
    # former 14-entry table rounded up to the next tabulated df (12) and read 2.179.
    counts = [10, 12, 8, 10, 11, 9, 13, 7, 10, 12, 9, 9]
    mean, lo, hi = rate_ci(counts, 2.0)
    rates = np.asarray(counts) / 2.0
    want = st.t.interval(0.95, len(counts) - 1, loc=rates.mean(), scale=st.sem(rates))
    assert mean == 5.0 and (lo, hi) == pytest.approx(want, rel=1e-12)
    assert (hi - mean) / st.sem(rates) == pytest.approx(2.2010, abs=1e-4)
    assert rate_ci([5], 1.0) == (5.0, -math.inf, math.inf)


def test_prediction_bound_is_the_one_sided_t_bound_of_one_more_draw() -> None:
    assert prediction_bound(2.0, 5, 0.999) == pytest.approx(st.t.ppf(0.999, 4) * 2.0 * math.sqrt(1.2))
    assert prediction_bound(2.0, 5, 0.999) == pytest.approx(7.173 * 2.0 * math.sqrt(1.2), rel=1e-3)  # t table, df 4
    with pytest.raises(ValueError):
        prediction_bound(1.0, 1, 0.999)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (5, 10), (10, 10), (3, 1000), (0, 10_000), (17, 40)])
def test_wilson_is_scipys_wilson_interval(k: int, n: int) -> None:
    ci = st.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert wilson(0, 0) == (0.0, 1.0)


def test_binomial_cdf_is_the_exact_sum() -> None:
    assert binom_cdf(5, 10, 0.5) == pytest.approx(sum(math.comb(10, i) for i in range(6)) / 1024, rel=1e-12)
    assert binom_cdf(-1, 10, 0.3) == 0.0 and binom_cdf(10, 10, 0.3) == 1.0


def _brute_ranks(n: int, q: float, conf: float) -> tuple[int | None, int | None]:
    """The order-statistic ranks by their definition, from exact binomial sums."""
    alpha = (1 - conf) / 2
    cdf = [sum(math.comb(n, i) * q ** i * (1 - q) ** (n - i) for i in range(j + 1)) for j in range(n)]
    lows = [r for r in range(1, n + 1) if cdf[r - 1] <= alpha]
    highs = [u for u in range(1, n + 1) if cdf[u - 1] >= 1 - alpha]
    return (max(lows) if lows else None), (min(highs) if highs else None)


@pytest.mark.parametrize("n", [1, 5, 6, 9, 20, 50, 100, 137])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_order_ranks_match_their_definition(n: int, q: float) -> None:
    assert order_ranks(n, q, 0.95) == _brute_ranks(n, q, 0.95)


def test_quantile_interval_known_ranks() -> None:
    assert quantile_ci(list(range(1, 101)), 0.5) == (40, 61)    # the textbook ranks for n = 100
    assert quantile_ci(list(range(50)), 0.99)[1] == math.inf     # 50 draws cannot bound a p99 from above
    assert quantile_ci([], 0.5) == (-math.inf, math.inf)


def test_a_large_sample_takes_the_exact_ranks() -> None:
    n = 40_000
    lo, hi = order_ranks(n, 0.99, 0.95)
    assert lo is not None and hi is not None
    assert st.binom.cdf(lo - 1, n, 0.99) <= 0.025 < st.binom.cdf(lo, n, 0.99)
    assert st.binom.cdf(hi - 2, n, 0.99) < 0.975 <= st.binom.cdf(hi - 1, n, 0.99)


@pytest.mark.parametrize("n", range(1, 40))
def test_median_interval_is_the_narrowest_symmetric_pair_of_at_least_95_percent(n: int) -> None:
    values = [float(v) for v in range(n)]
    m = median_interval(values, min_n=1)
    exact = {k: 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n for k in range(1, (n + 1) // 2 + 1)}
    best = max((k for k, c in exact.items() if c >= 0.95), default=None)
    assert m.median == statistics.median(values)
    if best is None:
        assert m.ci is None and m.ranks is None
    else:
        assert m.ranks == (best, n - best + 1) and m.ci == (values[best - 1], values[n - best])
        assert m.coverage == pytest.approx(exact[best], abs=1e-12) == pytest.approx(order_coverage(n, best))


def test_median_interval_needs_min_trials() -> None:
    assert MIN_TRIALS == 6
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]).ci is None            # 93.8% at best
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).ci == (1.0, 6.0)  # 96.9%


def test_bootstrap_sd_resamples_groups_with_replacement() -> None:
    groups = [[1.0, 2.0], [4.0], [3.0, 3.0, 9.0], [5.0]]

    def mean_of(pick: np.ndarray) -> float:
        return float(np.mean(np.concatenate([groups[j] for j in pick])))

    rng = np.random.default_rng(7)
    by_hand = np.nanstd([mean_of(rng.integers(0, 4, 4)) for _ in range(300)])
    assert bootstrap_sd(mean_of, 4, 300, seed=7) == by_hand
    assert bootstrap_sd(lambda pick: math.nan if pick[0] == 0 else 1.0, 4, 100) == 0.0   # undefined resamples left out


def test_quantiles_at_many_points_are_numpys() -> None:
    xs = np.random.default_rng(4).exponential(size=500)
    at = np.linspace(0.005, 0.995, 40)
    assert np.array_equal(quantiles(xs, at), np.quantile(xs, at))
    assert np.isnan(quantiles([], [0.1, 0.9])).all()
