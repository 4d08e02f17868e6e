"""The open loop's account of its tail on real servers: every claim due in
the window is sent and either answered or counted as a timeout, and a rate
the driver could not keep is said so in the printed summary and the report."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import redis

from echomq_bench.cli import main
from echomq_bench.capacity.runner import run_capacity
from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.report import build_report
from echomq_bench.servers import EmbeddedServer

# Short runs; no pinning, so the session's shared server keeps its affinity.
OPEN = CapacitySettings(warmup_s=0.2, connections=2, pipeline=32, ceiling=False, pin=False)


def test_a_rate_out_of_reach_is_reported_in_the_summary_and_the_report(
        server: EmbeddedServer, client: redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cap"
    code = main(["capacity", "--server", f"target={server.url}", "--duration", "300ms", "--warmup", "100ms",
                 "--rate", "200000", "--connections", "2", "--pipeline", "32", "--no-ceiling", "--no-pin",
                 "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    account = json.loads((out / "summary.json").read_text())["builds"]["target"]["open_loop"]
    achieved = account["achieved_per_s"]
    assert account["requested_per_s"] == 200_000
    assert achieved == account["sent_in_window"] / 0.3 and achieved < 0.98 * 200_000
    percent = math.floor(round(100 * achieved / 200_000, 6))
    said = f"achieved {math.floor(achieved):,}/s of 200,000/s requested ({percent}%): the driver could not keep " \
           "the schedule"
    # The printed text wraps at 100 columns: its sentences are read with the wrapping undone.
    flat = " ".join(printed.split())
    assert f"Warning (target): {said}" in flat
    # Every claim due in the window went out, most after it closed, and each is answered or a timeout.
    assert account["scheduled"] == account["sent"] == 60_000
    assert account["sent_after_window"] > 0
    assert account["answered"] + account["timeouts"] == account["sent"]
    assert (f"target: open loop at 200,000/s: 60,000 claims due in the window, 60,000 sent "
            f"({account['sent_after_window']:,} after it closed), {account['answered']:,} answered, "
            f"{account['timeouts']:,} timed out (replies awaited 5 s); achieved {math.floor(achieved):,}/s.") in flat
    assert max(len(line) for line in printed.splitlines()) <= 100
    report = build_report([out])
    assert f"Warning (target): {said}" in report.md.read_text()
    assert said in report.html.read_text()


def test_a_modest_rate_is_kept_and_every_claim_due_is_answered(server: EmbeddedServer, client: redis.Redis) -> None:
    # 1,000/s over 2 connections is claim k of each at k x 2 ms: 500 each in 1 s of window.
    r = run_capacity(server, replace(OPEN, duration_s=1.0, rate=1000.0, ledger=True))
    assert r.audit is not None and r.audit["passed"], r.audit
    account = r.open_loop
    assert account is not None
    assert account["scheduled"] == account["sent"] == account["answered"] == 1000
    assert account["timeouts"] == account["cycle_timeouts"] == 0
    assert account["achieved_per_s"] >= 0.98 * 1000
    assert not [w for w in r.warnings if w.startswith("achieved ") or "timeouts" in w], r.warnings
    assert r.entry().open_loop == account
    assert r.latency["claim"].count == r.latency["cycle"].count == 1000


def test_replies_not_back_in_time_are_counted_as_timeouts(server: EmbeddedServer, client: redis.Redis) -> None:
    # 30,000 claims due in the window, nearly all sent at its close: 10 ms is far too short for them.
    r = run_capacity(server, replace(OPEN, duration_s=0.3, rate=100_000.0, reply_timeout_s=0.01))
    account, c = r.open_loop, r.counts
    assert account is not None and c["empty"] == c["stale"] == c["errors"] == 0
    assert account["scheduled"] == account["sent"] == 30_000
    assert account["timeouts"] > 0
    assert account["answered"] + account["timeouts"] == account["sent"]
    # Only answered claims are timed, and only the cycles among them that finished.
    assert r.latency["claim"].count == account["answered"]
    assert r.latency["cycle"].count == account["answered"] - account["cycle_timeouts"]
    assert (f"{account['timeouts']:,} of the 30,000 claims due in the window, and {account['cycle_timeouts']:,} "
            "of the cycles they began, had no reply within 0.01 s of its close: counted as timeouts, absent from "
            "the latencies") in r.warnings
