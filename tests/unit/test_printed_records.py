"""What `faults`, `faults --soak`, `failover` and `gate` print: their record as
written, rendered by `record_text`. Each test builds a small record the way
its command does, writes it, and reads the terminal text back: the real
figures are there, and no line is wider than 100 columns."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from echomq_bench.records.files import write_record
from echomq_bench.report import record_text
from echomq_bench.report.text import WIDTH
from tests.helpers import ROOT

META: dict[str, Any] = {"created_utc": "2026-12-03T10:00:00+00:00", "machine": {"cpu_model": "test", "cpu_count": 2},
                        "servers": [{"name": "redis", "version": "redis 7.0.15", "allocator": "jemalloc-5.3.0"}]}


def _fits(text: str) -> None:
    wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not wide, wide


def _rows(text: str, *first: str) -> list[list[str]]:
    """The cells of each table line whose first cells are `first`, split on the column gaps."""
    cells = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]
    return [c for c in cells if c[:len(first)] == list(first)]


def _row(text: str, *first: str) -> list[str]:
    return _rows(text, *first)[0]


# -- faults -------------------------------------------------------------------------------------------------------


def _audit(enqueued: int, completed: int, lost: int = 0, double_accepted: int = 0, **more: int) -> Any:
    """A scenario's audit as the runner keeps it: the figures its scenario entry copies, and the rest."""
    from echomq_bench.records.kinds.faults import AuditEntry

    return AuditEntry.from_record({"enqueued": enqueued, "completed": completed, "lost": lost,
                                   "double_accepted": double_accepted, "in_two_places": 0, "zombie_sent": 0,
                                   "zombie_accepted": 0, **more})


def _outcomes() -> list[Any]:
    from echomq_bench.records.kinds.faults import CheckEntry, ScenarioEntry

    crash = ScenarioEntry("redis", "redis 7.0.15", "crash", "2 consumers SIGKILLed mid-lease", recovery_means="kill "
                          "to the last killed job completed by its next holder", jobs=2433, completed=2431, faults=4,
                          refused_expected=3, unanswered=1, ambiguous=2, ambiguous_resolved=2, recovery_s=1.1,
                          passed=True, checks=(CheckEntry(True, "2/2 consumers killed while holding a lease"),
                                               CheckEntry(True, "audit: lost 0, in two places 0, unknown ids 0")),
                          audit=_audit(2433, 2431))
    zombie = ScenarioEntry("redis", "redis 7.0.15", "zombie", "2 consumers SIGSTOPped past their lease", jobs=517,
                           completed=502, faults=2, refused_expected=2, recovery_s=1.05, passed=False,
                           checks=(CheckEntry(False, "completes accepted twice 1, zombie completes accepted 1"),),
                           double_accepted=1, audit=_audit(517, 502, double_accepted=1, in_two_places=2,
                                                           zombie_sent=2, zombie_accepted=1))
    nopersist = ScenarioEntry("redis", "redis 7.0.15", "restart-nopersist", "the server SIGKILLed and restarted",
                              jobs=2522, completed=2427, faults=1, lost=95, recovery_s=0.03, passed=True,
                              audit=_audit(2522, 2427, lost=95))
    pause = ScenarioEntry("redis", "", "pause", "the server SIGSTOPped",
                          skipped="needs an embedded server (it signals or restarts the server process)")
    return [crash, zombie, nopersist, pause]


def test_faults_prints_each_scenarios_audit_fault_and_checks(tmp_path: Path) -> None:
    from echomq_bench.commands.faults import faults_record

    write_record(tmp_path, faults_record(_outcomes(), META, quick=True))
    text = record_text(tmp_path)
    _fits(text)
    assert "redis: redis 7.0.15" in text
    # scenario, enqueued, completed, lost, accepted twice, in two places, verdict
    assert _row(text, "crash")[:7] == ["crash", "2433", "2431", "0", "0", "0", "PASS"]
    assert _row(text, "zombie")[:7] == ["zombie", "517", "502", "0", "1", "2", "FAIL"]
    assert _row(text, "restart-nopersist")[:7] == ["restart-nopersist", "2522", "2427", "95", "0", "0",
                                                   "PASS (loss detected)"]
    assert _row(text, "pause") == ["pause", "skipped"]
    # scenario, faults, recovery s, refused ok, refused bad, zombie sent/accepted, lost replies, unanswered
    assert _rows(text, "crash")[1] == ["crash", "4", "1.10", "3", "0", "0/0", "2/2", "1"]
    assert _rows(text, "zombie")[1] == ["zombie", "2", "1.05", "2", "0", "2/1", "0/0", "0"]
    assert "Skipped on redis: pause: needs an embedded server (it signals or restarts the server process)." in text
    assert "crash: 2 consumers SIGKILLed mid-lease; recovery = kill to the last killed job completed by its" in text
    assert "ok   2/2 consumers killed while holding a lease" in text
    assert "FAIL completes accepted twice 1, zombie completes accepted 1" in text


def _soak() -> Any:
    from echomq_bench.faults.soak import tallied
    from echomq_bench.records.kinds.faults import CheckEntry, SoakEntry, StruckEntry

    faults = (StruckEntry("zombie", "process", 2.0, 2.0, 4.1, "1 consumers SIGSTOPped", True, 0.0),
              StruckEntry("half-open", "network", 7.0, 7.4, 7.5, "7 connections half-open", True, 0.4),
              StruckEntry("oom", "process", 10.0, 10.6, 12.0, "maxmemory = in use + 128 KiB", True, None))
    return tallied(SoakEntry("redis", "redis 7.0.15", 7, 20.0, {"zombie": 1, "half-open": 1, "oom": 1}, faults=faults,
                             timeline=(250, 260, 100, 270) * 5, jobs=5691, completed=5691, ambiguous=6,
                             ambiguous_resolved=6, passed=True,
                             checks=(CheckEntry(True, "3/3 scheduled faults injected"),
                                     CheckEntry(True, "6/6 calls whose reply was lost resolved: "
                                                      "enqueue 0 landed / 2 not"))))


def test_a_soak_prints_its_seed_faults_audit_recovery_and_chart(tmp_path: Path) -> None:
    from echomq_bench.faults.soakreport import draw_timelines, soak_record
    from echomq_bench.records.record import read_record

    write_record(tmp_path, soak_record([_soak()], META))
    written = read_record(tmp_path)
    draw_timelines(written.summary, written.tables, tmp_path)
    text = record_text(tmp_path)
    _fits(text)
    assert _row(text, "seed") == ["seed", "7 (replay with --seed 7)"]
    assert _row(text, "faults injected") == ["faults injected", "zombie 1, oom 1, half-open 1 (3 of 3 planned)"]
    for figure, value in (("jobs enqueued", "5691"), ("lost", "0"), ("accepted twice", "0"),
                          ("lost replies resolved", "6"), ("lost replies unresolved", "0"), ("verdict", "PASS")):
        assert _row(text, figure) == [figure, value]
    # server, kind, family, injected, recovered, p50 s, p99 s
    assert _row(text, "redis", "half-open") == ["redis", "half-open", "network", "1", "1", "0.40", "0.40"]
    assert _row(text, "redis", "oom") == ["redis", "oom", "process", "1", "0"]
    assert "ok   6/6 calls whose reply was lost resolved" in text
    assert "chart: soak-redis.png" in text


# -- failover -----------------------------------------------------------------------------------------------------


def _failover_result() -> Any:
    from echomq_bench.load.audit import AuditReport
    from echomq_bench.records.kinds.failover import FailoverRun

    audit = AuditReport(enqueued=600, completed=590, pending=10, active=0, scheduled=0, dead=0, lost=0,
                        in_two_places=0, unknown=0, double_accepted=0, zombie_sent=0, zombie_accepted=0, refused=3,
                        refused_not_superseded=0, examples={"refused": ["j1", "j2"]})
    result = FailoverRun(name="redis-cluster", version="redis 7.0.15", queues=("fo0", "fo2"),
                         victim="127.0.0.1:7001", new_master="127.0.0.1:7004", kill_to_promoted_s=1.37,
                         kill_to_ready_s=1.52, kill_to_resumed_s=1.61, errors_window_s=1.4,
                         errors={"ConnectionError": 12, "ServerUnavailableError": 3}, ops=640, load_s=4.2,
                         doubt_enqueue=2, doubt_enqueue_found=1, doubt_complete=1, doubt_complete_gone=1,
                         audit=audit.to_dict(), kill_to_claim_only_s=1.58, claim_only_failed=27)
    return result


def test_failover_prints_the_kill_the_times_the_doubts_and_the_audit(tmp_path: Path) -> None:
    from echomq_bench.faults.failover_result import failover_record

    result = _failover_result()
    write_record(tmp_path, failover_record([result], META))
    text = record_text(tmp_path)
    _fits(text)
    for figure, value in (("master killed (SIGKILL)", "127.0.0.1:7001"),
                          ("replica that took its slots", "127.0.0.1:7004"), ("kill to promoted, s", "1.37"),
                          ("kill to every node ok, s", "1.52"),
                          ("kill to fo0 enqueues acked again, s", "1.61"),
                          ("kill to a claim-only worker served again, s", "1.58 (27 claims failed first)"),
                          ("jobs enqueued", "600 in 4.2 s (143/s)"),
                          ("calls that failed", "15 of 640 over 1.40 s"),
                          ("failed calls by error", "ConnectionError 12, ServerUnavailableError 3"),
                          ("enqueues in doubt", "2 (1 found on the server, so counted)"),
                          ("completes in doubt", "1 (1 rows gone, so counted completed)"),
                          ("audit", "PASS"), ("lost", "0"), ("in two places", "0"),
                          ("refused completes / with a token not superseded (must be 0)", "3 / 0")):
        assert _row(text, figure) == [figure, value]
    assert "600 = 590 + 10 + 0 + 0 + 0" in text
    assert "redis-cluster, e.g. refused: j1, j2" in text


# -- the call-log check, in faults, the soak and failover --------------------------------------------------------


def _call_log_check(kind: str) -> dict[str, Any]:
    """A call-log check's record as the runs keep it: 10 jobs, 2 under `kind`, one of them recovered."""
    import json

    from echomq_bench.measurement.calllog_check import check, parse

    jobs = [f"JOB00000000{i:02d}0" for i in range(10)]
    lines = []
    for i, job in enumerate(jobs):
        fault = kind if i < 2 else None
        enqueue = "info" if i == 0 else "ok"
        lines += [{"type": "invoke", "process": "p", "f": "enqueue", "job": job, "t": i, "fault": fault},
                  {"type": enqueue, "process": "p", "f": "enqueue", "job": job, "t": i + 0.1, "fault": fault}]
    result = check(parse([[json.dumps(x) for x in lines]]), {"pending": set(jobs)})
    return {**result.to_dict(), "ok": result.passed, "expects_loss": False}


def test_the_call_log_check_is_printed_per_fault_kind(tmp_path: Path) -> None:
    from dataclasses import replace

    from echomq_bench.commands.faults import faults_record
    from echomq_bench.faults.soakreport import soak_record

    crash = replace(_outcomes()[0], history=_call_log_check("crash"))
    write_record(tmp_path / "faults", faults_record([crash], META, quick=True))
    text = record_text(tmp_path / "faults")
    _fits(text)
    # scenario, jobs, ok, lost, recov., unexp., dup., unknown, refused, fencing
    assert _rows(text, "crash")[2] == ["crash", "under fault", "1", "0", "1", "0", "0", "0", "0", "0/0/0"]
    assert _rows(text, "crash")[3] == ["crash", "no fault", "8", "0", "0", "0", "0", "0", "0", "0/0/0"]
    assert "Lost, unexp., dup. and fencing must be 0." in " ".join(text.split())
    soak = replace(_soak(), history=_call_log_check("zombie"))
    write_record(tmp_path / "soak", soak_record([soak], META))
    text = record_text(tmp_path / "soak")
    _fits(text)
    assert _row(text, "call-log check") == ["call-log check", "PASS"]
    assert _row(text, "redis", "zombie", "1") == ["redis", "zombie", "1", "0", "1", "0", "0", "0", "0", "0/0/0"]
    assert _row(text, "redis", "none") == ["redis", "none", "8", "0", "0", "0", "0", "0", "0", "0/0/0"]


def test_failover_prints_its_call_log_check(tmp_path: Path) -> None:
    from dataclasses import replace

    from echomq_bench.faults.failover_result import failover_record

    result = replace(_failover_result(), history=_call_log_check("failover"))
    write_record(tmp_path, failover_record([result], META))
    text = record_text(tmp_path)
    _fits(text)
    for figure, value in (("call-log check", "PASS"), ("jobs classified", "10"), ("recov.", "1"),
                          ("fencing", "0 / 0 / 0"), ("under the failover (kill to every node ok)", "ok 1, recovered 1"),
                          ("under no fault", "ok 8")):
        assert _row(text, figure) == [figure, value]


# -- gate ---------------------------------------------------------------------------------------------------------


def _batch(case: str, us: int) -> Any:
    from echomq_bench.microbench.figures import Batch

    n = 10
    return Batch(case, server_us=[us] * n, client_us=[us + 150.0] * n, noop_us=[2] * n, noop_client_us=[90.0] * n,
                 ping_us=[0] * n, ping_client_us=[80.0] * n, ref_us=[180] * n, ref_client_us=[300.0] * n)


def _gate_result(same_machine: bool) -> Any:
    from echomq_bench.microbench.figures import Measurement
    from echomq_bench.microbench.gate import GateResult, verdicts
    from echomq_bench.microbench.settings import QUICK

    rounds = [{"claim": _batch("claim", 27), "complete": _batch("complete", 11)} for _ in range(4)]
    ab_rounds = [{"claim": _batch("claim", 20)} for _ in range(4)]
    m = Measurement("redis", "redis 7.0.15", str(ROOT / "lua"), QUICK, rounds, ab_rounds, wall_s=10.0,
                    server_main_cpu_s=4.0, client_cpu_s=9.0)
    base = {"version": "redis 7.0.14", "created_utc": "2026-12-01T05:00:00+00:00", "git": {"commit": "2c720de9a1b"},
            "history_run": "/r/gate-1", "figures": {"claim": {"server_ratio": 0.1, "reference": "read_100"},
                                                    "complete": {"server_ratio": 0.06, "reference": "read_100"}}}
    found = verdicts(m, base, 0.2, 0.1, same_machine)
    found = [v if v.case != "claim" else type(v)(**{**vars(v), "confirmed": True}) for v in found]
    return GateResult("redis", "redis 7.0.15", Path("/r/gate-1"), base, m, found, ["claim"],
                      same_machine=same_machine, differences=[] if same_machine else ["cores 2 here, 64 saved"])


def test_gate_prints_each_verb_the_ab_the_baseline_and_the_verdict_last(tmp_path: Path) -> None:
    from echomq_bench.commands.gate import gate_record

    result = _gate_result(same_machine=False)
    write_record(tmp_path, gate_record([result], META))
    text = record_text(tmp_path)
    _fits(text)
    # verb, server µs, client µs, baseline, now, change, allowed, verdict
    assert _row(text, "claim") == ["claim", "27.00", "177.0", "0.100", "0.150", "+50.0%", "advisory", "SLOWER"]
    assert _row(text, "complete") == ["complete", "11.00", "161.0", "0.060", "0.061", "+1.8%", "advisory", "ok"]
    assert _row(text, "read_100")[:3] == ["read_100", "180.00", "300.0"]
    assert _rows(text, "claim")[1] == ["claim", "+35.0%", "+10%", "SLOWER"]
    flat = " ".join(text.split())
    assert ("Baseline from the results history: the gate run in /r/gate-1 (revision 2c720de9a1; redis 7.0.14, "
            "2026-12-01T05:00:00+00:00).") in flat
    assert "the baseline was measured on redis 7.0.14" in flat
    assert "is not this one's (cores 2 here, 64 saved): the normalised change is advisory" in flat
    assert "Scripts that differ from the baseline's: claim" in flat
    assert "ok (cross-run figure advisory: another machine): complete" in flat
    assert text.splitlines()[-1] == "REGRESSION on redis: claim"


def test_gate_names_an_inconclusive_verb_on_its_last_line(tmp_path: Path) -> None:
    import dataclasses

    from echomq_bench.commands.gate import gate_record

    result = _gate_result(same_machine=True)
    noisy = [dataclasses.replace(v, noisy=True, change=0.05, ab_change=None, ab_allowed=None, confirmed=None)
             for v in result.verdicts]
    write_record(tmp_path, gate_record([dataclasses.replace(result, verdicts=noisy)], META))
    text = record_text(tmp_path)
    _fits(text)
    assert "this one's: the normalised check counts" in " ".join(text.split())
    assert text.splitlines()[-1] == "INCONCLUSIVE on redis: claim, complete (noise above tolerance)"
