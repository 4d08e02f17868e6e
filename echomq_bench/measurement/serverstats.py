"""What the server and the client spent, from INFO and /proc.

A benchmark takes a `ServerSample` before and after, and the `Usage` between
them says how busy the server's main thread was, what each command cost,
and, with the client's CPU beside it, which side was the bottleneck.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ["ServerSample", "Usage", "sample", "usage", "command_stats", "commandstats_entry", "process_cpu_s",
           "sched_s", "steal_s", "bound", "SATURATED"]

# A side busy, or runnable and waiting for its core, for this share of the
# window is saturated: what idle time is left is too little to have held the
# other side back. Below it on both sides, neither side set the pace.
SATURATED = 0.97
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ServerSample:
    wall_s: float
    cpu_s: float                 # used_cpu_sys + used_cpu_user, all threads
    main_cpu_s: float            # the main thread alone, where scripts run
    commands: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (calls, usec)


def _commands(stats: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """INFO commandstats as command -> (calls, usec)."""
    return {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for k, v in stats.items()}


def commandstats_entry(stats: dict[str, Any], command: str) -> tuple[int, int]:
    """(calls, usec) of one command in an INFO commandstats reply already
    read; (0, 0) before its first call, when the server lists no entry."""
    entry = stats.get(f"cmdstat_{command.lower()}") or {}
    return int(entry.get("calls", 0)), int(entry.get("usec", 0))


def command_stats(client: Any, command: str = "evalsha") -> tuple[int, int]:
    """(calls, usec) of one command so far, from one INFO commandstats."""
    return commandstats_entry(client.info("commandstats"), command)


def sample(client: Any) -> ServerSample:
    info = client.info("cpu")
    stats = client.info("commandstats")
    wall = time.perf_counter()
    cpu = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    main = float(info.get("used_cpu_sys_main_thread", info["used_cpu_sys"])) + float(
        info.get("used_cpu_user_main_thread", info["used_cpu_user"]))
    return ServerSample(wall, cpu, main, _commands(stats))


@dataclass(frozen=True)
class Usage:
    wall_s: float
    cpu_s: float
    main_cpu_s: float
    commands: dict[str, tuple[int, int]]

    @property
    def utilization(self) -> float:
        """Main-thread CPU over wall time: 1.0 is a saturated server."""
        return self.main_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def calls(self, command: str) -> int:
        return self.commands.get(command, (0, 0))[0]

    def usec(self, command: str) -> int:
        return self.commands.get(command, (0, 0))[1]


def usage(before: ServerSample, after: ServerSample) -> Usage:
    commands = {}
    for name, (calls, usec) in after.commands.items():
        c0, u0 = before.commands.get(name, (0, 0))
        if calls - c0:
            commands[name] = (calls - c0, usec - u0)
    return Usage(after.wall_s - before.wall_s, after.cpu_s - before.cpu_s,
                 after.main_cpu_s - before.main_cpu_s, commands)


def process_cpu_s(pids: Iterable[int] = ()) -> float:
    """User+system CPU seconds of these processes (this one when none given)."""
    pids = list(pids) or [os.getpid()]
    total = 0.0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone: it no longer spends anything
        total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def sched_s(pids: Iterable[int], main_thread_only: bool = False) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) of these
    processes' threads, from /proc/<pid>/task/<tid>/schedstat.

    The wait is what a shared machine takes from a benchmark: a server that
    waits for a CPU while its clients wait for its replies is saturated,
    even though its CPU time over wall time says otherwise. (0, 0) where the
    kernel keeps no schedstat.
    """
    run = wait = 0
    for pid in pids:
        tids = [str(pid)] if main_thread_only else _tasks(pid)
        for tid in tids:
            try:
                fields = open(f"/proc/{pid}/task/{tid}/schedstat").read().split()
            except OSError:
                continue
            run += int(fields[0])
            wait += int(fields[1])
    return run / 1e9, wait / 1e9


def steal_s(cpus: Iterable[int] = ()) -> tuple[float, float]:
    """(seconds stolen by the hypervisor, seconds elapsed in all) on these
    CPUs (all when none given), from /proc/stat: a virtual machine's
    neighbours take time that no process on it is charged for."""
    wanted = {f"cpu{c}" for c in cpus} or {"cpu"}
    steal = total = 0
    try:
        lines = open("/proc/stat").read().splitlines()
    except OSError:
        return 0.0, 0.0
    for line in lines:
        name, *values = line.split()
        if name in wanted:
            numbers = [int(v) for v in values[:8]]
            steal += numbers[7] if len(numbers) > 7 else 0
            total += sum(numbers)
    return steal / CLK_TCK, total / CLK_TCK


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def bound(server_busy: float, client_busy: float, client_cores: float = 1.0) -> str:
    """Which side limited the run, by one rule: a side is saturated when it was
    busy, or runnable and waiting for its core, for at least SATURATED of the
    window; `client_busy` counts cores, and `client_cores` of them saturate the
    client. "server" when the server's main thread was saturated; else "client"
    when the client was; else "neither": both had idle time, so something else
    (an offered rate, a lease, the network) set the pace."""
    if server_busy >= SATURATED:
        return "server"
    if client_busy >= SATURATED * client_cores:
        return "client"
    return "neither"
