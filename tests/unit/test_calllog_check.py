"""The call-log checker on hand-made call logs with known answers: each class,
each fencing violation, a clean call log; the recorder's lines read back; and
the checker standing apart from the load engine and the server."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from echomq_bench.measurement.calllog_check import CHECKS, CLASSES, CallLogCheck, check, check_files, parse
from tests.helpers import ROOT

A, B, C, D, E = "JOB000000000A0", "JOB000000000B0", "JOB000000000C0", "JOB000000000D0", "JOB000000000E0"
EMPTY: dict[str, set[str]] = {}


class HandLog:
    """A call log written by hand: `op` records an invocation and its outcome."""

    def __init__(self) -> None:
        self.files: dict[str, list[str]] = {}

    def line(self, process: str, type_: str, f: str, job: str | None, token: int | None, t: float,
             **extra: Any) -> None:
        fault = extra.pop("fault", None)
        self.files.setdefault(process, []).append(json.dumps(
            {"type": type_, "process": process, "f": f, "job": job, "token": token, "t": t, "server_ms":
             extra.pop("server_ms", None), "fault": fault, **extra}))

    def op(self, process: str, f: str, t0: float, t1: float | None, out: str = "ok", job: str | None = None,
           token: int | None = None, **extra: Any) -> None:
        invoke_job = None if f == "claim" else job
        invoke_token = token if f in ("complete", "retry") else None
        self.line(process, "invoke", f, invoke_job, invoke_token, t0, **dict(extra))
        if t1 is not None:
            self.line(process, out, f, job if out == "ok" or f != "claim" else None,
                      token if out == "ok" or f != "claim" else None, t1, **extra)

    def lifecycle(self, job: str, t: float, token: int = 1, lease_ms: int = 1000) -> None:
        """Enqueued, claimed, completed: a clean job."""
        self.op("producer", "enqueue", t, t + 0.001, job=job)
        self.op("consumer", "claim", t + 0.01, t + 0.011, job=job, token=token, lease_ms=lease_ms)
        self.op("consumer", "complete", t + 0.02, t + 0.021, job=job, token=token)

    def check(self, final: dict[str, set[str]] | None = None, **kw: Any) -> CallLogCheck:
        return check(parse(self.files.values()), final or EMPTY, **kw)


def nonzero(result: CallLogCheck) -> dict[str, int]:
    return {k: v for k, v in result.counts.items() if v}


def test_a_clean_call_log_is_all_ok() -> None:
    h = HandLog()
    h.lifecycle(A, 1.0)
    h.lifecycle(B, 2.0)
    h.op("producer", "enqueue", 3.0, 3.001, job=C)          # still pending at the end
    h.op("pump", "reap", 3.1, 3.2, value=0)
    result = h.check({"pending": {C}})
    assert result.passed and nonzero(result) == {"ok": 3}
    assert result.jobs == 3 and result.operations == 8 and result.processes == 3
    assert result.by_fault == {"none": {**dict.fromkeys((*CLASSES, *CHECKS), 0), "ok": 3}}


def test_lost_is_an_accepted_enqueue_never_completed_and_held_nowhere() -> None:
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("producer", "enqueue", 1.1, 1.101, job=B)
    h.op("consumer", "claim", 1.2, 1.201, job=B, token=1, lease_ms=1000)
    h.op("consumer", "complete", 1.3, 1.301, out="fail", job=B, token=1, error="StaleTokenError")
    result = h.check()
    assert not result.passed and nonzero(result) == {"lost": 2}
    assert result.examples["lost"] == [A, B]


def test_a_complete_of_unknown_outcome_and_a_job_held_nowhere_is_completed() -> None:
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("consumer", "claim", 1.2, 1.201, job=A, token=1, lease_ms=1000)
    h.op("consumer", "complete", 1.3, None, job=A, token=1)   # killed before the reply: no outcome line
    result = h.check()
    assert result.passed and nonzero(result) == {"ok": 1}


def test_recovered_indeterminate_and_refused_enqueues() -> None:
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.5, out="info", job=A, error="ServerUnavailableError")   # yet claimed
    h.op("consumer", "claim", 2.0, 2.001, job=A, token=1, lease_ms=1000)
    h.op("consumer", "complete", 2.1, 2.101, job=A, token=1)
    h.op("producer", "enqueue", 3.0, None, job=B)                      # no outcome, present at the end
    h.op("producer", "enqueue", 4.0, 4.5, out="info", job=C)          # unknown, never seen
    h.op("producer", "enqueue", 5.0, 5.001, out="fail", job=D, error="OutOfMemoryError")
    result = h.check({"dead": {B}})
    assert result.passed
    assert nonzero(result) == {"recovered": 2, "indeterminate": 1, "refused": 1}


def test_unexpected_jobs_came_from_no_enqueue_but_initial_ones_are_left_out() -> None:
    h = HandLog()
    h.lifecycle(A, 1.0)
    h.op("consumer", "claim", 2.0, 2.001, job=B, token=1, lease_ms=1000)   # never enqueued here
    h.op("producer", "enqueue", 3.0, 3.001, out="fail", job=C, error="OutOfMemoryError")
    h.op("consumer", "claim", 3.1, 3.101, job=C, token=1, lease_ms=1000)   # refused, yet handed out
    result = h.check({"pending": {D}})
    assert not result.passed and nonzero(result) == {"ok": 1, "unexpected": 3}
    assert nonzero(h.check({"pending": {D}}, initial={B, D})) == {"ok": 1, "unexpected": 1}


def test_duplicated_is_two_accepted_completes_or_one_and_still_held() -> None:
    h = HandLog()
    h.lifecycle(A, 1.0)
    h.op("zombie", "complete", 1.05, 1.051, job=A, token=1)
    h.lifecycle(B, 2.0)
    result = h.check({"pending": {B}})
    assert not result.passed and nonzero(result)["duplicated"] == 2


def test_a_token_handed_out_twice_or_falling_is_caught() -> None:
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("c1", "claim", 1.1, 1.101, job=A, token=2, lease_ms=1000)
    h.op("c2", "claim", 2.5, 2.501, job=A, token=1, lease_ms=1000)   # after the first, a smaller token
    h.op("c2", "complete", 2.6, 2.601, job=A, token=1)
    result = h.check()
    assert result.counts["token_fell"] == 1 and not result.passed
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=B)
    h.op("c1", "claim", 1.1, 1.101, job=B, token=1, lease_ms=1000)
    h.op("c2", "claim", 2.5, 2.501, job=B, token=1, lease_ms=1000)   # the same token again
    h.op("c2", "complete", 2.6, 2.601, job=B, token=1)
    assert h.check().counts["token_fell"] == 1


def test_a_complete_accepted_after_a_newer_claim_is_stale() -> None:
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("c1", "claim", 1.1, 1.101, job=A, token=1, lease_ms=1000)
    h.op("c2", "claim", 2.5, 2.501, job=A, token=2, lease_ms=1000)
    h.op("c1", "complete", 2.6, 2.601, job=A, token=1)               # the zombie's complete, accepted
    result = h.check()
    assert nonzero(result) == {"ok": 1, "stale_accepted": 1} and not result.passed
    assert result.examples["stale_accepted"] == [A]
    # Refused, as it must be: clean.
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=B)
    h.op("c1", "claim", 1.1, 1.101, job=B, token=1, lease_ms=1000)
    h.op("c2", "claim", 2.5, 2.501, job=B, token=2, lease_ms=1000)
    h.op("c1", "complete", 2.6, 2.601, out="fail", job=B, token=1, error="StaleTokenError")
    h.op("c2", "complete", 2.7, 2.701, job=B, token=2)
    assert h.check().passed


def test_leases_overlap_when_the_next_claim_came_inside_the_first_lease() -> None:
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("c1", "claim", 1.1, 1.101, job=A, token=1, lease_ms=1000)
    h.op("c2", "claim", 1.5, 1.501, job=A, token=2, lease_ms=1000)   # 0.4 s into a 1 s lease, nothing settled
    h.op("c2", "complete", 1.6, 1.601, job=A, token=2)
    result = h.check()
    assert nonzero(result) == {"ok": 1, "lease_overlap": 1}
    assert result.leases == {"exact": 0, "by_client": 1, "undecided": 0}


def test_leases_after_a_reap_or_an_accepted_retry_do_not_overlap() -> None:
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("c1", "claim", 1.1, 1.101, job=A, token=1, lease_ms=1000)
    h.op("c2", "claim", 2.2, 2.201, job=A, token=2, lease_ms=1000)   # after the deadline: reaped
    h.op("c2", "retry", 2.3, 2.301, job=A, token=2, value="scheduled")
    h.op("c1", "claim", 2.4, 2.401, job=A, token=3, lease_ms=1000)   # promoted after the retry
    h.op("c1", "claim", 2.405, 2.41, job=B, token=1, lease_ms=1000)  # B never enqueued: unexpected
    h.op("c1", "complete", 2.5, 2.501, job=A, token=3)
    result = h.check()
    assert result.counts["lease_overlap"] == 0 and result.counts["ok"] == 1
    assert result.leases == {"exact": 0, "by_client": 2, "undecided": 0}


def test_an_overlap_too_close_to_tell_is_undecided_and_server_times_decide_exactly() -> None:
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("c1", "claim", 1.1, 1.9, job=A, token=1, lease_ms=1000)     # a slow reply: 0.8 s of doubt
    h.op("c2", "claim", 2.2, 2.201, job=A, token=2, lease_ms=1000)
    h.op("c2", "complete", 2.3, 2.301, job=A, token=2)
    assert h.check().leases == {"exact": 0, "by_client": 0, "undecided": 1}
    # Within a millisecond of the lease: the server reads its clock in whole ms, so that may be a reap.
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("c1", "claim", 1.1, 1.1001, job=A, token=1, lease_ms=300)
    h.op("c2", "claim", 1.3998, 1.3999, job=A, token=2, lease_ms=300)
    h.op("c2", "complete", 1.5, 1.501, job=A, token=2)
    result = h.check()
    assert result.counts["lease_overlap"] == 0 and result.leases["undecided"] == 1
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("c1", "claim", 1.1, 1.9, job=A, token=1, lease_ms=1000, server_ms=1_000_000)
    h.op("c2", "claim", 2.2, 2.201, job=A, token=2, lease_ms=1000, server_ms=1_000_900)
    h.op("c2", "complete", 2.3, 2.301, job=A, token=2)
    result = h.check()
    assert result.leases == {"exact": 1, "by_client": 0, "undecided": 0} and result.counts["lease_overlap"] == 1


def test_jobs_are_counted_under_the_fault_that_struck_them() -> None:
    h = HandLog()
    h.lifecycle(A, 1.0)                                                # before any fault
    h.op("producer", "enqueue", 2.0, 2.001, job=B, fault="pause")      # sent while the server slept
    h.op("consumer", "claim", 3.0, 3.001, job=B, token=1, lease_ms=1000)
    h.op("consumer", "complete", 3.1, 3.101, job=B, token=1)
    h.lifecycle(C, 4.0)
    h.line("nemesis", "info", "strike", C, 1, 4.015, fault="kill")    # its holder killed
    h.op("producer", "enqueue", 5.0, 5.001, job=D)                     # lost in the restart after it
    h.line("nemesis", "info", "start", None, None, 6.0, fault="restart")
    h.op("producer-2", "enqueue", 5.9, 6.6, out="info", job=E)          # sent before, its reply lost to it
    h.line("nemesis", "info", "stop", None, None, 6.5, fault="restart")
    result = h.check()
    assert {k: {c: n for c, n in v.items() if n} for k, v in result.by_fault.items()} == {
        "none": {"ok": 1}, "pause": {"ok": 1}, "kill": {"ok": 1}, "restart": {"lost": 1, "indeterminate": 1}}
    assert "fault restart: lost 1, indeterminate 1" in result.format()


def test_clocks_of_different_machines_are_not_compared() -> None:
    h = HandLog()
    h.op("producer", "enqueue", 1.0, 1.001, job=A)
    h.op("c1", "claim", 1.1, 1.101, job=A, token=2, lease_ms=1000)
    h.op("c2", "claim", 9.5, 9.501, job=A, token=1, lease_ms=1000)   # another machine's clock
    h.op("c2", "complete", 9.6, 9.601, job=A, token=1)
    assert h.check().counts["token_fell"] == 1
    result = h.check(one_clock=False)
    assert result.counts["token_fell"] == 0 and result.leases["undecided"] == 1


def test_the_recorder_writes_what_the_checker_reads(tmp_path: Path) -> None:
    from echomq._instrument import verbs
    from echomq.errors import ServerUnavailableError, StaleTokenError
    from echomq._instrument import QueueKeys
    from echomq_bench.measurement.calllog import CallLog, LoggedCalls

    keys = QueueKeys("h")
    replies: list[Any] = [b"enqueued", [A.encode(), b"x", 1], StaleTokenError("stale"), b"ok", 3]

    class Calls:
        def call(self, call: verbs.ScriptCall) -> Any:
            reply = replies.pop(0)
            if isinstance(reply, BaseException):
                raise reply
            return reply

        def pipeline(self, calls: list[verbs.ScriptCall]) -> list[Any]:
            raise ServerUnavailableError("gone")

        def command(self, *args: Any) -> Any:
            return 0

    call_log = CallLog(tmp_path / "p.jsonl", durable=True)
    calls = LoggedCalls(Calls(), call_log, "w-1", fault=lambda: "latency")
    calls.call(verbs.enqueue(keys, A, b"x"))
    calls.call(verbs.claim(keys, 500))
    with pytest.raises(StaleTokenError):
        calls.call(verbs.complete(keys, A, 7))
    calls.call(verbs.complete(keys, A, 1))
    assert calls.call(verbs.reap(keys, 100, 3)) == 3
    with pytest.raises(ServerUnavailableError):
        calls.pipeline([verbs.enqueue(keys, B, b"x"), verbs.enqueue(keys, C, b"x")])
    assert calls.command("ZCARD", keys.pending) == 0
    call_log.note("strike", "kill", A, 1)
    call_log.close()
    lines = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(lines) == 15 and all(x["fault"] == "latency" for x in lines[:14])
    assert lines[3] == {"type": "ok", "process": "w-1", "f": "claim", "job": A, "token": 1, "t": lines[3]["t"],
                        "server_ms": None, "fault": "latency", "lease_ms": 500}
    assert [(x["type"], x.get("error")) for x in lines[4:6]] == [("invoke", None), ("fail", "StaleTokenError")]
    assert lines[9]["value"] == 3 and lines[-2]["type"] == "info"
    result = check_files([tmp_path / "p.jsonl"], {})
    assert nonzero(result) == {"ok": 1, "indeterminate": 2} and result.passed
    assert result.processes == 1 and result.operations == 7


def test_the_checker_imports_neither_the_load_engine_nor_a_server_client() -> None:
    folder = ROOT / "echomq_bench" / "measurement"
    for name in ("calllog_check.py", "calllog_tokens.py"):
        tree = ast.parse((folder / name).read_text())
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert {m for m in imported if m.split(".")[0] in ("echomq", "redis", "locust", "gevent")} == set(), name
        assert {m for m in imported if m.startswith("echomq_bench")} <= {"echomq_bench.measurement.calllog_tokens"}
