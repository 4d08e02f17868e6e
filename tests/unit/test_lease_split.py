"""The model fitted on the first half of the window and compared with the
second, on constructed data whose figures are known exactly."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest

from echomq_bench.lease import SweepSettings
from echomq_bench.lease.analysis import Interval, MassResult, agreement, analyse, held_out_figures
from echomq_bench.lease.records import LeaseData, ReapCost, SweepData
from echomq_bench.lease.report import recommend_for, write_run
from echomq_bench.lease.split import ModelSplit, fit_part, halves, model_split, part, predicted_part
from echomq_bench.formatting import fmt_ms
from echomq_bench.lease.blocks import wilson_bounds
from echomq_bench.report import build_report, record_text
from tests.helpers import ROOT

WINDOW = (100.0, 110.0)  # perf_counter seconds: a 10 s window, halves at 105
LABEL = ("held out within one run: fitted on redis window 0-5 s, judged on redis window 5-10 s "
         "(the same processes, server and machine, not a separate run)")
# Work is always 100 ms; the pump reaps every 50 ms; the lease is 100 ms.
SETTINGS = SweepSettings(work="const:100ms", leases_ms=(100.0,), reap_every_ms=50.0, duration_s=10.0,
                         mass_crash=0)
# Times are multiples of 1/64 s, so every overhead and gap below is exact in binary.
FIT_LIVE = [101.0, 102.0, 103.0, 104.0]                 # overhead 25 ms each, all accepted
PREDICTED_LIVE = [105.0 + i / 4 for i in range(12)]     # overhead 75 ms each, the first 4 refused
FIT_CRASHES = [101.5, 102.5]                            # crash gap 12.5 ms each
PREDICTED_CRASHES = [106.0, 106.5, 107.0, 107.5, 108.0, 108.5]  # crash gap 75 ms; recovery 2/64..7/64 s


def _live() -> dict[str, np.ndarray]:
    t0 = np.array(FIT_LIVE + PREDICTED_LIVE)
    fit = t0 < 105.0
    w = np.where(fit, 100.0, 175.0)
    done = t0 + np.where(fit, 0.125, 0.25)   # claim -> complete: 125 ms (work 100) or 250 ms (work 175)
    ok = np.array([True] * 4 + [False] * 4 + [True] * 8)
    return {"t0": t0, "t1": t0.copy(), "w_ms": w, "t2": done, "t3": done.copy(), "ok": ok,
            "reclaim": np.where(ok, math.nan, done)}


def _crashed() -> dict[str, np.ndarray]:
    t0 = np.array(FIT_CRASHES + PREDICTED_CRASHES)
    fit = t0 < 105.0
    tx = t0 + np.where(fit, 0.0625, 0.125)   # crashed after 50 ms of work: a gap of 12.5 or 75 ms
    recovery = np.array([0.25, 0.25] + [k / 64 for k in range(2, 8)])
    return {"t0": t0, "t1": t0.copy(), "w_ms": np.full(t0.size, 100.0), "c_ms": np.full(t0.size, 50.0),
            "tx": tx, "reclaim": tx + recovery}


def lease_data() -> LeaseData:
    return LeaseData(lease_ms=100.0, lease_real_ms=100, window=WINDOW, live=_live(), crashed=_crashed(),
                     claim_t1=np.zeros(0), reaps=np.zeros((0, 3)), censored_live=0, censored_crashed=0,
                     empty_claims=0, cpu_s=0.5, tail_s=0.2)


def sweep_data() -> SweepData:
    return SweepData(settings=SETTINGS, server_name="redis", server_version="7.0.15", leases=[lease_data()],
                     reap_cost=None, mass=None, server_utilization=0.1, server_cpu_s=1.0, client_cpu_s=0.5,
                     window_s=10.0, wall_s=11.0, evalsha_calls=0, evalsha_usec=0)


# ---------------------------------------------------------------- the split


def test_the_halves_of_the_window_hold_every_attempt_once() -> None:
    assert halves(WINDOW) == ((100.0, 105.0), (105.0, 110.0))
    d = lease_data()
    fit, predicted = fit_part(d), predicted_part(d)
    assert fit.window == (100.0, 105.0) and predicted.window == (105.0, 110.0)
    assert fit.live["t0"].tolist() == FIT_LIVE and predicted.live["t0"].tolist() == PREDICTED_LIVE
    assert fit.crashed["t0"].tolist() == FIT_CRASHES and predicted.crashed["t0"].tolist() == PREDICTED_CRASHES
    assert set(fit.live) == set(d.live) and set(fit.crashed) == set(d.crashed)
    # Outside the window, nothing.
    assert part(d, (90.0, 100.0)).live["t0"].size == 0 and part(d, (90.0, 100.0)).censored_crashed == 0


def test_a_split_names_its_fit_run_and_the_runs_it_predicted() -> None:
    split = model_split("redis", 10.0)
    assert split.fitted_on == "redis window 0-5 s" and split.predicted == ("redis window 5-10 s",)
    assert split.label == LABEL
    assert split.to_dict() == {"basis": "held_out_half", "fitted_on": "redis window 0-5 s",
                               "predicted": ["redis window 5-10 s"], "label": split.label}
    assert model_split("valkey", 12.0).predicted == ("valkey window 6-12 s",)
    with pytest.raises(ValueError, match="predicted runs apart from the fit run 'a'"):
        ModelSplit("a", ("a",))
    with pytest.raises(ValueError, match="predicted runs apart"):
        ModelSplit("a", ())


def test_the_held_out_figures_are_the_predicted_half_alone() -> None:
    held = held_out_figures(predicted_part(lease_data()), 1.0)
    assert held["live"] == 12 and held["refused"] == 4 and held["crashes"] == 6
    # Over blocks of a quarter second (twice the lease), one execution in each of the first twelve, the
    # four refused in four of them: the blocks vary as independent executions would, but for the
    # cluster-robust variance's G / (G - 1) with G = 20 blocks, the design effect Wilson's interval takes.
    deff = 20 / 19
    assert held["false_expiry"].value == 4 / 12
    assert (held["false_expiry"].lo, held["false_expiry"].hi) == pytest.approx(wilson_bounds(4 / deff, 12 / deff))
    # Six recoveries, 31.25 .. 109.375 ms: the median's 95% interval is the first to the last.
    assert held["recovery_median"] == Interval(70.3125, 31.25, 109.375)


def test_agreement_counts_only_where_the_held_out_half_could_refute_the_model() -> None:
    held = {"live": 12, "false_expiry": Interval(4 / 12, 0.1, 0.6), "crashes": 6,
            "recovery_median": Interval(70.0, 30.0, 110.0)}
    assert agreement({"false_expiry": 0.5, "recovery_median": 60.0}, held) == \
        {"false_expiry": True, "recovery_median": True}
    assert agreement({"false_expiry": 0.7, "recovery_median": 20.0}, held) == \
        {"false_expiry": False, "recovery_median": False}
    # 0.4 x 12 = 4.8 expected events, under five: nothing could have refuted it.
    assert agreement({"false_expiry": 0.4, "recovery_median": 60.0}, held)["false_expiry"] is None
    few = {**held, "crashes": 4}
    assert agreement({"false_expiry": 0.5, "recovery_median": 60.0}, few)["recovery_median"] is None
    open_ended = {**held, "recovery_median": Interval(70.0, 30.0, math.inf)}
    assert agreement({"false_expiry": 0.5, "recovery_median": 60.0}, open_ended)["recovery_median"] is None


# ---------------------------------------------------------------- fitted on one half, predicting the other


def test_the_model_is_fed_the_fit_half_and_judged_on_the_predicted_half(tmp_path: Path) -> None:
    result = analyse(sweep_data())
    r = result.leases[0]
    assert result.split.label == LABEL
    # The fit half's overheads are 25 ms each; the predicted half's 75 ms never reach the model.
    assert r.overhead_ms["median"] == 25.0 and r.overhead_ms["max"] == 25.0 and r.overhead_ms["crash_gap"] == 12.5
    # Const 100 ms work, lease 100 ms, overhead 25 ms: reaped when the tick falls in the first 25 of
    # its 50 ms, half the phases. Fed all sixteen attempts (six in ten at 75 ms) it would say 0.8.
    assert r.model["false_expiry"] == 0.5
    # Remaining lease + reap phase - gap: 100 + U[0,50) - 12.5 - U[0,100), whose median is 62.5.
    assert r.model["recovery_median"] == pytest.approx(62.5, abs=1.0)
    assert r.held_out["live"] == 12 and r.held_out["crashes"] == 6
    assert r.agree == {"false_expiry": True, "recovery_median": True}
    # The whole window is still what is reported and what the recommendation reads.
    assert r.live == 16 and r.refused == 4 and r.crashes == 8
    assert result.agreement_count() == (1, 1)
    write_run(tmp_path, [result], [recommend_for(result)], {"test": True})
    printed = " ".join(line.strip() for line in record_text(tmp_path).splitlines())
    assert ("Model inside the measured 95% intervals (false expiry and median recovery): redis 1/1 leases, "
            + LABEL + ".") in printed
    assert "the measured columns are the whole window" in printed


def test_the_record_carries_the_split_and_the_report_labels_it(tmp_path: Path) -> None:
    result = analyse(sweep_data())
    summary = write_run(tmp_path / "run", [result], [recommend_for(result)], {"test": True})
    server = summary["servers"][0]
    assert server["model_split"] == result.split.to_dict()
    row = server["agreement"][0]
    assert (row["live"], row["refused"], row["crashes"]) == (12, 4, 6)
    assert row["model_expected_false_expiries"] == 6.0
    assert row["measured_false_expiry"]["value"] == 4 / 12
    assert row["false_expiry"] is True and row["recovery_median"] is True
    page = build_report([tmp_path / "run"], tmp_path / "report").html.read_text()
    assert ("Model inside the measured 95% intervals (false expiry and median recovery): redis 1/1 leases, "
            + LABEL + ".") in page


def test_the_check_sample_renders_its_agreement_as_in_sample(tmp_path: Path) -> None:
    """The committed check run predates the split: its record says the model was fitted on the
    window it predicted, and the report prints that label as the record gives it."""
    text = build_report([ROOT / "results" / "sample" / "lease-check"], tmp_path / "report").md.read_text()
    for name in ("redis", "valkey"):
        assert ("Model inside the measured 95% intervals (false expiry and median recovery): "
                f"{name} 1/1 leases, in sample: fitted on and predicted {name} window 0-120 s.") in text


def test_the_printed_record_shows_each_lease_the_mass_crash_the_reap_cost_and_the_check(tmp_path: Path) -> None:
    """What the lease command prints is its record: every figure below is read back from the folder."""
    result = analyse(sweep_data())
    result = dataclasses.replace(
        result, data=dataclasses.replace(result.data, reap_cost=ReapCost(empty_usec=6.84, per_job_usec=2.25,
                                                                         full_call_usec=231.6, calls=330)),
        mass=MassResult(k=1_000, cap=100, reps=2, drain_ms=[2415.3, 2344.2], ticks=[10, 10], spread_ms=[41.6, 15.3],
                        model_ticks=10, model_drain_ms=(2250.0, 2375.0, 2500.0)))
    rec = recommend_for(result)
    write_run(tmp_path, [result], [rec], {"test": True}, [(False, "check run at 100 ms: false expiry 25% [10%-52%] "
                                                                  "(OVER 0.1%), p99 recovery 109 ms (within 3 s)")])
    text = record_text(tmp_path)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100, text
    flat = " ".join(line.strip() for line in lines)
    r = result.leases[0]
    # Sixteen executions of which four ran twice (the interval over blocks of time), the overrun bound, the
    # model's 0.5, four duplicates, a quarter of the work wasted; the model agrees on both figures.
    rows = [re.split(r"\s{2,}", line) for line in lines if line.startswith("100 ms")]
    assert len(rows) == 3
    expiry, recovery, cost = rows
    assert expiry == ["100 ms", f"{r.executions}",
                      f"25% [{r.false_expiry.lo * 100:.0f}%-{r.false_expiry.hi * 100:.0f}%]",
                      f"{r.overran_rate.hi * 100:.0f}%", "50%", f"{r.duplicates}", f"{r.wasted_share.value * 100:.0f}%",
                      "fe ok, p50 ok"]
    # As measured beside the model, then at 1:1: this record kept no pump schedule, so that is as measured.
    unscaled = r.recovery_unscaled["p99"]
    assert recovery[3:] == [fmt_ms(r.recovery["p99"].value), fmt_ms(r.model["recovery_p99"]), fmt_ms(unscaled.value),
                            f"{r.recovery_unscaled['n']:,}"]
    assert r.recovery_unscaled["corrected"] is False and unscaled.value == r.recovery["p99"].value
    assert cost == ["100 ms", f"{r.throughput.value:.1f}", f"{r.reap['calls_per_s']:.2f}", "-",
                    fmt_ms(r.overhead_ms["median"])]
    assert ("Mass crash of 1,000 jobs, cap 100 per call: drained 2.42 s, 2.34 s after the deadline in 10/10 reap "
            "calls; model 10 calls, 2.25 s-2.5 s (agrees).") in flat
    assert "Server cost of one reap call: 6.8 µs empty, 232 µs at the cap of 100 (2.25 µs per job)" in flat
    assert f"Bottleneck: {result.bottleneck}." in flat
    assert "Check run at 100 ms: false expiry 25% [10%-52%] (OVER 0.1%), p99 recovery 109 ms (within 3 s)." in flat
    assert "redis: " + " ".join(rec.text.split()) in flat


def test_the_check_run_is_where_the_model_meets_a_separate_run() -> None:
    """--check runs the lease again: its verdict says whether the sweep's model, fitted on the
    sweep, falls inside the separate run's intervals, and calls that out of sample."""
    from echomq_bench.lease.report import verification_text

    sweep = analyse(sweep_data())
    again = analyse(dataclasses.replace(sweep_data(), settings=dataclasses.replace(SETTINGS, seed=2)))
    holds, text = verification_text(recommend_for(sweep), again, sweep)
    r = again.leases[0]
    assert holds is False and text.startswith("check run at 100 ms: false expiry 25% ")
    # 0.5 over sixteen executions is eight events expected: testable, and just over the whole window's
    # 4 of 16 (fitted on the first half alone, the model never saw the slower second).
    assert r.false_expiry.hi < 0.5
    assert "; the sweep's model (out of sample, a separate run) puts false expiry at 50% (OUTSIDE its interval)" in text
    assert verification_text(recommend_for(sweep), again)[1].count("model") == 0
