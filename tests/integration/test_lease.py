"""Lease sizing on a real server: one short sweep, and a server lost mid-sweep."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest

from echomq_bench.records.record import SCHEMA
from echomq_bench.measurement.workdist import parse_dist
from echomq_bench.lease import SweepSettings, run_sweep
from echomq_bench.formatting import fmt_ms, fmt_pct
from echomq_bench.lease.report import recommend_for, write_run
from echomq_bench.report import record_text


# ---------------------------------------------------------------- one short real sweep


def test_short_sweep_orders_false_expiry_down_and_recovery_up(server: object, tmp_path: Path) -> None:
    settings = SweepSettings(work="exp:mean=100ms", leases_ms=(100.0, 300.0, 900.0), crash_rate=0.1,
                             reap_every_ms=50, consumers=24, duration_s=6, warmup_s=0.5,
                             mass_crash=200, mass_crash_reps=1, budget=0.01, recovery_tolerance_ms=2000)
    seen: list[str] = []
    result = run_sweep(server, settings, progress=seen.append)
    assert seen and len(result.leases) == 3
    fe = [r.false_expiry.value for r in result.leases]
    med = [r.recovery["median"].value for r in result.leases]
    assert fe[0] > fe[1] >= fe[2]
    assert med[0] < med[1] < med[2]
    for r in result.leases:
        assert r.executions > 300 and r.crashes > 20
        assert r.refused == round(r.false_expiry.value * r.live)
        assert r.false_expiry.lo <= r.false_expiry.value <= r.false_expiry.hi
        assert r.recovery["censored"] == 0
        assert r.reap["calls"] > 0
    # The mass crash of 200 at a cap of 100 takes 2 reap calls (3 if the burst straddled a tick).
    assert result.mass is not None and result.mass.ticks[0] in (2, 3)
    rec = recommend_for(result)
    summary = write_run(tmp_path, [result], [rec], {"test": True})
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["kind"] == "lease" and on_disk["schema"] == SCHEMA
    assert on_disk["recommended_lease_ms"] == summary["recommended_lease_ms"]
    for key in ("recommended_lease_ms", "false_expiry_rate", "recovery_p99_ms"):
        assert key in on_disk
    agreement = on_disk["servers"][0]["agreement"]
    assert len(agreement) == 3
    for row in agreement:
        # Each verdict is the model's figure inside the measured interval, as a
        # JSON boolean (never the string "True"); null where no interval exists
        # or the model expects fewer than 5 events, so that nothing could refute it.
        fe = row["measured_false_expiry"]
        inside = fe["lo"] <= row["model_false_expiry"] <= fe["hi"]
        assert row["false_expiry"] is (inside if row["model_expected_false_expiries"] >= 5 else None)
        med = row["measured_recovery_median_ms"]
        bounded = med["lo"] is not None and med["hi"] is not None and row["crashes"] >= 5
        expected = (med["lo"] <= row["model_recovery_median_ms"] <= med["hi"]) if bounded else None
        assert row["recovery_median"] is expected
    assert on_disk["servers"][0]["agreement_count"] == sum(
        row["false_expiry"] is True and row["recovery_median"] is True for row in agreement)
    for name in ("lease.csv", "recovery.csv", "lease.png", "work.hdr", "meta.json"):
        assert (tmp_path / name).is_file()
    # What the command prints is the record: per lease its executions, the rate it ran twice, the
    # recovery beside the model; the mass crash, the reap cost and the recommendation, in 100 columns.
    lines = record_text(tmp_path).splitlines()
    assert max(map(len, lines)) <= 100
    flat = " ".join(line.strip() for line in lines)
    for r in result.leases:
        expiry = next(line.split() for line in lines if line.startswith(fmt_ms(r.lease_ms)) and "fe " in line)
        assert expiry[len(fmt_ms(r.lease_ms).split()):][:2] == [f"{r.executions:,}", fmt_pct(r.false_expiry.value)]
        assert any(line.startswith(fmt_ms(r.lease_ms)) and fmt_ms(r.recovery["p99"].value) in line
                   and fmt_ms(r.recovery_unscaled["p99"].value) in line for line in lines)
        assert any(line.startswith(fmt_ms(r.lease_ms)) and f"{r.throughput.value:.1f}" in line for line in lines)
        # The pump's schedule and the consumers' ends of work were kept: the wait at scale 1 is read off them.
        assert r.recovery_unscaled["corrected"] is True and r.recovery_unscaled["n"] == r.recovery["n"]
    assert f"Mass crash of 200 jobs, cap 100 per call: drained {fmt_ms(result.mass.drain_ms[0])} " in flat
    assert "Server cost of one reap call: " in flat and f"Bottleneck: {result.bottleneck}." in flat
    assert " ".join(rec.text.split()) in flat
    # The run's measured work times read back as a distribution close to the one drawn.
    again = parse_dist(f"empirical:{tmp_path}")
    assert again.quantile_ms(0.5) == pytest.approx(100 * math.log(2), rel=0.15)


def test_the_model_is_fitted_on_one_half_and_judged_on_the_other(server: Any, tmp_path: Path) -> None:
    settings = SweepSettings(work="exp:mean=100ms", leases_ms=(100.0, 1000.0), crash_rate=0.1, reap_every_ms=50,
                             consumers=8, duration_s=3, warmup_s=0.3, mass_crash=0)
    result = run_sweep(server, settings)
    write_run(tmp_path, [result], [recommend_for(result)], {"test": True})
    entry = json.loads((tmp_path / "summary.json").read_text())["servers"][0]
    name = server.name
    assert entry["model_split"] == {
        "basis": "held_out_half", "fitted_on": f"{name} window 0-1.5 s", "predicted": [f"{name} window 1.5-3 s"],
        "label": f"held out within one run: fitted on {name} window 0-1.5 s, judged on {name} window 1.5-3 s "
                 "(the same processes, server and machine, not a separate run)"}
    rows = entry["agreement"]
    assert [row["lease_ms"] for row in rows] == [100.0, 1000.0]
    for row, d, r in zip(rows, result.data.leases, result.leases):
        # Counted from the raw attempts: those claimed in the second half of the window, and only those.
        mid = (d.window[0] + d.window[1]) / 2
        late = d.live["t0"] >= mid
        refused = int((late & ~d.live["ok"]).sum())
        assert (row["live"], row["refused"]) == (int(late.sum()), refused)
        assert row["crashes"] == int((d.crashed["t0"] >= mid).sum())
        assert 0 < row["live"] < r.live and 0 < row["crashes"] < r.crashes
        assert row["measured_false_expiry"]["value"] == refused / row["live"]
        assert row["model_expected_false_expiries"] == row["model_false_expiry"] * row["live"]
        fe = row["measured_false_expiry"]
        expected = (fe["lo"] <= row["model_false_expiry"] <= fe["hi"]) \
            if row["model_expected_false_expiries"] >= 5 else None
        assert row["false_expiry"] is expected
    # At 100 ms, a third of the executions outlive an exponential 100 ms: dozens expected in the half.
    # At 1 s, e^-10 of them: nothing to count.
    assert rows[0]["false_expiry"] is not None and rows[1]["false_expiry"] is None


def test_a_server_lost_mid_sweep_is_one_clear_error() -> None:
    from echomq_bench.lease import SweepError
    from echomq_bench.servers import start

    srv = start("redis")
    settings = SweepSettings(work="exp:mean=50ms", leases_ms=(200.0,), consumers=4, duration_s=4,
                             warmup_s=0.2, mass_crash=0)
    killer = threading.Timer(1.5, srv.stop)
    killer.start()
    try:
        with pytest.raises(SweepError) as info:
            run_sweep(srv, settings)
    finally:
        killer.cancel()
        srv.stop()
    assert "failed" in str(info.value)
