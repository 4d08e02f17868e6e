"""Every call whose reply was lost, classified afterwards from the server's
state and the workers' evidence: landed or not.

    enqueue   landed if its id was ever claimed or is held now
    complete  landed if its job is held nowhere and nobody claimed it after
              that token: a landed complete deletes the row; one that did not
              land leaves the job to be reaped and claimed again, or buried
    claim     a landed claim whose reply was lost handed a token to nobody:
              a gap in the tokens the workers saw for that job (up to the
              attempts its row shows now, if it is held). Gaps are matched
              against unanswered claims by count; an unmatched gap is a token
              nobody asked for, and fails the check
    retry     not classified here (the network scenarios run without
              simulated failures); `Queue` judges its own lost retries
              (docs/design/outcomes.md)
    pump      reap and promote: running twice is harmless, so their lost
              replies need no verdict, and are counted apart
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echomq_bench.faults.evidence import Evidence

__all__ = ["Ambiguity", "classify"]


@dataclass(frozen=True)
class Ambiguity:
    enqueue: tuple[int, int]     # (landed, did not land)
    complete: tuple[int, int]
    claim: tuple[int, int]
    claim_gaps_unmatched: int    # tokens handed to nobody beyond the unanswered claims
    retry_unclassified: int
    pump: int

    @property
    def total(self) -> int:
        return sum(self.enqueue) + sum(self.complete) + sum(self.claim) + self.retry_unclassified

    @property
    def resolved(self) -> int:
        return sum(self.enqueue) + sum(self.complete) + sum(self.claim)

    @property
    def ok(self) -> bool:
        return self.resolved == self.total and self.claim_gaps_unmatched == 0

    def text(self) -> str:
        def pair(name: str, counts: tuple[int, int]) -> str:
            return f"{name} {counts[0]} landed / {counts[1]} not"
        return (f"{self.resolved}/{self.total} calls whose reply was lost resolved: "
                f"{pair('enqueue', self.enqueue)}, {pair('complete', self.complete)}, {pair('claim', self.claim)}"
                f", retries unclassified {self.retry_unclassified}, tokens handed to nobody unmatched "
                f"{self.claim_gaps_unmatched}; pump calls unanswered {self.pump} (safe to repeat)")

    def to_dict(self) -> dict[str, Any]:
        return {"enqueue": list(self.enqueue), "complete": list(self.complete), "claim": list(self.claim),
                "claim_gaps_unmatched": self.claim_gaps_unmatched, "retry_unclassified": self.retry_unclassified,
                "pump": self.pump, "total": self.total, "resolved": self.resolved}


def classify(ev: Evidence, places: set[str], attempts: dict[str, int]) -> Ambiguity:
    """`places`: the ids the server holds now; `attempts`: their rows' attempts."""
    enq = sum(ev.enqueue_landed(jid, places) for jid in ev.enqueue_unknown)
    done = sum(ev.complete_landed(jid, token, places) for jid, token, _ in ev.complete_unknown)
    gaps = _token_gaps(ev.claims, attempts)
    landed_claims = min(gaps, ev.claim_unknown)
    return Ambiguity(
        enqueue=(enq, len(ev.enqueue_unknown) - enq),
        complete=(done, len(ev.complete_unknown) - done),
        claim=(landed_claims, ev.claim_unknown - landed_claims),
        claim_gaps_unmatched=gaps - landed_claims,
        retry_unclassified=len(ev.retry_unknown),
        pump=ev.events["T"],
    )


def _token_gaps(claims: dict[str, set[int]], attempts: dict[str, int]) -> int:
    """Tokens 1..top of each job that no worker was handed; top is the row's
    attempts when the job is held, else the highest token a worker saw."""
    gaps = 0
    for jid in set(claims) | set(attempts):
        seen = claims.get(jid, set())
        top = max(max(seen, default=0), attempts.get(jid, 0))
        gaps += top - len({t for t in seen if 1 <= t <= top})
    return gaps
