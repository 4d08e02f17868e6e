"""Each kind of record's headline figures, one per build and metric: what
the results history keeps of a run, read from the frozen record alone.

A metric is named `<kind>.<figure>` (with the verb, form, case or queue it
is of in between, e.g. `gate.claim.server_us`), and says which way is
better ("lower", "higher", or "" when neither is, such as a recommended
lease). A key a record of an older schema lacks is skipped, not guessed.
This module imports no pandas: it runs each time a record is written.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

from echomq_bench.records.record import KINDS, Record

__all__ = ["Headline", "headlines", "HEADLINE_KINDS"]

LOWER, HIGHER, NEITHER = "lower", "higher", ""


@dataclass(frozen=True)
class Headline:
    build: str
    version: str | None
    metric: str
    value: float
    unit: str
    better: str


Extractor = Callable[[Record], Iterator[Headline]]
# Each kind's extractor, by the kind it declares below; the kinds themselves are records.record.KINDS.
HEADLINE_KINDS: dict[str, Extractor] = {}


def extracts(kind: str) -> Callable[[Extractor], Extractor]:
    """Register the function as `kind`'s headline extractor; a kind not in KINDS is a mistake caught at import."""
    if kind not in KINDS:
        raise ValueError(f"no record kind {kind!r}; the kinds are {', '.join(KINDS)}")

    def register(extractor: Extractor) -> Extractor:
        HEADLINE_KINDS[kind] = extractor
        return extractor

    return register


# (metric, value, unit, which way is better)
Figures = Iterable[tuple[str, Any, str, str]]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def _each(build: Any, version: Any, figures: Figures) -> Iterator[Headline]:
    for metric, value, unit, better in figures:
        number = _number(value)
        if number is not None:
            yield Headline(str(build), str(version) if version else None, metric, number, unit, better)


def _median_of(entry: Mapping[str, Any], key: str) -> Any:
    value = entry.get(key)
    return value.get("median") if isinstance(value, Mapping) else value


def _slo_rates(r: Record) -> Iterator[Headline]:
    """A --slo run's median rate at its target per build (the target names the figure: a rate at one
    target says nothing of another), and its ratio to the baseline where it has one."""
    slo = r.summary.get("slo")
    if not isinstance(slo, Mapping):
        return
    at = f"{r.kind}.slo.{(slo.get('target') or {}).get('key', '?')}"
    for build, e in (slo.get("builds") or {}).items():
        figures: list[tuple[str, Any, str, str]] = [(f"{at}.rate_per_s", e.get("rate_per_s"), "1/s", HIGHER)]
        if e.get("baseline") not in (None, build):
            figures.append((f"{at}.rate_ratio_vs_{e['baseline']}", e.get("ratio"), "ratio", HIGHER))
        yield from _each(build, e.get("version"), figures)


@extracts("capacity")
def _capacity(r: Record) -> Iterator[Headline]:
    for build, h in (r.summary.get("builds") or {}).items():
        yield from _each(build, h.get("version"), [
            ("capacity.cycles_per_s", h.get("cycles_per_s"), "1/s", HIGHER),
            ("capacity.server_us_per_cycle", h.get("server_us_per_cycle"), "us", LOWER),
            ("capacity.script_us_per_cycle", h.get("script_us_per_cycle"), "us", LOWER)])
    yield from _slo_rates(r)


@extracts("compare")
def _compare(r: Record) -> Iterator[Headline]:
    base = r.summary.get("baseline")
    # Rates mean another thing in each interleave mode (a share of one core
    # when the builds run together); the mode is part of their name unless it is the default.
    mode = r.summary.get("interleave", "together")
    at = "" if mode == "together" else f"[{mode}]"
    for build, b in (r.summary.get("builds") or {}).items():
        yield from _each(build, b.get("version"), [
            (f"compare.cycles_per_s{at}", _median_of(b, "cycles_per_s"), "1/s", HIGHER),
            (f"compare.server_us_per_cycle{at}", _median_of(b, "server_us_per_cycle"), "us", LOWER),
            (f"compare.claim_p99_ms{at}", _median_of(b, "claim_p99_ms"), "ms", LOWER)])
        if build != base:
            yield from _each(build, b.get("version"), [
                (f"compare.server_us_ratio_vs_{base}", b.get("server_us_ratio"), "ratio", LOWER),
                (f"compare.throughput_ratio_vs_{base}", b.get("throughput_ratio"), "ratio", HIGHER)])
    yield from _slo_rates(r)


@extracts("consumers")
def _consumers(r: Record) -> Iterator[Headline]:
    points: dict[tuple[Any, Any, Any], list[float]] = {}
    for row in r.tables.get("consumers", ()):
        if row.get("metric") == "cycles_per_s" and _number(row.get("value")) is not None:
            points.setdefault((row.get("build"), row.get("version"), row.get("consumers")), []).append(row["value"])
    for (build, version, consumers), values in points.items():
        yield from _each(build, version, [(f"consumers.cycles_per_s_at_{consumers}", statistics.median(values),
                                           "1/s", HIGHER)])


_POINT = re.compile(r"M=(\d+),cap=(\d+),k=(\d+)")
DEFAULT_CAP = 100


def _full_call_at_default_cap(table: Mapping[str, Any]) -> Any:
    """One full call (k = cap) at the default cap and the largest M measured: the report's headline."""
    full = [(int(m.group(1)), us) for key, us in table.items()
            if (m := _POINT.fullmatch(key)) and int(m.group(2)) == int(m.group(3)) == DEFAULT_CAP]
    return max(full)[1] if full else None


@extracts("reapcost")
def _reapcost(r: Record) -> Iterator[Headline]:
    for b in r.summary.get("builds") or ():
        form = b.get("form", "bare")  # records before the forms measured the bare form alone
        for verb, v in (b.get("verbs") or {}).items():
            fit = v.get("fit") or {}
            yield from _each(b.get("build"), b.get("version"), [
                (f"reapcost.{verb}.{form}.call_us_cap{DEFAULT_CAP}", _full_call_at_default_cap(
                    v.get("median_server_us") or {}), "us", LOWER),
                (f"reapcost.{verb}.{form}.us_per_job", fit.get("us_per_job"), "us", LOWER),
                (f"reapcost.{verb}.{form}.base_us", fit.get("base_us"), "us", LOWER),
                (f"reapcost.{verb}.{form}.ratio_largest_to_smallest_M", v.get("ratio_largest_to_smallest_M"),
                 "ratio", LOWER)])


@extracts("lease")
def _lease(r: Record) -> Iterator[Headline]:
    for s in r.summary.get("servers") or ():
        rec = s.get("recommendation") or {}
        yield from _each(s.get("server"), s.get("version"), [
            ("lease.recommended_lease_ms", rec.get("lease_ms"), "ms", NEITHER),
            ("lease.false_expiry_rate", rec.get("false_expiry_rate"), "fraction", LOWER),
            ("lease.recovery_p99_ms", rec.get("recovery_p99_ms"), "ms", LOWER)])


@extracts("gate")
def _gate(r: Record) -> Iterator[Headline]:
    for b in r.summary.get("builds") or ():
        figures: list[tuple[str, Any, str, str]] = [
            ("gate.regressions", len(b.get("regressions") or ()), "verbs", LOWER),
            ("gate.inconclusive", len(b.get("inconclusive") or ()), "verbs", LOWER)]
        for v in b.get("verdicts") or ():
            figures += [(f"gate.{v['case']}.server_us", v.get("server_us"), "us", LOWER),
                        (f"gate.{v['case']}.ratio", v.get("now_ratio"), "ratio", LOWER)]
        yield from _each(b.get("build"), b.get("version"), figures)


@extracts("counts")
def _counts(r: Record) -> Iterator[Headline]:
    for b in r.summary.get("builds") or ():
        figures: list[tuple[str, Any, str, str]] = [("counts.regressions", len(b.get("regressions") or ()), "verbs",
                                                     LOWER)]
        figures += [(f"counts.{verb}.instructions", f.get("instructions"), "instructions", LOWER)
                    for verb, f in (b.get("figures") or {}).items()]
        yield from _each(b.get("build"), b.get("version"), figures)


@extracts("verbs")
def _verbs(r: Record) -> Iterator[Headline]:
    for b in r.summary.get("builds") or ():
        yield from _each(b.get("build"), b.get("version"), [
            (f"verbs.{case}.{name}", f.get(key), unit, LOWER) for case, f in (b.get("verbs") or {}).items()
            for name, key, unit in (("server_us", "server_us", "us"), ("ratio", "server_ratio", "ratio"))])


@extracts("check")
def _check(r: Record) -> Iterator[Headline]:
    failed: dict[tuple[Any, Any], int] = {}
    for row in r.tables.get("check", ()):
        key = (row.get("server"), row.get("version"))
        failed[key] = failed.get(key, 0) + (row.get("ok") is not True)
    for (server, version), count in failed.items():
        yield from _each(server, version, [("check.failed_stories", count, "stories", LOWER)])


@extracts("faults")
def _faults(r: Record) -> Iterator[Headline]:
    for o in r.summary.get("scenarios") or ():
        if o.get("skipped"):
            continue
        yield from _each(o.get("server"), o.get("build") or None, [
            (f"faults.{o.get('scenario')}.lost", o.get("lost"), "jobs", LOWER),
            (f"faults.{o.get('scenario')}.double_accepted", o.get("double_accepted"), "jobs", LOWER)])
    for soak in r.summary.get("soak") or ():  # a soak's record: its totals, and recovery per fault kind
        yield from _each(soak.get("server"), soak.get("build") or None, [
            ("faults.soak.lost", soak.get("lost"), "jobs", LOWER),
            ("faults.soak.double_accepted", soak.get("double_accepted"), "jobs", LOWER),
            ("faults.soak.ambiguous_resolved", soak.get("ambiguous_resolved"), "calls", NEITHER),
            ("faults.soak.ambiguous_unresolved", soak.get("ambiguous_unresolved"), "calls", LOWER),
            *[(f"faults.soak.{k.get('kind')}.recovery_{q}_s", k.get(f"recovery_{q}_s"), "s", LOWER)
              for k in soak.get("kinds") or () for q in ("p50", "p99")]])


@extracts("peers")
def _peers(r: Record) -> Iterator[Headline]:
    for q in r.summary.get("queues") or ():
        name = q.get("queue")
        yield from _each(q.get("server"), q.get("server_version"), [
            (f"peers.{name}.jobs_per_s", q.get("jobs_per_s"), "1/s", HIGHER),
            (f"peers.{name}.server_us_per_job", q.get("server_us_per_job"), "us", LOWER),
            (f"peers.{name}.commands_per_job", q.get("commands_per_job"), "commands", LOWER)])


FAILOVER_FIGURES = ("kill_to_promoted", "kill_to_ready", "kill_to_resumed", "kill_to_claim_only", "failed_calls",
                    "lost", "in_two_places")


def _lower_figures(r: Record, figures: tuple[str, ...]) -> Iterator[Headline]:
    """The figures named, from the tidy table named as the record's kind: a cluster
    audit's, where each is a count or a time and lower is better."""
    for row in r.tables.get(r.kind, ()):
        if row.get("metric") in figures:
            yield from _each(row.get("server"), row.get("version"),
                             [(f"{r.kind}.{row['metric']}", row.get("value"), str(row.get("unit", "")), LOWER)])


@extracts("failover")
def _failover(r: Record) -> Iterator[Headline]:
    return _lower_figures(r, FAILOVER_FIGURES)


RESHARD_FIGURES = ("failed_calls", "lost", "in_no_set", "without_row", "in_two_places")


@extracts("reshard")
def _reshard(r: Record) -> Iterator[Headline]:
    return _lower_figures(r, RESHARD_FIGURES)


def headlines(record: Record) -> list[Headline]:
    """The record's headline figures; none for a kind that has none (the main
    job's folder, whose parts are records of their own)."""
    reader = HEADLINE_KINDS.get(record.kind)
    return list(reader(record)) if reader else []
