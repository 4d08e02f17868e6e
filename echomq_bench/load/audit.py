"""Where did every job go? Client ledgers beside the server's sets.

Load generators keep a `Ledger` of what they did: ids enqueued, completes
the server accepted (with their token), completes it refused, and which of
those came from zombies (workers that had lost their lease). Ledgers from
many processes merge. `audit` then reads the queue's four sets and checks:

- every enqueued id is in exactly one place: completed, pending, active,
  scheduled or dead; completed + pending + active + scheduled + dead = enqueued;
- no job had two completes accepted;
- every zombie complete was refused;
- every refused complete carried a superseded token: the server does not
  show that job active under that same token (which would mean a lease
  holder's complete was refused).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable


from echomq._instrument import Client, QueueKeys
from echomq_bench.load import drain

__all__ = ["Ledger", "AuditReport", "audit"]


@dataclass
class Ledger:
    enqueued: set[str] = field(default_factory=set)
    accepted: Counter[str] = field(default_factory=Counter)      # id -> completes accepted
    accepted_token: dict[str, int] = field(default_factory=dict)  # id -> token of the accepted complete
    refused: list[tuple[str, int]] = field(default_factory=list)  # (id, token) answered EMQSTALE
    zombie_sent: int = 0
    zombie_accepted: list[str] = field(default_factory=list)

    def record_enqueue(self, job_id: str, reply: str) -> None:
        if reply == "enqueued":
            self.enqueued.add(job_id)

    def record_complete(self, job_id: str, token: int, accepted: bool, zombie: bool = False) -> None:
        if zombie:
            self.zombie_sent += 1
        if accepted:
            self.accepted[job_id] += 1
            self.accepted_token[job_id] = token
            if zombie:
                self.zombie_accepted.append(job_id)
        else:
            self.refused.append((job_id, token))

    def merge(self, other: "Ledger") -> "Ledger":
        self.enqueued |= other.enqueued
        self.accepted.update(other.accepted)
        self.accepted_token.update(other.accepted_token)
        self.refused.extend(other.refused)
        self.zombie_sent += other.zombie_sent
        self.zombie_accepted.extend(other.zombie_accepted)
        return self

    def to_json(self) -> str:
        return json.dumps({
            "enqueued": sorted(self.enqueued), "accepted": dict(self.accepted),
            "accepted_token": self.accepted_token, "refused": self.refused,
            "zombie_sent": self.zombie_sent, "zombie_accepted": self.zombie_accepted,
        })

    @classmethod
    def from_json(cls, text: str | bytes) -> "Ledger":
        d = json.loads(text)
        return cls(set(d["enqueued"]), Counter(d["accepted"]), {k: int(v) for k, v in d["accepted_token"].items()},
                   [(i, int(t)) for i, t in d["refused"]], int(d["zombie_sent"]), list(d["zombie_accepted"]))


@dataclass(frozen=True)
class AuditReport:
    enqueued: int
    completed: int
    pending: int
    active: int
    scheduled: int
    dead: int
    lost: int
    in_two_places: int
    unknown: int
    double_accepted: int
    zombie_sent: int
    zombie_accepted: int
    refused: int
    refused_not_superseded: int
    examples: dict[str, list[str]]

    @property
    def passed(self) -> bool:
        return (self.lost == 0 and self.in_two_places == 0 and self.double_accepted == 0
                and self.zombie_accepted == 0 and self.refused_not_superseded == 0
                and self.completed + self.pending + self.active + self.scheduled + self.dead == self.enqueued)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["passed"] = self.passed
        return out

    def format(self) -> str:
        total = self.completed + self.pending + self.active + self.scheduled + self.dead
        lines = [
            f"audit {'PASS' if self.passed else 'FAIL'}",
            f"  enqueued {self.enqueued} = completed {self.completed} + pending {self.pending} + active {self.active}"
            f" + scheduled {self.scheduled} + dead {self.dead} ({total})"
            f"{'' if total == self.enqueued else '  MISMATCH'}",
            f"  lost {self.lost}, in two places {self.in_two_places}, unknown ids on the server {self.unknown}",
            f"  completes accepted twice {self.double_accepted}",
            f"  zombie completes {self.zombie_sent}, accepted {self.zombie_accepted} (must be 0)",
            f"  refused completes {self.refused},"
            f" with a token not superseded {self.refused_not_superseded} (must be 0)",
        ]
        for name, ids in self.examples.items():
            if ids:
                lines.append(f"  e.g. {name}: {', '.join(ids[:5])}")
        return "\n".join(lines)


def audit(client: Client, queues: Iterable[str], ledger: Ledger) -> AuditReport:
    """Check the ledger against the server's sets of these queues."""
    places: dict[str, set[str]] = {place: set() for place in drain.PLACES}
    active_token: dict[str, int] = {}
    for name in queues:
        k = QueueKeys(name)
        held = drain.places(client, [k])
        for place, ids in held.items():
            places[place] |= ids
        active_token.update(drain.attempts(client, k, held["active"]))
    completed = {i for i, n in ledger.accepted.items() if n > 0}
    seen = Counter(i for s in (completed, *places.values()) for i in s)
    lost = sorted(ledger.enqueued - set(seen))
    twice = sorted(i for i, n in seen.items() if n > 1)
    unknown = sorted(set(seen) - ledger.enqueued)
    double = sorted(i for i, n in ledger.accepted.items() if n > 1)
    not_superseded = sorted({i for i, tok in ledger.refused if active_token.get(i) == tok})
    return AuditReport(
        enqueued=len(ledger.enqueued), completed=len(completed & ledger.enqueued),
        pending=len(places["pending"] & ledger.enqueued), active=len(places["active"] & ledger.enqueued),
        scheduled=len(places["scheduled"] & ledger.enqueued), dead=len(places["dead"] & ledger.enqueued),
        lost=len(lost), in_two_places=len(twice), unknown=len(unknown), double_accepted=len(double),
        zombie_sent=ledger.zombie_sent, zombie_accepted=len(ledger.zombie_accepted),
        refused=len(ledger.refused), refused_not_superseded=len(not_superseded),
        examples={"lost": lost[:5], "in two places": twice[:5], "accepted twice": double[:5],
                  "zombie accepted": ledger.zombie_accepted[:5], "refused but current": not_superseded[:5]},
    )
