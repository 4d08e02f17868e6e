"""Reap and promote cost curves: every point of the grid measured with the
reply it must give, in both forms of the live entries (bare, and with a job
row each, counted while the calls run), the drain counted in calls, results
written and printed from the record, and the server left clean. Sizes here are small; the
1,000,000 curve and its ratio target are the command's (echomq-bench
reapcost), not a test's."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import redis

from echomq import Queue
from echomq_bench.records import files as results
from echomq_bench.records.kinds.reapcost import ReapcostRecord
from echomq_bench.records.record import SCHEMA, read_record
from echomq_bench.load.bulk import BulkFill, id_block
from echomq_bench.formatting import fmt_ms
from echomq_bench.reapcost import CurveSettings, measure_curves
from echomq_bench.reapcost.run import run_reap_curve
from echomq_bench.reapcost import LiveEntries
from echomq_bench.reapcost.measure import PAYLOAD, paced_drain, reap_cost
from echomq_bench.report import build_report, record_text

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


def test_curve_measures_every_point_in_both_forms_and_leaves_nothing_behind(server: object,
                                                                            client: redis.Redis) -> None:
    curves = measure_curves(client, server=server.name, version=server.version(), settings=SMALL)  # type: ignore[attr-defined]
    assert list(curves) == ["bare", "rows"] and [c.form for c in curves.values()] == ["bare", "rows"]
    grid = {(v, m, cap, k) for v in SMALL.verbs for m in SMALL.sizes for cap in SMALL.caps for k in SMALL.ks(cap)}
    for curve in curves.values():
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
        assert curve.wall_s > 0
    assert client.dbsize() == 0


def _row_keys(client: redis.Redis, tag: str = "*") -> int:
    return sum(1 for _ in client.scan_iter(match=f"emq:{{{tag}}}:job:*", count=10_000))


def test_live_entries_get_the_row_a_claimed_job_has_one_per_lease(client: redis.Redis) -> None:
    live = LiveEntries("reap", Queue(client, "live", max_attempts=3), BulkFill(client))
    live.live(1_500)
    assert client.zcard("emq:{live}:active") == 1_500 and _row_keys(client, "live") == 0
    scores = client.zrange("emq:{live}:active", 0, -1, withscores=True)
    live.add_rows()
    assert _row_keys(client, "live") == 1_500 and client.dbsize() == 1_501
    assert client.zrange("emq:{live}:active", 0, -1, withscores=True) == scores  # the set as it was
    # The same hash the client's own verbs leave on a claimed job.
    real = Queue(client, "real", max_attempts=3)
    real.enqueue(id_block(1)[0], PAYLOAD)
    job = real.claim(lease_ms=60_000)
    assert job is not None
    assert client.hgetall(f"emq:{{live}}:job:{live.live_ids[700]}") == client.hgetall(real.keys.job(job.id))
    live.drop()
    real.complete(job.id, job.token)
    assert client.dbsize() == 0


def test_orphans_with_one_deadline_are_drained_by_the_pump_one_cap_per_call(client: redis.Redis) -> None:
    live = LiveEntries("reap", Queue(client, "paced", max_attempts=3), BulkFill(client))
    drain = paced_drain(live, 100, 250, lease_ms=30.0, interval_s=0.01, rng=random.Random(1))
    assert (drain.cap, drain.orphans, drain.calls) == (100, 250, 3)   # 100 + 100 + 50
    assert drain.after_deadline_ms >= 0    # no call moves a job before its deadline
    assert client.dbsize() == 0            # moved jobs, their rows and the sets cleared


def test_reap_cost_splits_a_call_into_its_fixed_part_and_its_part_per_job(client: redis.Redis) -> None:
    live = LiveEntries("reap", Queue(client, "cost", max_attempts=3), BulkFill(client))
    cost = reap_cost(live, 50, empty_calls=20, full_calls=5)
    assert cost.calls == 25 and cost.empty_usec > 0 and cost.per_job_usec >= 0
    assert cost.full_call_usec == cost.empty_usec + 50 * cost.per_job_usec
    assert client.dbsize() == 0


def test_with_rows_form_holds_one_row_per_live_entry_while_it_is_measured(server: object,
                                                                          client: redis.Redis) -> None:
    """The keyspace as the grid's first calls see it, counted from a second
    connection at each form's first grid line: no rows in the bare form, a
    row for every live entry of every M with job rows."""
    watcher = server.client()  # type: ignore[attr-defined]
    seen: dict[tuple[str, str], tuple[int, int, list[int]]] = {}

    def count(text: str) -> None:
        first = re.match(r"\[(bare|with job rows)\] (reap|promote): cap \d+ k 0 \(1/", text)
        if first:
            sets = sorted(watcher.zcard(k) for p in ("active", "schedule") for k in watcher.scan_iter(f"emq:*:{p}"))
            seen[(first[1], first[2])] = (_row_keys(watcher), watcher.dbsize(), sets)

    tiny = CurveSettings(sizes=(300, 1_200), caps=(10,), repeats=1, orphans=20, drain_size=1_200, ratio_repeats=1)
    measure_curves(client, settings=tiny, progress=count)
    watcher.close()
    assert seen == {("bare", "reap"): (0, 2, [300, 1_200]), ("bare", "promote"): (0, 2, [300, 1_200]),
                    ("with job rows", "reap"): (1_500, 1_502, [300, 1_200]),
                    ("with job rows", "promote"): (1_500, 1_502, [300, 1_200])}
    assert client.dbsize() == 0


def test_run_reap_curve_writes_the_record_and_prints_it(server: object, tmp_path: Path) -> None:
    run_dir = run_reap_curve([server], out_dir=tmp_path / "run", verbose=False,
                             settings=CurveSettings(sizes=(1_000, 5_000), caps=(10, 100), repeats=1,
                                                    orphans=100, drain_size=5_000, verbs=("reap",),
                                                    ratio_repeats=2))
    run = results.load(tmp_path / "run")
    points = run.table("reapcost")
    assert set(points["metric"]) == {"server_us", "client_us", "ratio_check_server_us"}
    assert (points["moved"] == points[["k", "cap"]].min(axis=1)).all()
    assert set(run.table("drain")["metric"]) >= {"calls", "drain_back_to_back_ms", "drain_at_cadence_ms"}
    record = ReapcostRecord.from_record(run.summary)
    build = record.builds[0]
    assert build.verbs["reap"].ratio_target == 2.0
    assert run.meta["settings"]["reapcost"]["sizes"] == [1_000, 5_000]
    assert run_dir == tmp_path / "run"
    assert run.kind == "reapcost" and run.schema == SCHEMA and SCHEMA >= 2  # the forms arrived at 2
    # Both forms in the record, each labelled: the tables, the build entries, side by side.
    assert set(points["form"]) == set(run.table("drain")["form"]) == {"bare", "rows"}
    # 7 grid points (k of 0, 1, 10 at cap 10; and 100 at cap 100) at 2 sizes, 2 metrics each; 2 ratio pairs.
    assert points.groupby("form").size().to_dict() == {"bare": 7 * 2 * 2 + 2 * 2, "rows": 7 * 2 * 2 + 2 * 2}
    name = server.name  # type: ignore[attr-defined]
    assert [(b.build, b.form, b.form_label) for b in record.builds] == [
        (name, "bare", "bare"), (name, "rows", "with job rows")]
    assert {f: v.label for f, v in record.forms.items()} == {"bare": "bare", "rows": "with job rows"}
    assert [(r.M, r.cap) for r in record.side_by_side] == [(1_000, 10), (5_000, 10), (1_000, 100), (5_000, 100)]
    assert set(record.reap_ratio_target_met) == {"bare", "rows"}
    assert ReapcostRecord.from_record(read_record(tmp_path / "run").summary) == record
    # What the command prints: the record, its charts drawn from it into the folder.
    lines = record_text(tmp_path / "run").splitlines()
    assert max(map(len, lines)) <= 100
    flat = " ".join(line.strip() for line in lines)
    assert f"one reap call blocks {record.builds[1].version} for " in flat and "(with job rows)" in flat
    assert (tmp_path / "run" / "answer_reap.png").stat().st_size > 10_000
    assert (tmp_path / "run" / "reapcost_rows.png").stat().st_size > 10_000
    full = points[(points["metric"] == "server_us") & (points["form"] == "rows") & (points["cap"] == 100)
                  & (points["k"] == 100)].groupby("M")["value"].median()
    grid = next(i for i, line in enumerate(lines) if line.startswith("reap: server µs of one call, median of 1"))
    assert any(line.split()[:1] == [name] and "with job rows" in line
               and line.split()[-2:] == [f"{full[1_000]:,.0f}", f"{full[5_000]:,.0f}"] for line in lines[grid:]), lines
    fit = build.verbs["reap"].fit
    assert "Cost against M: one call of 100 at M=5k over the same at M=1k" in flat
    assert any(line.split()[:3] == [name, "bare", "reap"] and f"{fit.us_per_job:.2f}" in line.split()
               for line in lines), lines
    drain = run.table("drain")
    b2b = drain[(drain["metric"] == "drain_back_to_back_ms") & (drain["form"] == "bare") & (drain["cap"] == 10)]
    assert "Drain of a mass crash: K=100 at once beside M=5,000 live entries" in flat
    assert f" {fmt_ms(float(b2b['value'].iloc[0]))} " in flat
    report = build_report([tmp_path / "run"], tmp_path / "report")
    text = report.md.read_text()
    assert "| with job rows |" in text and "| bare |" in text
    assert "with job rows" in report.answers[0].lines[0] and " at M = 5,000 " in report.answers[0].lines[0]
