"""What `echomq-bench capacity` prints is its record through the report's
renderer: every figure the old printed table carried, read back from the
record, in lines no wider than 100 columns. No server: the results are made
here and written as the command writes them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from echomq_bench.capacity.cluster_result import ClusterCapacityResult, NodeResult
from echomq_bench.capacity.open_loop import open_loop_account, open_loop_line, open_loop_warnings
from echomq_bench.capacity.result import CapacityResult
from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.cli import main
from echomq_bench.commands import capacity as command
from echomq_bench.load.ceiling import Ceiling
from echomq_bench.measurement.latency import Latency
from echomq_bench.records.record import Record
from echomq_bench.records.files import write_record
from echomq_bench.report import record_text
from echomq_bench.servers import Placement

WINDOW = 2.0
AUDIT = {"enqueued": 90_000, "completed": 82_470, "pending": 7_530, "active": 0, "scheduled": 0, "dead": 0,
         "lost": 0, "in_two_places": 0, "unknown": 0, "double_accepted": 0, "zombie_sent": 0,
         "zombie_accepted": 0, "refused": 0, "refused_not_superseded": 0, "examples": {}, "passed": True}


def _latency(*ms: float) -> dict[str, Latency]:
    out = {"claim": Latency(), "complete": Latency(), "cycle": Latency()}
    for verb, hist in out.items():
        for value in ms:
            hist.record_ms(value * (2 if verb == "cycle" else 1))
    return out


def _result(build: str, cycles: int, **changes: Any) -> CapacityResult:
    settings = changes.pop("settings", CapacitySettings(duration_s=WINDOW))
    r = CapacityResult(
        build=build, version=f"{build} 7.2.4", settings=settings, scripts="/src/echomq/lua", window_s=WINDOW,
        cycles=cycles, cycles_per_s=cycles / WINDOW, server_utilization=0.931, server_cpu_utilization=0.95,
        server_wait=0.042, server_us_per_cycle=17.81, script_us_per_cycle=12.5, scripts_per_cycle=2.0,
        client_utilization=0.435, client_wait=0.01, steal=0.0, client_cpu_s=0.87, client_cores=1, bound="server",
        pinning="server main thread on cpu 0, driver and C client on cpu 1", backlog=100_000,
        ceiling=Ceiling(83_752.0, 0.99, 11.2, "redis-benchmark", 20_000, 16, 50), counts={"a_completed": cycles},
        latency=_latency(0.5, 1.25, 3.5, 9.75), audit=dict(AUDIT),
        warnings=["the driver waited for a CPU 8% of the window (other processes on its core)"],
        server={"name": build, "version": f"{build} 7.2.4", "allocator": "jemalloc-5.3.0",
                "binary": f"/usr/bin/{build}-server"},
        timeline=[(0.0, cycles / WINDOW), (0.25, cycles / WINDOW)])
    return replace(r, **changes)


def _open_loop() -> CapacityResult:
    settings = CapacitySettings(duration_s=WINDOW, rate=200_000.0, ceiling=False)
    counts = {"w_sent": 145_000, "due": 400_000, "due_sent": 400_000, "due_sent_after": 255_000,
              "due_answered": 399_000, "due_timeouts": 1_000, "due_cycle_timeouts": 2, "a_completed": 140_000}
    account = open_loop_account(counts, settings)
    server = {"name": "valkey", "version": "valkey 8.1.1", "allocator": "libc", "binary": "/opt/valkey-server"}
    return _result("valkey", 140_000, settings=settings, ceiling=None, counts=counts, open_loop=account, audit=None,
                   warnings=open_loop_warnings(account), version="valkey 8.1.1", server=server)


def _cluster() -> ClusterCapacityResult:
    # The second master is the busiest, and saturated: the run is server-bound, and it is named.
    nodes = [NodeResult(node, (f"q{i}",), _result("redis-cluster", 20_000 + 1_000 * i, pinning="off",
                                                  server_utilization=0.55 + i * 0.4, audit=dict(AUDIT)))
             for i, node in enumerate(("127.0.0.1:30001", "127.0.0.1:30002"))]
    accounting = [{"queue": f"q{i}", "node": n.node, "slot": 100 + i, "filled": 30_000, "enqueued": 0, "left": 0,
                   "driver_completed": n.result.cycles, "server_completed": n.result.cycles, "ok": True}
                  for i, n in enumerate(nodes)]
    return ClusterCapacityResult(
        build="redis-cluster", version="redis 7.2.4", settings=CapacitySettings(duration_s=WINDOW), nodes=nodes,
        placements=[Placement(f"q{i}", 100 + i, n.node) for i, n in enumerate(nodes)], accounting=accounting,
        pinning="off: 2 nodes and the driver's 2 processes share this machine's 2 cores",
        cores_note="all 2 nodes and the driver (2 processes) shared this machine's 2 cores, unpinned",
        machine_busy=0.97, server={"name": "redis-cluster", "version": "redis 7.2.4", "spec": "redis-cluster",
                                   "nodes": []})


def _flat(text: str) -> str:
    """The printed text with its wrapping undone: a sentence reads whole whatever the width broke."""
    return " ".join(text.split())


def _row(text: str, first: str) -> list[str]:
    """The words of the table row that starts with `first`."""
    return next(line.split() for line in text.splitlines() if line.startswith(first + " "))


def test_a_capacity_record_prints_every_figure_within_100_columns(tmp_path: Path) -> None:
    redis_run, valkey_run, cluster = _result("redis", 82_470), _open_loop(), _cluster()
    out = command.write_capacity(tmp_path / "cap", [redis_run, valkey_run, cluster], argv=["echomq-bench"])
    text = record_text(out)
    assert max(len(line) for line in text.splitlines()) <= 100
    flat = _flat(text)
    # A row per build: version, cycles/s, server µs/cycle, busy, wait, client busy, bound...
    assert _row(text, "redis") == ["redis", "redis", "7.2.4", "41,235", "17.81", "93.1%", "4.2%", "43.5%", "server"]
    assert _row(text, "valkey")[:4] == ["valkey", "valkey", "8.1.1", "70,000"]
    # ... and the allocator, the ceiling and the share of it, claim p50 / p99 / p99.9 / max.
    claim = redis_run.latency_ms("claim")
    ceiling_row = [line.split() for line in text.splitlines() if line.startswith("redis ")][1]
    assert ceiling_row == ["redis", "jemalloc-5.3.0", "83,752", "0.49",
                           *(f"{claim[k]:.2f}" for k in ("p50", "p99", "p99.9", "max"))]
    assert claim["max"] == pytest.approx(9.75, rel=0.01)
    assert "redis: redis 7.2.4, malloc jemalloc-5.3.0, /usr/bin/redis-server" in flat
    assert ("redis: server main thread on cpu 0, driver and C client on cpu 1; 82,470 cycles in 2 s; "
            "scripts /src/echomq/lua") in flat
    # The open loop's account, every warning and the audit's verdict.
    assert valkey_run.open_loop is not None and f"valkey: {open_loop_line(valkey_run.open_loop)}" in flat
    assert "achieved 72,500/s of 200,000/s requested (36%)" in flat
    assert "No ceiling for valkey: --no-ceiling" in flat and "No ceiling for redis" not in flat
    assert "Warning (redis): the driver waited for a CPU 8% of the window" in flat
    assert "redis: audit PASS (90,000 enqueued = 82,470 completed + 7,530 pending" in flat
    # The cluster: placement, a row per master and the total, bound, cores, ceiling, accounting.
    assert "redis-cluster (redis 7.2.4): 2 queues over 2 masters." in flat
    assert "queues per master: 127.0.0.1:30001 1, 127.0.0.1:30002 1" in flat
    assert _row(text, "127.0.0.1:30002")[:6] == ["127.0.0.1:30002", "1", "10,500", "17.81", "95.0%", "4.2%"]
    assert _row(text, "total")[:5] == ["total", "2", "20,500", "17.81", "95.0%"]
    assert "Bound: server, the main thread of 127.0.0.1:30002 (95% busy + 4% waiting for a core)." in flat
    assert "Cores: all 2 nodes and the driver (2 processes) shared this machine's 2 cores, unpinned; machine 97% " \
           "busy with them." in flat
    assert "cores were full" in flat and "redis-benchmark sends every request to one address" in flat
    assert "Accounting: PASS (per queue, driver completes == server completes; 2 queues, 41,000 completes in all)." \
        in flat
    assert "redis-cluster: audit PASS over 2 masters." in flat


def test_failures_and_an_older_record_print_their_verdicts(tmp_path: Path) -> None:
    """A record written by hand, without the keys newer runs add (cycles, window): FAIL is said, nothing breaks."""
    long_name = "valkey-unstable-asan"
    audit = {**AUDIT, "lost": 3, "passed": False}
    cluster = {"cluster": True, "version": "valkey 8.1.1", "cycles_per_s": 9_000.0, "bound": "client",
               "client_utilization": 0.99, "client_cores": 2, "busiest_node": "10.0.0.1:7000",
               "server_utilization": 0.4, "queues": 2, "accounting_passed": False, "cores_note": "elsewhere",
               "placements": [{"queue": "a", "slot": 1, "node": "10.0.0.1:7000"},
                              {"queue": "b", "slot": 2, "node": "10.0.0.1:7000"}],
               "nodes": [{"node": "10.0.0.1:7000", "queues": ["a", "b"], "cycles_per_s": 9_000.0}],
               "accounting": [{"queue": "a", "driver_completed": 10, "ok": True},
                              {"queue": "b", "driver_completed": 7, "ok": False}],
               "audit": {"passed": False, "nodes": {"10.0.0.1:7000": audit}}}
    single = {"version": "valkey 9.0.0-rc1 (00000000)", "cycles_per_s": 12_345.6, "server_us_per_cycle": 40.0,
              "bound": "neither", "audit": audit, "pinning": "off"}
    out = write_record(tmp_path / "old", Record(
        kind="capacity", summary={"builds": {long_name: single, "vc": cluster}},
        meta={"servers": [{"name": long_name, "version": "valkey 9.0.0-rc1", "allocator": "jemalloc-5.3.0"}]}))
    text = record_text(out)
    assert max(len(line) for line in text.splitlines()) <= 100
    flat = _flat(text)
    assert "vc (valkey 8.1.1): 2 queues over 1 master." in flat
    assert long_name in text and "12,346" in text and "40.00" in text and "neither" in text
    assert f"{long_name}: audit FAIL (90,000 enqueued" in flat and "lost 3" in flat
    assert "Accounting: FAIL on b (per queue, driver completes == server completes; 2 queues, 17 completes" in flat
    assert "Bound: client (driver 99% busy over 2 cores; busiest node 10.0.0.1:7000 at 40%)." in flat
    assert "vc: audit FAIL over 1 master." in flat and "vc 10.0.0.1:7000: audit FAIL (90,000 enqueued" in flat
    assert f"No ceiling for {long_name}: --no-ceiling" in flat and "cores were full" not in flat


@pytest.mark.parametrize("passed, code", [(True, 0), (False, 1)])
def test_the_command_prints_its_record_and_fails_on_a_failed_audit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        passed: bool, code: int) -> None:
    def measured(spec: Any, settings: CapacitySettings, **_: Any) -> CapacityResult:
        return _result(spec.name, 50_000, audit={**AUDIT, "passed": passed})

    monkeypatch.setattr(command, "measure", measured)
    out = tmp_path / "cap"
    assert main(["capacity", "--server", "redis", "--duration", "2s", "--out", str(out)]) == code
    printed = capsys.readouterr().out
    assert printed == record_text(out) + f"\nresults: {out}\n"
    assert _row(printed, "redis")[3] == "25,000" and f"audit {'PASS' if passed else 'FAIL'}" in printed

