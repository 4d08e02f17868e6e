"""A capacity run's result: the record runners write and reports read.

`CapacityResult.entry()` is its summary.json entry, typed
(`echomq_bench.records.kinds.capacity`), `rows()` the tidy CSV rows, `write_hgrm()` one
HdrHistogram percentile file per verb. `build_result` makes one from what
a session set up (`RunSetup`), what its workers counted and what the parent
sampled of the server (`Measured`); the session module calls it, and this
module needs nothing of the session's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol

from echomq_bench.capacity.open_loop import open_loop_account, open_loop_warnings
from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.measurement import serverstats
from echomq_bench.load.ceiling import Ceiling
from echomq_bench.load.driver import BIN_S, VERBS
from echomq_bench.measurement.latency import Latency
from echomq_bench.measurement.stats import median
from echomq_bench.records.kinds.capacity import CapacityEntry, ClusterEntry

# Off-CPU waiting beyond this share of the window is worth a warning.
SHARED_CORE = 0.05

__all__ = ["CapacityFigures", "CapacityResult", "RunSetup", "Measured", "build_result"]


@dataclass(frozen=True)
class RunSetup:
    """One server as a session made it ready: what the result names and
    what its figures are relative to."""

    build: str
    version: str
    settings: CapacitySettings
    scripts: str                        # the lua folder the run used
    ceiling: Ceiling | None
    backlog: int
    pinning: str
    client_cpus: tuple[int, ...] | None  # the cores the driver may use (None: all)
    server: Mapping[str, Any]           # meta.describe_server: version, settings


@dataclass(frozen=True)
class Measured:
    """What the parent saw of one server over the window, beside the workers' own counts."""

    use: serverstats.Usage
    client_cpu_s: float
    server_wait_s: float | None   # server main thread runnable but off-CPU (None: pid unknown)
    client_wait_s: float
    steal: float                  # share of the server's CPU(s) the hypervisor took
    owned_s: float                # the part of the window that was this server's (all of it unless alternating)
    bins: tuple[float, tuple[int, ...]] = (BIN_S, ())   # timeline: bin length, this server's whole bins in the window
    sharing: int = 1              # servers loaded at once on the server core (compare --interleave together)


class CapacityFigures(Protocol):
    """What a capacity run gives, of one server (`CapacityResult`) or a whole cluster
    (`capacity.cluster_result.ClusterCapacityResult`, its totals over per-master results):
    the figures a reader wants first, its summary entry, its tidy rows and its histograms."""

    @property
    def build(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def settings(self) -> CapacitySettings: ...
    @property
    def pinning(self) -> str: ...
    @property
    def server(self) -> dict[str, Any]: ...
    @property
    def cycles_per_s(self) -> float: ...
    @property
    def server_us_per_cycle(self) -> float: ...
    @property
    def server_utilization(self) -> float: ...
    @property
    def client_utilization(self) -> float: ...
    @property
    def bound(self) -> str: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def audit(self) -> dict[str, Any] | None: ...

    def latency_ms(self, verb: str) -> dict[str, float]: ...
    def entry(self) -> CapacityEntry | ClusterEntry: ...
    def rows(self, **condition: Any) -> list[dict[str, Any]]: ...
    def timeline_rows(self, **condition: Any) -> list[dict[str, Any]]: ...
    def write_hgrm(self, folder: Path, prefix: str = "") -> list[Path]: ...


@dataclass(frozen=True)
class CapacityResult:
    build: str
    version: str
    settings: CapacitySettings
    scripts: str                      # the lua folder the run used
    window_s: float
    cycles: int                       # completes accepted inside the window
    cycles_per_s: float
    server_utilization: float         # main-thread CPU / wall
    server_cpu_utilization: float     # all server threads / wall
    server_wait: float | None         # main thread runnable but off-CPU / wall (schedstat)
    server_us_per_cycle: float        # main-thread CPU µs per cycle
    script_us_per_cycle: float        # commandstats evalsha usec per cycle (wall time inside scripts)
    scripts_per_cycle: float          # EVALSHA calls per cycle
    client_utilization: float         # driver CPU / (wall x cores the driver may use)
    client_wait: float                # driver runnable but off-CPU / (wall x cores)
    steal: float                      # share of the server's CPU the hypervisor took (/proc/stat)
    client_cpu_s: float
    client_cores: int
    bound: str
    pinning: str
    backlog: int
    ceiling: Ceiling | None
    counts: dict[str, int]
    latency: dict[str, Latency] = field(repr=False)
    audit: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)   # meta.describe_server: version, settings
    timeline: list[tuple[float, float]] = field(default_factory=list)  # (s since the window opened, cycles/s)
    open_loop: dict[str, Any] | None = None   # open loop: the schedule's account (capacity.open_loop)
    # latency_ms per verb, computed once: a summary walks the whole histogram (a quarter second each).
    _summaries: dict[str, dict[str, float]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def median_bin_rate(self) -> float:
        """The median of the timeline's cycles/s: a burst of interference moves one bin, not this."""
        return median_rate(self.timeline, self.cycles_per_s)

    @property
    def ceiling_claims_per_s(self) -> float | None:
        return self.ceiling.claims_per_s if self.ceiling else None

    @property
    def of_ceiling(self) -> float | None:
        """cycles/s over the C client's claims/s; a cycle is two scripts, so 1.0 is out of reach."""
        return self.cycles_per_s / self.ceiling.claims_per_s if self.ceiling else None

    def latency_ms(self, verb: str) -> dict[str, float]:
        if verb not in self._summaries:
            hist = self.latency.get(verb)
            self._summaries[verb] = hist.summary_ms() if hist is not None and hist.count else {}
        return self._summaries[verb]

    def entry(self) -> CapacityEntry:
        """The build's summary.json entry: the headline figures first, then context."""
        settings = self.settings
        return CapacityEntry(
            cycles_per_s=self.cycles_per_s, server_us_per_cycle=self.server_us_per_cycle,
            server_utilization=self.server_utilization, client_utilization=self.client_utilization,
            bound=self.bound, ceiling_claims_per_s=self.ceiling_claims_per_s, of_ceiling=self.of_ceiling,
            script_us_per_cycle=self.script_us_per_cycle, median_bin_cycles_per_s=self.median_bin_rate,
            mode="open loop" if settings.rate else "closed loop", target_cycles_per_s=settings.rate,
            feed=settings.feed, server_wait=self.server_wait, client_wait=self.client_wait, steal=self.steal,
            version=self.version, pinning=self.pinning, cycles=self.cycles, window_s=self.window_s,
            client_cores=self.client_cores, scripts_per_cycle=self.scripts_per_cycle,
            latency_ms={v: self.latency_ms(v) for v in VERBS if self.latency_ms(v)},
            ceiling=self.ceiling.to_dict() if self.ceiling else None, counts=dict(self.counts), backlog=self.backlog,
            scripts=self.scripts, warnings=tuple(self.warnings), open_loop=self.open_loop, audit=self.audit)

    def rows(self, **condition: Any) -> list[dict[str, Any]]:
        """Tidy rows: the condition columns, then metric, value, unit."""
        base = {"build": self.build, "version": self.version, **condition}
        metrics: list[tuple[str, Any, str]] = [
            ("cycles_per_s", self.cycles_per_s, "1/s"),
            ("server_us_per_cycle", self.server_us_per_cycle, "us"),
            ("script_us_per_cycle", self.script_us_per_cycle, "us"),
            ("scripts_per_cycle", self.scripts_per_cycle, "1"),
            ("server_utilization", self.server_utilization, "fraction"),
            ("server_cpu_utilization", self.server_cpu_utilization, "fraction"),
            *([("server_wait", self.server_wait, "fraction")] if self.server_wait is not None else []),
            ("client_utilization", self.client_utilization, "fraction"),
            ("client_wait", self.client_wait, "fraction"),
            ("steal", self.steal, "fraction"),
            ("cycles", self.cycles, "1"),
            ("median_bin_cycles_per_s", self.median_bin_rate, "1/s"),
            ("empty_claims", self.counts.get("w_empty", 0), "1"),
            ("stale_completes", self.counts.get("stale", 0), "1"),
        ]
        if self.ceiling:
            metrics += [("ceiling_claims_per_s", self.ceiling.claims_per_s, "1/s"),
                        ("ceiling_server_utilization", self.ceiling.server_utilization, "fraction"),
                        ("of_ceiling", self.of_ceiling, "fraction")]
        for verb in VERBS:
            for name, value in self.latency_ms(verb).items():
                metrics.append((f"{verb}_{name}_ms", value, "ms"))
        return [{**base, "bound": self.bound, "metric": m, "value": v, "unit": u} for m, v, u in metrics]

    def timeline_rows(self, **condition: Any) -> list[dict[str, Any]]:
        """Cycles/s per bin (a slot when alternating), t_s from the window's start."""
        base = {"build": self.build, "version": self.version, **condition}
        return [{**base, "t_s": t, "metric": "cycles_per_s", "value": rate, "unit": "1/s"} for t, rate in self.timeline]

    def write_hgrm(self, folder: Path, prefix: str = "") -> list[Path]:
        return write_hgrms(folder, f"{prefix}{self.build}", self.latency)


def median_rate(timeline: list[tuple[float, float]], fallback: float) -> float:
    """The median of a timeline's cycles/s (`fallback` when it is empty)."""
    return median(rate for _, rate in timeline) if timeline else fallback


def write_hgrms(folder: Path, stem: str, latency: dict[str, Latency]) -> list[Path]:
    """One `<stem>-<verb>.hgrm` per verb that saw a call."""
    paths = []
    for verb, hist in latency.items():
        if hist.count:
            path = folder / f"{stem}-{verb}.hgrm"
            hist.write_hgrm(path)
            paths.append(path)
    return paths


def _merged(results: list[dict[str, Any]]) -> tuple[dict[str, int], list[str], dict[int, int], dict[str, Latency]]:
    """The workers' reports summed: counts, their errors, cycles per timeline bin, latency per verb."""
    counts: dict[str, int] = {}
    errors: list[str] = []
    per_bin: dict[int, int] = {}
    for r in results:
        for key, value in r["counts"].items():
            counts[key] = counts.get(key, 0) + value
        if r.get("error"):
            errors.append(f"worker {r['index']}: {r['error']}")
        for k, n in r.get("bins", {}).items():
            per_bin[int(k)] = per_bin.get(int(k), 0) + n
    latency = {}
    for verb in VERBS:
        merged = Latency()
        for r in results:
            if verb in r["latency"]:
                merged.merge(Latency.decode(r["latency"][verb]))
        latency[verb] = merged
    return counts, errors, per_bin, latency


def _warnings(setup: RunSetup, counts: dict[str, int], measured: Measured, server_wait: float | None,
              client_wait: float) -> list[str]:
    out = []
    if setup.settings.feed == "backlog" and counts.get("w_empty", 0):
        out.append(f"the backlog of {setup.backlog:,} ran dry: {counts['w_empty']:,} claims found nothing, so "
                   "cycles/s understates the server; give a larger --backlog")
    if counts.get("errors", 0):
        out.append(f"{counts['errors']:,} error replies")
    # Servers run together on purpose wait for each other: (n-1)/n of the time.
    expected_wait = 1.0 - 1.0 / measured.sharing
    if server_wait is not None and server_wait - expected_wait > SHARED_CORE:
        out.append(f"the server waited for a CPU {server_wait - expected_wait:.0%} of the window (other "
                   "processes on its core): its busy % understates the load it was given")
    if measured.steal > SHARED_CORE:
        out.append(f"the hypervisor took {measured.steal:.0%} of the server's CPU (steal time): "
                   "another machine's load is in these numbers")
    # Builds run together share the client core too; their drivers wait for each other.
    if client_wait > SHARED_CORE and measured.sharing == 1:
        out.append(f"the driver waited for a CPU {client_wait:.0%} of the window (other processes on its core)")
    return out


def build_result(setup: RunSetup, results: list[dict[str, Any]], measured: Measured,
                 audit_out: dict[str, Any] | None = None) -> CapacityResult:
    """One server's result from its setup, its workers' reports and what the parent sampled."""
    settings, use = setup.settings, measured.use
    counts, errors, per_bin, latency = _merged(results)
    window = measured.owned_s
    share = window / settings.duration_s   # 1 unless the server had only its slots of the window
    cycles = counts.get("w_completed", 0)
    nan = float("nan")
    # Cost per cycle counts every cycle the server finished in the window;
    # the rate only those that finished in its own time. Server figures are
    # over the parent's sampled wall time, cycles over the workers' window:
    # divide rates, not totals, so the ms between the two clocks cancel.
    per_s = 1.0 / (use.wall_s * share) if use.wall_s > 0 else 0.0
    done_rate = counts.get("a_completed", 0) / settings.duration_s
    cores = min(settings.processes, len(setup.client_cpus) if setup.client_cpus else (os.cpu_count() or 1))
    client_util = measured.client_cpu_s * per_s / cores
    client_wait = measured.client_wait_s * per_s / cores
    server_wait = measured.server_wait_s * per_s if measured.server_wait_s is not None else None
    # A side that was runnable but off-CPU still had work: count that time
    # when judging which side held the other back.
    bound = serverstats.bound(use.main_cpu_s * per_s + (server_wait or 0.0), client_util + client_wait)
    size, own = measured.bins
    timeline = [(round(k * size - settings.warmup_s, 6), per_bin.get(k, 0) / size) for k in own]
    account = open_loop_account(counts, settings)
    return CapacityResult(
        build=setup.build, version=setup.version, settings=settings, scripts=setup.scripts,
        window_s=window, cycles=cycles, cycles_per_s=cycles / window, server_utilization=use.main_cpu_s * per_s,
        server_cpu_utilization=use.cpu_s * per_s, server_wait=server_wait,
        server_us_per_cycle=use.main_cpu_s * per_s * share * 1e6 / done_rate if done_rate else nan,
        script_us_per_cycle=use.usec("evalsha") * per_s * share / done_rate if done_rate else nan,
        scripts_per_cycle=use.calls("evalsha") * per_s * share / done_rate if done_rate else nan,
        client_utilization=client_util, client_wait=client_wait, client_cpu_s=measured.client_cpu_s,
        client_cores=cores, steal=measured.steal, bound=bound, pinning=setup.pinning, backlog=setup.backlog,
        ceiling=setup.ceiling, counts=counts, latency=latency, audit=audit_out,
        warnings=errors + open_loop_warnings(account) + _warnings(setup, counts, measured, server_wait, client_wait),
        server=dict(setup.server), timeline=timeline, open_loop=account)
