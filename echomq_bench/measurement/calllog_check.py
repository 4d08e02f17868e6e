"""Where did every job go, by the call log alone: the Jepsen total-queue
classification and the fencing checks, pure (no server, no load engine).

    check_files(paths, final={"pending": ids, "active": ids, ...}) -> CallLogCheck

The call log is JSONL files, one per process (echomq_bench.measurement.calllog
writes them); `final` is what the queue's sets hold at the end, as plain sets
of ids; `initial` the ids they held before the load began. Invocations and
outcomes are paired per process: an outcome answers the oldest invocation
of its verb and job still waiting. An invocation without an outcome (its
process was killed) is an operation of unknown outcome. An outcome line
with a `t0` is a whole operation by itself (a call log that is not durable
writes each call so: echomq_bench.measurement.calllog).

Every job an enqueue was invoked for, and every job seen without one, is one of:

    ok             enqueue accepted, then completed exactly once, or still in
                   a set at the end, or completed with the reply lost (held
                   nowhere, a complete of unknown outcome: only a complete
                   takes a job out of every set)
    lost           enqueue accepted, never completed, in no set at the end
    recovered      enqueue outcome unknown, yet claimed, completed or present
    unexpected     claimed, completed or present, with no enqueue invoked (or
                   only refused ones)
    duplicated     more than one accepted complete, or an accepted complete
                   and still in a set at the end (it would run again)
    indeterminate  enqueue outcome unknown, and never seen: it may not exist
    refused        enqueue refused, and never seen

and fails the run when lost, unexpected, duplicated or one of the fencing
checks of echomq_bench.measurement.calllog_tokens is found.

A job is counted under a fault kind: the first fault named on its own lines
(the one striking when its calls went out) or by a nemesis strike on it.
A job with neither is `none` when ok; otherwise it falls under the fault
nearest its trouble: a lost job under the first fault window opened after
its last line (it vanished later), any other under the last one opened
before its last line (what a fault leaves behind, such as connections left
half-open, fails calls after its window closed).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable, Mapping, NamedTuple

from echomq_bench.measurement.calllog_tokens import Fencing, Op, fencing

__all__ = ["CLASSES", "CHECKS", "FAILING", "NONE", "Op", "Note", "Parsed", "CallLogCheck", "parse", "read_files",
           "check", "check_files"]

CLASSES = ("ok", "lost", "recovered", "unexpected", "duplicated", "indeterminate", "refused")
CHECKS = ("token_fell", "stale_accepted", "lease_overlap")
FAILING = ("lost", "unexpected", "duplicated", *CHECKS)
NONE = "none"
VERBS = frozenset({"enqueue", "claim", "complete", "retry", "reap", "promote"})
EXAMPLES = 5


class Note(NamedTuple):
    """A nemesis line: a fault window opening (start) or closing (stop), or a strike on one job."""

    what: str
    fault: str
    job: str | None
    t: float


@dataclass
class Parsed:
    ops: list[Op] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    processes: int = 0
    unreadable: int = 0     # lines that are not a call-log line
    unpaired: int = 0       # outcome lines with no invocation before them


def _op(inv: Mapping[str, Any], out: Mapping[str, Any] | None, clock: int) -> Op:
    done = out or {}
    return Op(str(inv["process"]), str(inv["f"]), done.get("job") or inv.get("job"),
              done.get("token") if done.get("token") is not None else inv.get("token"),
              float(inv["t"]), float(done["t"]) if out else math.inf, str(done.get("type", "info")),
              inv.get("fault") or done.get("fault"), done.get("server_ms") or inv.get("server_ms"),
              inv.get("lease_ms") or done.get("lease_ms"), clock)


def _match(waiting: list[Mapping[str, Any]], f: str, job: str | None) -> int | None:
    """The invocation an outcome answers: the oldest of its verb and job
    (a claim's invocation names no job: the oldest claim)."""
    for i, inv in enumerate(waiting):
        if inv["f"] == f and (inv.get("job") is None or inv.get("job") == job):
            return i
    return None


def parse(sources: Iterable[Iterable[str]]) -> Parsed:
    """Pair each source's lines (a file's, one clock each) into operations."""
    parsed = Parsed()
    for clock, lines in enumerate(sources):
        waiting: dict[str, list[Mapping[str, Any]]] = {}
        whole: set[str] = set()  # processes that wrote operations in one line
        for text in lines:
            try:
                line = json.loads(text)
                kind, process, f, t = line["type"], line["process"], line["f"], float(line["t"])
            except (ValueError, KeyError, TypeError):
                parsed.unreadable += bool(text.strip())
                continue
            if f not in VERBS:
                parsed.notes.append(Note(str(f), str(line.get("fault")), line.get("job"), t))
            elif kind == "invoke":
                waiting.setdefault(process, []).append(line)
            elif "t0" in line:
                parsed.ops.append(_op({**line, "t": line["t0"]}, line, clock))
                whole.add(process)
            elif (at := _match(waiting.get(process, []), f, line.get("job"))) is not None:
                parsed.ops.append(_op(waiting[process].pop(at), line, clock))
            else:
                parsed.unpaired += 1
        parsed.processes += len(waiting.keys() | whole)
        parsed.ops += [_op(inv, None, clock) for queue in waiting.values() for inv in queue]
    return parsed


def read_files(paths: Iterable[Path]) -> Parsed:
    def lines(path: Path) -> Iterable[str]:
        with open(path, encoding="utf-8", errors="replace") as fh:
            yield from fh
    return parse(lines(p) for p in sorted(paths))


@dataclass
class _Job:
    enqueues: set[str] = field(default_factory=set)      # outcome types of its enqueues
    claims: list[Op] = field(default_factory=list)
    settles: list[Op] = field(default_factory=list)      # completes and retries
    completed: int = 0                                   # accepted completes
    complete_unknown: bool = False
    last_t: float = -math.inf                            # its last line: an outcome, or an invoke left open
    fault: tuple[float, str] | None = None

    def add(self, op: Op) -> None:
        self.last_t = max(self.last_t, op.t1 if op.t1 < math.inf else op.t0)
        if op.fault and (self.fault is None or op.t0 < self.fault[0]):
            self.fault = (op.t0, op.fault)
        if op.f == "enqueue":
            self.enqueues.add(op.type)
        elif op.f == "claim":
            self.claims.append(op)
        elif op.f in ("complete", "retry"):
            self.settles.append(op)
            self.completed += op.f == "complete" and op.type == "ok"
            self.complete_unknown |= op.f == "complete" and op.type == "info"

    def classify(self, held: bool) -> str:
        seen = held or self.completed > 0 or any(c.type == "ok" for c in self.claims)
        if not self.enqueues or (self.enqueues == {"fail"} and seen):
            return "unexpected"
        if self.completed > 1 or (self.completed and held):
            return "duplicated"
        if "ok" in self.enqueues:
            return "ok" if self.completed or held or self.complete_unknown else "lost"
        if "info" in self.enqueues:
            return "recovered" if seen or self.complete_unknown else "indeterminate"
        return "refused"


def _jobs(parsed: Parsed, initial: Collection[str]) -> dict[str, _Job]:
    jobs: dict[str, _Job] = {}
    for op in parsed.ops:
        if op.job is not None and op.job not in initial:
            jobs.setdefault(op.job, _Job()).add(op)
    for note in parsed.notes:
        job = jobs.get(note.job) if note.job else None
        if job is not None and note.what == "strike" and (job.fault is None or note.t < job.fault[0]):
            job.fault = (note.t, note.fault)
    return jobs


def _kind(job: _Job, cls: str, windows: list[Note]) -> str:
    """The fault a job is counted under (see the module docstring)."""
    if job.fault is not None:
        return job.fault[1]
    if cls == "ok" or not windows:
        return NONE
    after = [w.fault for w in windows if w.t >= job.last_t]
    before = [w.fault for w in windows if w.t < job.last_t]
    if cls == "lost":  # it vanished after its last line
        return (after or before[-1:])[0]
    return (before[-1:] or after)[0]  # trouble on its own last call: what the last fault left behind


@dataclass(frozen=True)
class CallLogCheck:
    """The classification and the fencing checks of one run's call log."""

    jobs: int
    operations: int
    processes: int
    counts: dict[str, int]                     # every class and check
    by_fault: dict[str, dict[str, int]]        # fault kind -> the same counts
    examples: dict[str, list[str]]             # class or check -> up to 5 ids
    leases: dict[str, int]                     # re-leases compared: exact, by_client, undecided
    unreadable: int = 0
    unpaired: int = 0
    one_clock: bool = True

    @property
    def passed(self) -> bool:
        return not any(self.counts[k] for k in FAILING) and not self.unpaired

    def found(self) -> str:
        """The failing counts, e.g. `lost 0, unexpected 0, ...`."""
        return ", ".join(f"{k.replace('_', ' ')} {self.counts[k]}" for k in FAILING)

    def text(self) -> str:
        """One line: the verdict's counts, then the rest of the classification."""
        rest = ", ".join(f"{k} {self.counts[k]}" for k in CLASSES if k not in FAILING)
        return (f"call-log check of {self.jobs} jobs, {self.operations} operations: {self.found()} ({rest}"
                + (f"; {self.unpaired} outcomes without an invocation" if self.unpaired else "") + ")")

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["passed"] = self.passed
        return out

    def format(self) -> str:
        """The summary Locust prints: the verdict, the totals, one line per fault kind."""
        lines = [f"call-log check {'PASS' if self.passed else 'FAIL'}: {self.text()}",
                 f"  re-leases compared {sum(self.leases.values())}: {self.leases['exact']} by server time, "
                 f"{self.leases['by_client']} by the client's clock, {self.leases['undecided']} too close to tell"]
        for kind, counts in self.by_fault.items():
            shown = ", ".join(f"{k.replace('_', ' ')} {counts[k]}" for k in (*CLASSES, *CHECKS) if counts[k])
            lines.append(f"  fault {kind}: {shown or 'no jobs'}")
        lines += [f"  e.g. {name}: {', '.join(ids)}" for name, ids in self.examples.items() if ids]
        return "\n".join(lines)


def _blank() -> dict[str, int]:
    return dict.fromkeys((*CLASSES, *CHECKS), 0)


def check(parsed: Parsed, final: Mapping[str, Collection[str]], initial: Collection[str] = frozenset(),
          one_clock: bool = True) -> CallLogCheck:
    """Classify every job and run the fencing checks. `one_clock`: every
    source read the same monotonic clock (one machine); else operations are
    ordered only within their own source."""
    initial = set(initial)
    held = {j for ids in final.values() for j in ids} - initial
    jobs = _jobs(parsed, initial)
    for j in held - set(jobs):
        jobs[j] = _Job()  # on the server at the end, never named in the call log
    windows = sorted((n for n in parsed.notes if n.what == "start"), key=lambda n: n.t)
    counts, by_fault = _blank(), {NONE: _blank()}
    examples: dict[str, list[str]] = {k: [] for k in (*CLASSES[1:], *CHECKS)}
    leases: Counter[str] = Counter()
    for jid in sorted(jobs):
        job = jobs[jid]
        cls = job.classify(jid in held)
        fence = fencing(job.claims, job.settles, one_clock) if job.claims else Fencing(False, False, False)
        leases.update(exact=fence.exact, by_client=fence.by_client, undecided=fence.undecided)
        kind = by_fault.setdefault(_kind(job, cls, windows), _blank())
        for name in (cls, *(c for c in CHECKS if getattr(fence, c))):
            counts[name] += 1
            kind[name] += 1
            if name in examples and len(examples[name]) < EXAMPLES:
                examples[name].append(jid)
    if not any(by_fault[NONE].values()):
        del by_fault[NONE]
    return CallLogCheck(len(jobs), len(parsed.ops), parsed.processes, counts, by_fault, examples,
                        {k: leases[k] for k in ("exact", "by_client", "undecided")}, parsed.unreadable,
                        parsed.unpaired, one_clock)


def check_files(paths: Iterable[Path], final: Mapping[str, Collection[str]], initial: Collection[str] = frozenset(),
                one_clock: bool = True) -> CallLogCheck:
    return check(read_files(paths), final, initial, one_clock)
