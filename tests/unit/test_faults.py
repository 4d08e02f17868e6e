"""Unanswered calls in the fault load's logs are resolved from the evidence,
not guessed."""

from __future__ import annotations

from pathlib import Path


from echomq_bench.faults.load import read_logs


def test_unanswered_calls_are_resolved_by_the_evidence(tmp_path: Path) -> None:
    # producer: one definite enqueue, three unanswered (one later claimed, one still held, one never landed)
    (tmp_path / "producer-0.log").write_text(
        "E JOB0000000000A 1.0\nU JOB0000000000B 1.1\nU JOB0000000000C 1.2\nU JOB0000000000D 1.3\n"
        "O JOB0000000000E 1.4\n")
    # consumer: A completed; B claimed, its complete unanswered and B held nowhere: it landed;
    # an unanswered complete on C while C is still held: it did not; a zombie's complete on C refused
    (tmp_path / "consumer-0.log").write_text(
        "C JOB0000000000A 1 0 2.0\nS JOB0000000000A 1 2.1\nA JOB0000000000A 1 2.2\n"
        "C JOB0000000000B 1 0 2.3\nS JOB0000000000B 1 2.4\nQ JOB0000000000B 1 2.5\n"
        "Q JOB0000000000C 2 2.6\nR JOB0000000000C 1 2.7\nX 2.8 claim boom\n")
    ev = read_logs(sorted(tmp_path.glob("*.log")))
    ledger = ev.ledger(places={"JOB0000000000C"}, zombies={("JOB0000000000C", 1)})
    assert ledger.enqueued == {"JOB0000000000A", "JOB0000000000B", "JOB0000000000C"}
    assert dict(ledger.accepted) == {"JOB0000000000A": 1, "JOB0000000000B": 1}
    assert ledger.refused == [("JOB0000000000C", 1)] and ledger.zombie_sent == 1
    assert ev.oom_refused == [("JOB0000000000E", 1.4)] and ev.unanswered == 5
    assert ev.errors == ["consumer-0: claim boom"]
    assert ev.first_after("A", 2.0) == 2.2 and ev.first_after("A", 3.0) is None
    # the reply to a complete sent before a fault, read after it, is not recovery
    assert ev.first_sent_after(2.05) == 2.2 and ev.first_sent_after(2.15) is None
