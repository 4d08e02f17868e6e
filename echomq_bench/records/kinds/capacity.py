"""A `capacity` record: each build's claim+complete cycles per second at its
limit, what bound it and how the load ran; a cluster's entry holds the same
figures over all its masters, and a row per master. An `--slo` run's record
holds instead the rate each build sustained at a latency target: the rate
a probe of the window holds with the block's `held` share, `figure` saying
so in words (docs/design/slo.md).

summary.json is `{"builds": {<build>: <CapacityEntry or ClusterEntry>}}`, or
`{"slo": <SloBlock>}`; `compare` keeps the same `slo` block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from echomq_bench.records.entries import Entry, by_name, many, one, optional
from echomq_bench.records.headlines import HIGHER, LOWER, Headline, each
from echomq_bench.records.record import Record
from echomq_bench.records.verdicts import RatioVerdictEntry

__all__ = ["RECORD", "CapacityFiguresEntry", "CapacityEntry", "ClusterEntry", "NodeEntry", "CapacityRecord",
           "SloTarget", "SloEntry", "SloBlock", "entry_of", "slo_figure", "slo_headlines", "headlines"]

Latencies = Mapping[str, Mapping[str, float]]   # verb -> percentile name (p50, p99, max, ...) -> ms


@dataclass(frozen=True)
class NodeEntry(Entry):
    """One master of a cluster run: its own figures, its own workers' counts."""

    node: str                                   # host:port
    queues: tuple[str, ...] = ()
    version: str | None = None
    cycles_per_s: float | None = None
    cycles: int | None = None
    server_utilization: float | None = None
    server_cpu_utilization: float | None = None
    server_wait: float | None = None
    server_us_per_cycle: float | None = None
    script_us_per_cycle: float | None = None
    scripts_per_cycle: float | None = None
    client_utilization: float | None = None
    client_wait: float | None = None
    backlog: int | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    latency_ms: Latencies = field(default_factory=dict)


@dataclass(frozen=True)
class CapacityFiguresEntry(Entry):
    """What every capacity run measured over its window, one server's or a cluster's over all its masters:
    the headline first, then its ceiling, then how the load ran."""

    cycles_per_s: float | None = None
    server_us_per_cycle: float | None = None
    server_utilization: float | None = None
    client_utilization: float | None = None
    bound: str | None = None
    ceiling_claims_per_s: float | None = None   # none for a cluster
    of_ceiling: float | None = None
    script_us_per_cycle: float | None = None
    median_bin_cycles_per_s: float | None = None
    mode: str | None = None                     # "open loop" or "closed loop"
    target_cycles_per_s: float | None = None    # an open loop's rate
    feed: str | None = None
    server_wait: float | None = None
    client_wait: float | None = None
    steal: float | None = None
    version: str | None = None
    pinning: str | None = None
    cycles: int | None = None
    window_s: float | None = None
    client_cores: int | None = None
    latency_ms: Latencies = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    backlog: int | None = None
    scripts: str | None = None
    warnings: tuple[str, ...] = ()
    # One server: load.audit.AuditReport.to_dict(); a cluster: {"passed", "nodes": {node: AuditReport.to_dict()}}.
    audit: Mapping[str, Any] | None = optional()

    @property
    def claim_ms(self) -> Mapping[str, float]:
        return self.latency_ms.get("claim") or {}


@dataclass(frozen=True)
class CapacityEntry(CapacityFiguresEntry):
    """One server's figures, its ceiling whole and, for an open loop, the schedule's account."""

    scripts_per_cycle: float | None = None
    ceiling: Mapping[str, Any] | None = None    # load.ceiling.Ceiling.to_dict()
    open_loop: Mapping[str, Any] | None = optional()   # capacity.open_loop's account of the schedule


@dataclass(frozen=True)
class ClusterEntry(CapacityFiguresEntry):
    """A cluster's figures over all its masters (server busy and wait are the busiest master's), a row per
    master, and the per-queue accounting."""

    bound_node: str | None = None
    busiest_node: str | None = None
    ceiling_note: str | None = None
    cores_note: str | None = None
    machine_busy: float | None = None           # cores busy with the nodes and the driver / cores
    cores_full: bool = False
    cluster: bool = True
    queues: int | None = None
    placements: tuple[Mapping[str, Any], ...] = ()   # servers.Placement: queue, slot, node
    nodes: tuple[NodeEntry, ...] = many(NodeEntry)
    unloaded_masters: tuple[str, ...] = ()
    accounting_passed: bool | None = None
    accounting: tuple[Mapping[str, Any], ...] = ()   # per queue: driver and server completes, ok


def entry_of(entry: Mapping[str, Any]) -> CapacityEntry | ClusterEntry:
    """A build's entry, typed as the run it came from: a cluster's says so."""
    return ClusterEntry.from_record(entry) if entry.get("cluster") else CapacityEntry.from_record(entry)


@dataclass(frozen=True)
class SloTarget(Entry):
    """The latency target: a quantile of claim latency within a limit (capacity.slo_spec.SloSpec.to_dict())."""

    text: str | None = None                     # as a reader says it
    key: str | None = None                      # names the figure
    verb: str | None = None
    quantile: float | None = None
    name: str | None = None                     # the quantile as named, e.g. p99
    limit_ms: float | None = None


def slo_figure(window_s: float | None, held: float | None) -> str:
    """`the rate a 2 s probe holds 95% of the time`: what an --slo run's rate is a figure of."""
    window = "?" if window_s is None else f"{window_s:g}"
    share = "?% of the time" if held is None else "half the time" if held == 0.5 else f"{held:.0%} of the time"
    return f"the rate a {window} s probe holds {share}"


@dataclass(frozen=True)
class SloEntry(Entry):
    """One build's rate at the target: the median over searches with its interval, and each search."""

    version: str | None = None
    rate_per_s: float | None = None
    interval: tuple[float, float | None] | None = None   # the searches' order statistics; null: no upper bound
    coverage: float | None = None                 # the interval's, at least: 0.969 for 6 searches
    ranks: tuple[int, int] | None = None
    n: int | None = None
    text: str | None = None                     # the interval, or why there is none
    never_held: int | None = None               # searches in which no rate held (a rate of 0)
    search_rates: tuple[float | None, ...] = ()
    failed_above: tuple[float | None, ...] = ()
    resolved: tuple[bool, ...] = ()
    capacity_per_s: tuple[float, ...] = ()      # each search's closed-loop cycles/s
    probes: int | None = None
    probes_passed: int | None = None
    bound_when_failing: Mapping[str, int] = field(default_factory=dict)
    audit_passed: bool | None = None
    warnings: tuple[str, ...] = ()
    # compare --slo: the ratio of rates to the build's baseline, the verdict on it as said (or "baseline"),
    # and the verdict whole
    baseline: str | None = optional()
    verdict: str | None = optional()
    verdict_detail: RatioVerdictEntry | None = one(RatioVerdictEntry, written_when_none=False)
    search_ratios: tuple[float, ...] | None = optional()

    @classmethod
    def from_record(cls, entry: Mapping[str, Any]) -> SloEntry:
        """An entry; one written before `interval` had the same order statistics as `ci95`."""
        if "interval" not in entry and "ci95" in entry:
            entry = {**entry, "interval": entry["ci95"]}
        return super().from_record(entry)


@dataclass(frozen=True)
class SloBlock(Entry):
    target: SloTarget = one(SloTarget, SloTarget())
    searches: int | None = None
    resolution: float | None = None
    search_method: str | None = None
    pass_rule: str | None = None
    interval_method: str | None = None
    level: float | None = None
    min_trials: int | None = None
    order: str | None = None
    window_s: float | None = None
    warmup_s: float | None = None
    reply_timeout_s: float | None = None
    holds_in_a_row: int = 1                     # probes in a row a rate must hold (records before it: 1)
    held: float | None = None                   # the share one probe holds at the rate reported: 0.5 ** (1 / m)
    figure: str | None = None                   # that in words (slo_figure)
    never_held_rule: str | None = None
    builds: Mapping[str, SloEntry] = by_name(SloEntry)
    ratio_method: str | None = optional()       # compare --slo
    margin: float | None = optional()

    @property
    def held_share(self) -> float:
        return self.held if self.held is not None else float(0.5 ** (1 / max(1, self.holds_in_a_row)))

    @property
    def figure_text(self) -> str:
        return self.figure or slo_figure(self.window_s, self.held_share)


@dataclass(frozen=True)
class CapacityRecord:
    """A capacity run: a window per build, or (--slo) a rate at a target per build."""

    builds: Mapping[str, CapacityEntry | ClusterEntry] = field(default_factory=dict)
    slo: SloBlock | None = None

    def to_record(self) -> dict[str, Any]:
        if self.slo is not None:
            return {"slo": self.slo.to_record()}
        return {"builds": {name: e.to_record() for name, e in self.builds.items()}}

    @classmethod
    def from_record(cls, summary: Mapping[str, Any]) -> CapacityRecord:
        builds = summary.get("builds") or {}
        slo = summary.get("slo")
        return cls({str(n): entry_of(e) for n, e in builds.items() if isinstance(e, Mapping)},
                   SloBlock.from_record(slo) if isinstance(slo, Mapping) else None)


def slo_headlines(kind: str, slo: SloBlock | None) -> Iterator[Headline]:
    """A --slo run's median rate at its target per build, and its ratio to the baseline where it has
    one. The target, the probe's window and the share held name the figure: a rate at one says
    nothing of another (`2s_held_95`: the rate a 2 s probe holds 95% of the time)."""
    if slo is None:
        return
    window = "?" if slo.window_s is None else f"{slo.window_s:g}"
    at = f"{kind}.slo.{slo.target.key or '?'}.{window}s_held_{round(100 * slo.held_share)}"
    for build, e in slo.builds.items():
        figures: list[tuple[str, Any, str, str]] = [(f"{at}.rate_per_s", e.rate_per_s, "1/s", HIGHER)]
        if e.baseline not in (None, build):
            ratio = e.verdict_detail.ratio if e.verdict_detail is not None else None
            figures.append((f"{at}.rate_ratio_vs_{e.baseline}", ratio, "ratio", HIGHER))
        yield from each(build, e.version, figures)


RECORD = CapacityRecord   # what summary.json holds, typed


def headlines(r: Record) -> Iterator[Headline]:
    record = CapacityRecord.from_record(r.summary)
    for build, h in record.builds.items():
        yield from each(build, h.version, [
            ("capacity.cycles_per_s", h.cycles_per_s, "1/s", HIGHER),
            ("capacity.server_us_per_cycle", h.server_us_per_cycle, "us", LOWER),
            ("capacity.script_us_per_cycle", h.script_us_per_cycle, "us", LOWER)])
    yield from slo_headlines(r.kind, record.slo)
