"""A `locust` record: one Locust run of a scenario (scenarios/*.py), headless
or from the web UI, local or distributed (the master writes it).

summary.json is a `LocustRecord`: the scenario, the verdict, the run (its
id, queues, load processes, the server), the flow (completed, cycles/s),
the audit of every job, the calls settled against the server, the call-log
check (`call_log`) and, on a
cluster, a `NodeEntry` per master. Its tidy tables:

    requests.csv   Locust's own stats per request type and name: requests,
                   failures, requests/s, mean, min, max and percentiles (ms)
    timeline.csv   requests (and failures) per second per request name,
                   from Locust's per-second counts; t_s from the run's
                   first second
    steps.csv      with --steps: per number of consumers, cycles/s and the
                   CPU of the server's main thread, the client, the machine

Locust keeps each response time rounded (to whole milliseconds below
100 ms), so its percentiles of sub-millisecond calls read 0 or 1 ms; the
mean is kept from the unrounded times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from echomq_bench.records.entries import Entry, many, one
from echomq_bench.records.headlines import HIGHER, LOWER, Headline, each, number
from echomq_bench.records.kinds.faults import AuditEntry
from echomq_bench.records.record import Record

__all__ = ["RECORD", "LocustRecord", "RunEntry", "NodeEntry", "headlines", "request_figures"]

HEADLINE_VERBS = ("claim", "complete")
HEADLINE_QUANTILES = ("p50", "p99")


@dataclass(frozen=True)
class RunEntry(Entry):
    """Which run: its id and queues, how many load processes, who wrote it, and on what server."""

    run_id: str
    queues: tuple[str, ...] = ()
    load_processes: int = 1
    role: str = "local"        # local, or master (a distributed run)
    server: str = ""           # its version and how it was reached, as printed
    build: str = ""            # the server's name in meta.json: the results history's build
    version: str = ""


@dataclass(frozen=True)
class NodeEntry(Entry):
    """On a cluster: one master's queues, completes and main-thread utilisation over the run."""

    node: str
    queues: tuple[str, ...] = ()
    completed: int = 0
    cycles_per_s: float = 0.0
    server_main_util: float | None = None
    server_cpu_util: float | None = None


@dataclass(frozen=True)
class LocustRecord(Entry):
    scenario: str
    passed: bool = False
    run: RunEntry = one(RunEntry, RunEntry(run_id=""))
    audit: AuditEntry = one(AuditEntry, AuditEntry())
    settled_unresolved: Mapping[str, int] = field(default_factory=dict)   # calls killed with their reply unread
    missing_processes: int = 0      # workers whose books never came
    flow: Mapping[str, int] = field(default_factory=dict)                 # retries, promoted, reaped, crashes, ...
    seconds: float = 0.0            # from the start to the drain, ramp-up included
    cycles_per_s: float = 0.0       # completes accepted over `seconds`
    recovery_ms: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    call_log: Mapping[str, Any] = field(default_factory=dict)   # the call-log check (measurement.calllog_check)
    nodes: tuple[NodeEntry, ...] = many(NodeEntry, written_when_empty=False)

    @property
    def call_log_passed(self) -> bool | None:
        """The call-log check's verdict; None for a run that kept no call log."""
        return None if not self.call_log else bool(self.call_log.get("passed"))


RECORD = LocustRecord   # what summary.json holds, typed


def request_figures(r: Record) -> dict[tuple[str, str], float]:
    """(request name, metric) -> value, from the requests table. A verb's name (`claim`, `complete`) is
    only ever a script call's; recovery and expected outcomes have names of their own."""
    return {(str(row.get("name")), str(row.get("metric"))): float(value) for row in r.tables.get("requests", ())
            if (value := number(row.get("value"))) is not None}


def headlines(r: Record) -> Iterator[Headline]:
    """Per scenario: cycles/s (and at each step), claim and complete latency, the audit and the call-log check.
    A run of another scenario is another series, so each figure is named by its scenario."""
    record = LocustRecord.from_record(r.summary)
    run, name = record.run, f"locust.{record.scenario}"
    figures = request_figures(r)
    latency = [(f"{name}.{verb}.{q}_ms", figures.get((verb, q)), "ms", LOWER)
               for verb in HEADLINE_VERBS for q in (*HEADLINE_QUANTILES, "mean")]
    steps = [(f"{name}.cycles_per_s_at_{int(row['consumers'])}", row.get("value"), "1/s", HIGHER)
             for row in r.tables.get("steps", ()) if row.get("metric") == "cycles_per_s"]
    checks = [(f"{name}.audit_passed", float(bool(record.audit.passed)), "pass", HIGHER)]
    if record.call_log_passed is not None:
        checks.append((f"{name}.call_log_passed", float(record.call_log_passed), "pass", HIGHER))
    yield from each(run.build or run.server, run.version or None,
                    [(f"{name}.cycles_per_s", record.cycles_per_s, "1/s", HIGHER), *latency, *steps, *checks])
