"""What one peer did in one trial: the two phases and the counts taken around them.

Mutable records filled in by the runner (`echomq_bench.peers.runner`) and read by
the summary (`echomq_bench.peers.summary`); every figure is derived, never stored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from echomq_bench.measurement import serverstats

__all__ = ["Phase", "PeerRun", "OWN_COMMANDS", "SCRIPT_COMMANDS", "INTERLEAVED", "HEADLINE_ROUNDS"]

# Commands the runner itself sends between samples; never counted as the peer's.
OWN_COMMANDS = frozenset({"info", "config|resetstat"})
SCRIPT_COMMANDS = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})
# The two kinds of round (docs/design/peers.md). An interval pools rounds of one kind only: in an interleaved
# round every queue runs in turn, minutes apart; in a headline round the headline pair runs alone, back to back.
INTERLEAVED = "interleaved"
HEADLINE_ROUNDS = "headline"


@dataclass(frozen=True)
class Phase:
    """One phase (enqueue or drain) of one peer run."""

    jobs: int
    wall_s: float
    server: serverstats.Usage
    client_cpu_s: float
    reads: int = 0  # the server's read events in the window, the runner's own taken out: round trips


    def _per_job(self, value: float) -> float:
        return value / self.jobs if self.jobs else float("nan")

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def server_us_per_job(self) -> float:
        """Main-thread CPU (where commands and scripts run) per job, µs."""
        return self._per_job(self.server.main_cpu_s * 1e6)

    @property
    def server_all_threads_us_per_job(self) -> float:
        return self._per_job(self.server.cpu_s * 1e6)

    @property
    def commands(self) -> dict[str, tuple[int, int]]:
        return {k: v for k, v in self.server.commands.items() if k not in OWN_COMMANDS}

    @property
    def commands_per_job(self) -> float:
        """Every command the server executed, those run inside scripts and MULTI included."""
        return self._per_job(sum(calls for calls, _ in self.commands.values()))

    @property
    def scripts_per_job(self) -> float:
        """Script calls (EVAL, EVALSHA, FCALL and their _RO forms) per job."""
        return self._per_job(sum(calls for name, (calls, _) in self.commands.items() if name in SCRIPT_COMMANDS))

    @property
    def script_us_per_job(self) -> float:
        """Time inside script calls per job, µs, as commandstats times them (their commands included)."""
        return self._per_job(sum(usec for name, (_, usec) in self.commands.items() if name in SCRIPT_COMMANDS))

    @property
    def transactions_per_job(self) -> float:
        """MULTI/EXEC blocks per job."""
        return self._per_job(self.commands.get("exec", (0, 0))[0])

    @property
    def round_trips_per_job(self) -> float:
        """Requests the server read per job: a pipeline or a MULTI/EXEC sent at once is one."""
        return self._per_job(self.reads)

    @property
    def client_us_per_job(self) -> float:
        return self._per_job(self.client_cpu_s * 1e6)

    @property
    def server_utilization(self) -> float:
        return self.server.main_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def client_utilization(self) -> float:
        """Client CPU over wall time, in cores (several consumer processes can exceed 1)."""
        return self.client_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def bottleneck(self) -> str:
        # Consumer processes may use every core the server's main thread leaves them.
        return serverstats.bound(self.server_utilization, self.client_utilization,
                                 client_cores=max(1.0, (os.cpu_count() or 1) - self.server_utilization))

    def figures(self) -> dict[str, Any]:
        return {
            "jobs_per_s": self.jobs_per_s,
            "wall_s": self.wall_s,
            "server_us_per_job": self.server_us_per_job,
            "server_all_threads_us_per_job": self.server_all_threads_us_per_job,
            "commands_per_job": self.commands_per_job,
            "scripts_per_job": self.scripts_per_job,
            "script_us_per_job": self.script_us_per_job,
            "round_trips_per_job": self.round_trips_per_job,
            "transactions_per_job": self.transactions_per_job,
            "client_us_per_job": self.client_us_per_job,
            "server_utilization": self.server_utilization,
            "client_utilization": self.client_utilization,
            "bottleneck": self.bottleneck,
        }


@dataclass(frozen=True)
class PeerRun:
    """Everything one peer did in one trial on one server."""

    server: str
    server_version: str
    queue: str
    mode: str
    trial: int
    jobs: int
    consumers: int
    enqueue: Phase
    drain: Phase
    used_memory_before: int
    used_memory_enqueued: int
    used_memory_drained: int
    accepted: int
    ran: int
    intact: int
    after_enqueue: dict[str, Any]
    leftovers: dict[str, Any]
    keys_after: int
    key_sample: list[str] = field(default_factory=list)
    rounds: str = INTERLEAVED   # the kind of round this run belongs to

    @property
    def wall_s(self) -> float:
        return self.enqueue.wall_s + self.drain.wall_s

    @property
    def jobs_per_s(self) -> float:
        """A job's whole life: enqueued and drained, N over both walls."""
        return self.jobs / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def server_us_per_job(self) -> float:
        return self.enqueue.server_us_per_job + self.drain.server_us_per_job

    @property
    def commands_per_job(self) -> float:
        return self.enqueue.commands_per_job + self.drain.commands_per_job

    @property
    def scripts_per_job(self) -> float:
        return self.enqueue.scripts_per_job + self.drain.scripts_per_job

    @property
    def script_us_per_job(self) -> float:
        return self.enqueue.script_us_per_job + self.drain.script_us_per_job

    @property
    def round_trips_per_job(self) -> float:
        return self.enqueue.round_trips_per_job + self.drain.round_trips_per_job

    @property
    def transactions_per_job(self) -> float:
        return self.enqueue.transactions_per_job + self.drain.transactions_per_job

    @property
    def client_us_per_job(self) -> float:
        return self.enqueue.client_us_per_job + self.drain.client_us_per_job

    @property
    def bytes_per_pending_job(self) -> float:
        return (self.used_memory_enqueued - self.used_memory_before) / self.jobs

    @property
    def residual_bytes(self) -> int:
        """Memory the drained queue still holds (event streams, registries, counters)."""
        return self.used_memory_drained - self.used_memory_before

    @property
    def clean(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        out = []
        if self.accepted != self.jobs:
            out.append(f"producer had {self.accepted} of {self.jobs} jobs accepted")
        if self.after_enqueue["pending"] != self.jobs:
            out.append(f"the server held {self.after_enqueue['pending']} pending jobs after enqueueing {self.jobs}")
        if self.ran != self.jobs:
            out.append(f"the job function ran {self.ran} times for {self.jobs} jobs")
        if self.intact != self.ran:
            out.append(f"{self.ran - self.intact} jobs saw a payload other than the one enqueued")
        lo = self.leftovers
        if lo["pending"] or lo["kept"] or lo["rows"]:
            out.append(f"left on the server: {lo['pending']} pending, {lo['kept']} kept, {lo['rows']} job rows "
                       f"({lo['detail']})")
        return out

