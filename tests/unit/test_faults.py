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


def test_lost_replies_are_classified_from_the_server_state(tmp_path: Path) -> None:
    from echomq_bench.faults.ambiguous import classify

    # A: claim 1 lost (a gap), claimed again as 2, completed. B: its complete lost, and B is held
    # nowhere with no later claim: it landed. C: complete on token 1 lost, then claimed as 2: it did not.
    # D: held dead with attempts 3, tokens 1 and 3 seen: one more gap. Two claims unanswered in all.
    (tmp_path / "consumer-0.log").write_text(
        "K 1.0\nC JOB0000000000A 2 0 1.1\nA JOB0000000000A 2 1.2\n"
        "C JOB0000000000B 1 0 1.3\nQ JOB0000000000B 1 1.4\n"
        "C JOB0000000000C 1 0 1.5\nQ JOB0000000000C 1 1.6\nC JOB0000000000C 2 0 1.7\nA JOB0000000000C 2 1.8\n"
        "C JOB0000000000D 1 0 1.9\nK 2.0\nC JOB0000000000D 3 0 2.1\nU JOB0000000000E 2.2\nT 2.3\n")
    ev = read_logs([tmp_path / "consumer-0.log"])
    found = classify(ev, places={"JOB0000000000D"}, attempts={"JOB0000000000D": 3})
    assert (found.enqueue, found.complete, found.claim) == ((0, 1), (1, 1), (2, 0))
    assert (found.claim_gaps_unmatched, found.retry_unclassified, found.pump) == (0, 0, 1)
    assert found.ok and (found.total, found.resolved) == (5, 5)
    # A token handed to nobody with no unanswered claim to account for it fails the check.
    alone = classify(read_logs([tmp_path / "consumer-0.log"]), places={"JOB0000000000D"},
                     attempts={"JOB0000000000D": 4})
    assert alone.claim_gaps_unmatched == 1 and not alone.ok
