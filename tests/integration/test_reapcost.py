"""Reap and promote cost curves: every point of the grid measured with the
reply it must give, the drain counted in calls, results written and the
server left clean. Sizes here are small; the 1,000,000 curve and its ratio
target are the command's (echomq-bench reapcost), not a test's."""

from __future__ import annotations

import math
from pathlib import Path

import redis

from echomq_bench.records import files as results
from echomq_bench.load.bulk import BulkFill, id_block
from echomq_bench.commands.reapcost import CurveSettings, format_curve, measure_curve, run_reap_curve

SMALL = CurveSettings(sizes=(1_000, 20_000), caps=(10, 100), repeats=2, orphans=250, drain_size=20_000,
                      cadences_ms=(100, 1_000), ratio_repeats=3)


def test_bulk_fill_writes_rows_and_scores(client: redis.Redis) -> None:
    ids = id_block(25_001)  # more than one slice
    BulkFill(client).fill("z", ids, row_prefix="row:", state="active", attempts=1, payload=b"p", score0=7, step=2)
    assert client.zcard("z") == len(ids)
    assert client.zscore("z", ids[0]) == 7 and client.zscore("z", ids[-1]) == 7 + 2 * 25_000
    assert client.hgetall(f"row:{ids[123]}") == {b"state": b"active", b"attempts": b"1", b"payload": b"p"}
    BulkFill(client).fill("plain", ids[:10], score0=5)
    assert client.zrange("plain", 0, -1, withscores=True)[0] == (ids[0].encode(), 5.0)


def test_curve_measures_every_point_and_leaves_nothing_behind(server: object, client: redis.Redis) -> None:
    curve = measure_curve(client, server=server.name, version=server.version(), settings=SMALL)  # type: ignore[attr-defined]
    grid = {(v, m, cap, k) for v in SMALL.verbs for m in SMALL.sizes for cap in SMALL.caps for k in SMALL.ks(cap)}
    assert {(p.verb, p.size, p.cap, p.k) for p in curve.points} == grid
    assert all(len(p.server_us) == len(p.client_us) == SMALL.repeats for p in curve.points)
    # Each call's round trip holds the server's time for it: the two figures are of one call.
    assert all(rt >= us for p in curve.points for rt, us in zip(p.client_us, p.server_us))
    for d in curve.drains:
        assert d.calls == math.ceil(SMALL.orphans / d.cap) and d.size == 20_000
        assert d.at_cadence_ms(1_000, 0) == (d.calls - 1) * 1_000
    assert {(d.verb, d.cap) for d in curve.drains} == {(v, c) for v in SMALL.verbs for c in SMALL.caps}
    assert curve.ratio("reap") is not None and curve.paired_ratio("promote") is not None
    assert all(len(curve.ratio_pairs[v]) == 3 for v in SMALL.verbs)
    assert set(curve.fit("reap")) == {"base_us", "us_per_job", "us_per_doubling_of_M"}
    text = format_curve(curve)
    assert "one call of 100 at M=20k / at M=1k" in text and "drain of a mass crash" in text
    assert client.dbsize() == 0


def test_run_reap_curve_writes_csv_chart_meta_and_summary(server: object, tmp_path: Path) -> None:
    summary = run_reap_curve([server], out_dir=tmp_path / "run", verbose=False,
                             settings=CurveSettings(sizes=(1_000, 5_000), caps=(10, 100), repeats=1,
                                                    orphans=100, drain_size=5_000, verbs=("reap",),
                                                    ratio_repeats=2))
    run = results.load(tmp_path / "run")
    assert (tmp_path / "run" / "reapcost.png").stat().st_size > 10_000
    points = run.table("reapcost")
    assert set(points["metric"]) == {"server_us", "client_us", "ratio_check_server_us"}
    assert (points["moved"] == points[["k", "cap"]].min(axis=1)).all()
    assert set(run.table("drain")["metric"]) >= {"calls", "drain_back_to_back_ms", "drain_at_cadence_ms"}
    build = run.summary["builds"][0]
    assert build["verbs"]["reap"]["ratio_target"] == 2.0
    assert run.meta["settings"]["reapcost"]["sizes"] == [1_000, 5_000]
    assert summary["run_dir"] == str(tmp_path / "run")
    assert run.kind == "reapcost" and run.schema == 1
