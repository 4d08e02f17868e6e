"""The capacity driver's accounting on real servers: every cycle it counts
is a job the server saw completed, and no job is lost."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import redis

from echomq_bench.load.bulk import drop_queue
from echomq_bench.capacity.runner import run_capacity
from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.cli import main
from echomq_bench.report import build_report, record_text
from echomq._instrument import QueueKeys
from tests.helpers import evalsha_calls

# Short runs; no pinning, so the session's shared server keeps its affinity.
QUICK = CapacitySettings(duration_s=0.5, warmup_s=0.1, connections=3, pipeline=32, ceiling=False, pin=False)


def job_rows(client: redis.Redis, queue: str) -> int:
    return sum(1 for _ in client.scan_iter(match=QueueKeys(queue).job_prefix + "*", count=1000))


def test_backlog_cycles_equal_what_the_server_completed(server: object, client: redis.Redis) -> None:
    backlog = 60_000
    before = evalsha_calls(client)
    r = run_capacity(server, replace(QUICK, backlog=backlog, ledger=True, keep_keys=True))
    assert r.audit is not None and r.audit["passed"], r.audit
    c = r.counts
    # Every claim found a job and every claimed job was completed, nothing refused.
    assert c["claimed"] == c["claims"] and c["empty"] == 0
    assert c["completed"] == c["claimed"] and c["stale"] == 0 and c["errors"] == 0
    assert r.audit["completed"] == c["completed"] and r.audit["lost"] == 0
    assert r.audit["enqueued"] == backlog
    assert r.audit["pending"] == backlog - c["completed"] and r.audit["active"] == 0
    # The server's own count: one EVALSHA per claim and per complete (the fill uses none).
    assert evalsha_calls(client) - before == c["claims"] + c["completed"]
    # The window's cycles are part of the whole run's, and the rate is theirs.
    assert 0 < r.cycles <= c["completed"]
    assert r.cycles_per_s == pytest.approx(r.cycles / QUICK.duration_s)
    assert r.latency["cycle"].count == r.cycles
    assert r.latency["claim"].count == c["w_claimed"]
    queues = {k.decode().split("}")[0].split("{")[1] for k in client.scan_iter(match="emq:{cap-*}:pending")}
    assert len(queues) == 1
    (queue,) = queues
    assert client.zcard(QueueKeys(queue).pending) == backlog - c["completed"]
    assert job_rows(client, queue) == backlog - c["completed"]
    drop_queue(client, queue)


def test_producers_and_two_processes_lose_nothing(server: object, client: redis.Redis) -> None:
    settings = CapacitySettings(duration_s=0.5, warmup_s=0.1, processes=2, connections=2, pipeline=16,
                                feed="produce", backlog=500, ceiling=False, pin=False, ledger=True)
    r = run_capacity(server, settings)
    assert r.audit is not None and r.audit["passed"], r.audit
    c = r.counts
    assert c["enqueued"] > 0 and c["duplicate"] == 0 and c["errors"] == 0
    # Pre-filled plus produced = completed + still pending; nothing active, nothing lost.
    assert r.audit["enqueued"] == 500 + c["enqueued"]
    assert r.audit["completed"] == c["completed"]
    assert r.audit["completed"] + r.audit["pending"] == r.audit["enqueued"]
    assert r.audit["active"] == 0
    assert r.scripts_per_cycle > 2.0  # each cycle also carries its enqueue
    # Keys are removed after the run unless asked to keep them.
    assert not list(client.scan_iter(match="emq:{cap-*", count=1000))


def test_open_loop_never_sends_ahead_of_its_schedule(server: object, client: redis.Redis) -> None:
    rate = 1500.0
    settings = CapacitySettings(duration_s=0.6, warmup_s=0.2, connections=3, pipeline=64, rate=rate,
                                backlog=5000, ceiling=False, pin=False, ledger=True)
    r = run_capacity(server, settings)
    assert r.audit["passed"], r.audit
    # Claim k of a connection is due at k / per-connection rate; by the end
    # of the window at most rate x elapsed (+1 per connection) were sent.
    elapsed = settings.warmup_s + settings.duration_s
    assert r.counts["claims"] <= rate * elapsed + settings.connections
    assert r.counts["completed"] == r.counts["claims"]
    # Open loop, latencies are those of the claims due inside the window, each with its cycle.
    assert r.open_loop is not None
    assert r.latency["claim"].count == r.latency["cycle"].count == r.open_loop["answered"] == 900


def test_work_time_holds_each_job_before_its_complete(server: object, client: redis.Redis) -> None:
    settings = CapacitySettings(duration_s=0.4, warmup_s=0.1, connections=2, pipeline=8, work="const:5ms",
                                backlog=3000, ceiling=False, pin=False, ledger=True)
    r = run_capacity(server, settings)
    assert r.audit["passed"], r.audit
    assert r.latency["cycle"].count > 0
    # A cycle cannot end before its claim came back and 5 ms of work passed.
    assert r.latency["cycle"].hist.get_min_value() >= 5000


def test_result_files_carry_the_headline_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cap"
    code = main(["capacity", "--server", "valkey", "--duration", "0.4s", "--warmup", "100ms",
                 "--ceiling-requests", "3000", "--no-pin", "--audit", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    entry = summary["builds"]["valkey"]
    for key in ("cycles_per_s", "server_us_per_cycle", "server_utilization", "client_utilization", "bound",
                "ceiling_claims_per_s", "cycles", "window_s", "client_cores"):
        assert key in entry
    assert entry["ceiling_claims_per_s"] > 0
    assert entry["cycles_per_s"] > 0 and entry["window_s"] == pytest.approx(0.4)
    text = (out / "valkey-claim.hgrm").read_text()
    assert "Percentile" in text and "#[Max" in text
    meta = json.loads((out / "meta.json").read_text())
    assert meta["servers"][0]["version"].startswith("valkey")
    # What it prints is its record through the report's renderer, and then where the record is.
    assert printed == record_text(out) + f"\nresults: {out}\n"
    assert max(len(line) for line in printed.splitlines()) <= 100
    # The table names the build: its version and figures in a row, its allocator in the next table,
    # its binary in a line under them.
    described = meta["servers"][0]
    assert described["binary"] == shutil.which("valkey-server")
    rows = [line.split() for line in printed.splitlines() if line.startswith("valkey ")]
    assert rows[0][:4] == ["valkey", *described["version"].split(), f"{entry['cycles_per_s']:,.0f}"]
    assert rows[0][4] == f"{entry['server_us_per_cycle']:.2f}" and rows[0][-1] == entry["bound"]
    assert rows[1][:4] == ["valkey", described["allocator"], f"{entry['ceiling_claims_per_s']:,.0f}",
                           f"{entry['of_ceiling']:.2f}"]
    assert rows[1][4:] == [f"{entry['latency_ms']['claim'][k]:.2f}" for k in ("p50", "p99", "p99.9", "max")]
    flat = " ".join(printed.split())
    assert f"valkey: {described['version']}, malloc {described['allocator']}, {described['binary']}" in flat
    assert f"valkey: {entry['pinning']}; {entry['cycles']:,} cycles in 0.4 s; scripts {entry['scripts']}" in flat
    audit = entry["audit"]
    assert f"valkey: audit PASS ({audit['enqueued']:,} enqueued = {audit['completed']:,} completed" in flat
    assert meta["settings"]["workload"]["duration_s"] == 0.4
    assert list(summary)[:2] == ["kind", "schema"] and summary["kind"] == "capacity"
    # The folder renders: the table, the headline rate and the timeline chart.
    report = build_report([out])
    md = report.md.read_text()
    assert "Capacity per build" in md and f"{entry['cycles_per_s']:,.0f}" in md
    assert "capacity_timeline.png" in md and (out / "capacity_timeline.png").is_file()
    assert f"{entry['cycles_per_s']:,.0f}" in report.text
