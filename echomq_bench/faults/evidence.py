"""What the fault load's workers saw, read back from their event logs, and
the audit's Ledger built from it with every unanswered call resolved.

The event words (first field), then id, token, time (monotonic, system-wide):

    E id t          enqueue answered enqueued
    U id t          enqueue sent, no answer (timeout, connection lost)
    O id t          enqueue refused: the server is out of memory
    C id tok fail t claimed; fail=1: this attempt will end in retry
    S id tok t      about to send complete or retry (a kill after C and
                    before S leaves the lease unanswered, nothing in flight)
    A / R / Q       complete accepted / refused (EMQSTALE) / unanswered
    Y / N / W       retry accepted / refused (EMQSTALE) / unanswered
    K t             claim unanswered: it may have leased a job to nobody
    T t             pump call (reap, promote) or connection attempt unanswered
    P t reaped promoted
    X t message     anything else: an error the load did not expect
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, NamedTuple

from echomq_bench.load.audit import Ledger

__all__ = ["Answer", "Evidence", "read_logs", "last_event"]


def last_event(path: Path) -> list[str]:
    """The fields of the last line a worker wrote, or [] before its first."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 512))
            tail = fh.read().decode(errors="replace")
    except OSError:
        return []
    lines = [line for line in tail.split("\n")[:-1] if line]
    return lines[-1].split(" ") if lines else []


class Answer(NamedTuple):
    """A complete or retry the server answered: when it was sent and answered, by which worker."""
    jid: str
    token: int
    t: float
    worker: str
    sent: float


@dataclass
class Evidence:
    """What the workers saw, from their logs."""

    enqueued: dict[str, float] = field(default_factory=dict)        # id -> time
    enqueue_unknown: set[str] = field(default_factory=set)
    oom_refused: list[tuple[str, float]] = field(default_factory=list)
    claimed: dict[str, int] = field(default_factory=dict)          # id -> highest token claimed
    claims: dict[str, set[int]] = field(default_factory=dict)      # id -> every token a worker was handed
    claim_unknown: int = 0
    accepted: list[Answer] = field(default_factory=list)
    refused: list[Answer] = field(default_factory=list)
    complete_unknown: list[tuple[str, int, str]] = field(default_factory=list)
    retry_unknown: list[tuple[str, int, str]] = field(default_factory=list)
    retried: list[Answer] = field(default_factory=list)
    retry_refused: list[Answer] = field(default_factory=list)
    unanswered: int = 0
    reaped: int = 0
    promoted: int = 0
    errors: list[str] = field(default_factory=list)
    events: Counter[str] = field(default_factory=Counter)

    def ledger(self, places: set[str], zombies: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset()
               ) -> Ledger:
        """The audit's Ledger, with each unanswered call resolved by the evidence.

        `places`: every id the server holds now (or held at a snapshot taken
        before a fault). An unanswered enqueue landed if its id was claimed
        or is held (`enqueue_landed`); an unanswered complete landed if its
        job is held nowhere and no other complete of it was accepted
        (`complete_landed`).
        """
        ledger = Ledger()
        for jid in self.enqueued:
            ledger.record_enqueue(jid, "enqueued")
        for jid in self.enqueue_unknown:
            if self.enqueue_landed(jid, places):
                ledger.record_enqueue(jid, "enqueued")
        for a in self.accepted:
            ledger.record_complete(a.jid, a.token, accepted=True, zombie=(a.jid, a.token) in zombies)
        for a in self.refused:
            ledger.record_complete(a.jid, a.token, accepted=False, zombie=(a.jid, a.token) in zombies)
        for jid, token, _ in self.complete_unknown:
            if self.complete_landed(jid, token, places) and ledger.accepted[jid] == 0:
                ledger.record_complete(jid, token, accepted=True, zombie=(jid, token) in zombies)
        return ledger

    def enqueue_landed(self, jid: str, places: set[str]) -> bool:
        return jid in self.claimed or jid in places

    def complete_landed(self, jid: str, token: int, places: set[str]) -> bool:
        """A landed complete deletes the row: no later claim of the job, and
        the job held nowhere. One that did not land leaves the job active
        until reaped, then it is claimed again or ends in the dead set."""
        return jid not in places and self.claimed.get(jid, 0) <= token

    def first_after(self, kind: str, t: float) -> float | None:
        """When the first complete (A) or enqueue (E) answered at or after t was answered."""
        times = {"A": [a.t for a in self.accepted], "E": list(self.enqueued.values())}[kind]
        later = [x for x in times if x >= t]
        return min(later) if later else None

    def first_sent_after(self, t: float) -> float | None:
        """When the first complete sent at or after t was accepted: a reply read
        late from before t does not count."""
        later = [a.t for a in self.accepted if a.sent >= t]
        return min(later) if later else None


def read_logs(paths: Iterable[Path]) -> Evidence:
    ev = Evidence()
    for path in paths:
        worker = path.stem
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            continue
        sent = 0.0
        for line in text.split("\n"):
            f = line.split(" ")
            if not line or not f:
                continue
            word = f[0]
            ev.events[word] += 1
            if word in ("E", "D"):
                ev.enqueued[f[1]] = float(f[2])
            elif word == "U":
                ev.enqueue_unknown.add(f[1])
            elif word == "O":
                ev.oom_refused.append((f[1], float(f[2])))
            elif word == "C":
                ev.claimed[f[1]] = max(ev.claimed.get(f[1], 0), int(f[2]))
                ev.claims.setdefault(f[1], set()).add(int(f[2]))
            elif word == "S":
                sent = float(f[3])
            elif word in ("A", "R", "Y", "N"):
                row = Answer(f[1], int(f[2]), float(f[3]), worker, sent)
                {"A": ev.accepted, "R": ev.refused, "Y": ev.retried, "N": ev.retry_refused}[word].append(row)
            elif word in ("Q", "W"):
                (ev.complete_unknown if word == "Q" else ev.retry_unknown).append((f[1], int(f[2]), worker))
            elif word == "K":
                ev.claim_unknown += 1
            elif word == "P":
                ev.reaped += int(f[2])
                ev.promoted += int(f[3])
            elif word == "X":
                ev.errors.append(f"{worker}: {' '.join(f[2:])}")
            if word in ("U", "Q", "W", "K", "T"):
                ev.unanswered += 1
    ev.enqueue_unknown -= set(ev.enqueued)
    return ev
