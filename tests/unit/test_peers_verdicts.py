"""The peers verdicts at their unit, the round, on synthetic runs: failed rounds count against a queue,
the headline pools rounds of one kind only, and a server's family of verdicts holds together."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from echomq_bench.measurement.serverstats import Usage
from echomq_bench.measurement.verdicts import log_half_width
from echomq_bench.peers.result import PeerRun, Phase
from echomq_bench.peers.rounds import PeersSettings
from echomq_bench.peers.summary import build_record, ratio_rows
from echomq_bench.records.kinds.peers import PeersRecord, QueueEntry

SERVER = "redis7.0"
JOBS = 1_000


def _run(queue: str, trial: int, server_us: float, *, clean: bool = True, mode: str = "default") -> PeerRun:
    """One run of 1,000 jobs costing the server `server_us` per job; an unclean one ran a job twice."""
    def phase(cpu_s: float) -> Phase:
        usage = Usage(wall_s=0.1, cpu_s=cpu_s, main_cpu_s=cpu_s, commands={"evalsha": (7_000, 1_000)})
        return Phase(jobs=JOBS, wall_s=0.1, server=usage, client_cpu_s=0.05, reads=JOBS)

    cpu = server_us * JOBS / 1e6
    return PeerRun(server=SERVER, server_version="redis 7.0.15", queue=queue, mode=mode, trial=trial, jobs=JOBS,
                   consumers=2, enqueue=phase(cpu / 4), drain=phase(3 * cpu / 4), used_memory_before=1_000_000,
                   used_memory_enqueued=1_300_000, used_memory_drained=1_000_000, accepted=JOBS,
                   ran=JOBS if clean else JOBS + 1, intact=JOBS if clean else JOBS + 1,
                   after_enqueue={"pending": JOBS}, leftovers={"pending": 0, "kept": 0, "rows": 0, "detail": ""},
                   keys_after=0)


def _wobble(trial: int) -> float:
    """A trial's small departure from the true figure, the same for every queue that uses it: ±0.6%."""
    return 1 + 0.006 * math.sin(1.7 * trial + 0.3)


def _settings(trials: int, modes: tuple[str, ...] = ("default",)) -> PeersSettings:
    return PeersSettings(jobs=JOBS, consumers=2, trials=trials, timeout_s=60, servers=(), modes=modes)


def _entry(record: PeersRecord, queue: str) -> QueueEntry:
    return next(e for e in record.queues if e.queue == queue)


def test_failed_rounds_count_against_the_queue_and_most_failed_gets_no_verdict(tmp_path: Path) -> None:
    from echomq_bench.records.record import Record
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    rounds = 13
    runs = [_run("bullmq-node", t, 100.0) for t in range(rounds)]
    # Each queue costs half the baseline's server time in every round it survives: the survivors flatter it.
    runs += [_run("saq", t, 50.0 * _wobble(t), clean=t >= 7) for t in range(rounds)]     # 7 of 13 not clean
    runs += [_run("huey", t, 60.0 * _wobble(t), clean=t != 3) for t in range(rounds)]    # 1 of 13 not clean
    runs += [_run("arq", t, 70.0 * _wobble(t)) for t in range(6)]                       # 7 of 13 errored
    failures = [{"server": SERVER, "queue": q, "mode": "default", "trial": t, "error": "timed out"}
                for q, first in (("arq", 6), ("celery", 0)) for t in range(first, rounds)]
    names = ["bullmq-node", "saq", "huey", "arq", "celery"]
    record = build_record(runs, names, {}, failures, _settings(rounds))

    assert [e.queue for e in record.queues] == names   # celery too, which errored in every round
    failed = {"saq": 7, "arq": 7, "celery": 13}
    for queue, k in failed.items():   # failed in most rounds: no ratio, no interval, a failed verdict
        v = _entry(record, queue).vs_baseline["server_us_per_job"]
        assert (v.verdict, v.ratio, v.ci) == ("failed", None, None), queue
        assert v.text == f"failed: {k} of 13 rounds failed, no verdict"
    huey = _entry(record, "huey").vs_baseline["server_us_per_job"]
    assert (huey.verdict, huey.n, huey.text) == ("faster", 12, "faster; 1 of 13 rounds failed")
    counts = {e.queue: (e.attempted, e.failed) for e in record.queues}
    assert counts == {"bullmq-node": (13, 0), "saq": (13, 7), "huey": (13, 1), "arq": (13, 7), "celery": (13, 13)}
    assert not _entry(record, "saq").drained_clean and _entry(record, "bullmq-node").drained_clean
    # The failed verdicts are rows of the ratio table too, without a ratio.
    failed_rows = [r for r in ratio_rows(record) if r["metric"] == "server_us_per_job" and r["ratio"] is None]
    assert sorted(r["queue"] for r in failed_rows) == ["arq", "celery", "saq"]
    assert PeersRecord.from_record(record.to_record()) == record

    write_record(tmp_path, Record(kind="peers", summary=record.to_record(), meta={"settings": {"kind": "peers"}}))
    printed = record_text(tmp_path)
    text = " ".join(printed.split())
    assert "redis7.0 saq default 5,000 5,000-5,000 100 100-100 6 of 13" in text
    # The ratio table wraps its verdict cells: the verdicts start on the queues' own lines.
    rows = {line.split()[1]: line for line in printed.splitlines() if line.startswith(f"{SERVER}  ")}
    assert "failed: 7 of 13" in rows["saq"] and "faster; 1 of 13" in rows["huey"]
    assert "redis7.0 celery (default) 13 of 13" in text
    assert "FAILED redis7.0 arq (default) interleaved rounds, trials 6, 7, 8, 9, 10, 11, 12: timed out" in text


def test_the_headline_pools_rounds_of_one_kind_only() -> None:
    from echomq_bench.peers.headline import headline_ratios
    from echomq_bench.peers.result import HEADLINE_ROUNDS, INTERLEAVED

    interleaved, alone = range(6), range(6, 14)
    # Minutes apart among every queue, echomq costs 0.50 of bullmq-node; back to back, alone, 0.40.
    runs = [_run("bullmq-node", t, 100.0) for t in range(14)]
    runs += [_run("echomq", t, 50.0 * _wobble(t)) for t in interleaved]
    runs += [_run("echomq", t, 40.0 * _wobble(t)) for t in alone]
    runs += [_run("rq", t, 500.0) for t in interleaved]
    runs = [replace(r, rounds=HEADLINE_ROUNDS if r.trial in alone else INTERLEAVED) for r in runs]
    record = build_record(runs, ["echomq", "bullmq-node", "rq"], {}, [], _settings(6))

    (head,) = record.headline.verdicts
    assert (head.server, head.mode, head.rounds, head.attempted, head.failed) == (SERVER, "default", "headline", 8, 0)
    assert head.verdict.n == 8
    assert head.verdict.ratio == pytest.approx(0.40 * math.exp(np.mean([math.log(_wobble(t)) for t in alone])))
    assert head.verdict.level == 0.95   # one mode: a family of one
    assert len(headline_ratios(runs, SERVER, "default")) == 8
    table = _entry(record, "echomq")
    assert table.trials == 6 and table.ci["server_us_per_job"].n == 6
    assert table.vs_baseline["server_us_per_job"].n == 6
    assert table.vs_baseline["server_us_per_job"].ratio == pytest.approx(
        0.50 * math.exp(np.mean([math.log(_wobble(t)) for t in interleaved])))
    assert _entry(record, "bullmq-node").trials == 6

    # No headline round ran (--quick): the headline is judged on the interleaved rounds, and says so.
    quick = build_record([r for r in runs if r.rounds == INTERLEAVED], ["echomq", "bullmq-node"], {}, [],
                         _settings(6))
    (head,) = quick.headline.verdicts
    assert (head.rounds, head.verdict.n) == ("interleaved", 6)
    # Two modes: the headline's two verdicts on a server are a family of two.
    both = [replace(r, mode=m) for r in runs if r.queue != "rq" for m in ("default", "throughput")]
    two = build_record(both, ["echomq", "bullmq-node"], {}, [], _settings(6, ("default", "throughput")))
    assert [h.verdict.level for h in two.headline.verdicts] == [0.975, 0.975]


def test_a_family_of_null_comparisons_holds_together_at_the_level_the_record_judges_it() -> None:
    # The level: the one the record gives a server's verdicts, for five queues no different from the baseline
    # (four figures each, so a family of 20).
    names = ["bullmq-node", "echomq", "echomq-raw", "bullmq-py", "rq", "arq"]
    runs = [_run(q, t, 100.0 * _wobble(t + i)) for i, q in enumerate(names) for t in range(6)]
    record = build_record(runs, names, {}, [], _settings(6))
    verdicts = [v for e in record.queues for v in e.vs_baseline.values()]
    levels = {v.level for v in verdicts}
    assert len(verdicts) == 20 and len(levels) == 1
    (level,) = levels

    # Simulated families of 20 null ratios over 6 rounds: a round effect shared by every queue (it cancels in
    # a paired ratio), and per-run noise; the baseline's noise is in every ratio, which ties them together.
    # Each interval covers 1 with the t-interval's exact probability, so at the record's level all 20 hold
    # together at least 95% of the time (Bonferroni). Over 200 families a method that holds 95% misses in
    # more than 20 (10%) with probability below 0.2% (binomial); intervals each at 95% miss in about half.
    rng = np.random.default_rng(20261205)
    missed = 0
    for _ in range(200):
        shared = rng.normal(0, 0.05, 6)
        base = shared + rng.normal(0, 0.04, 6)
        logs = shared + rng.normal(0, 0.04, (len(verdicts), 6)) - base
        half = np.array([log_half_width(np.exp(row), level) for row in logs])
        missed += bool(np.any(np.abs(logs.mean(axis=1)) > half))
    assert missed <= 20, f"{missed} of 200 families had an interval that missed the true ratio"
