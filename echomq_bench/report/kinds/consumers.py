"""A `consumers` record: how does throughput grow with consumers, and which
side is the bound? Each consumer is one connection with one claim or
complete in flight, the closed loop a worker pool makes.

The answer gives each build's growth from the fewest consumers to the most
over its rounds, with its interval (measurement.growth), and the side that
bound its windows at the most consumers, trial by trial. Where the client,
the load generator's CPU, held most of them, the answer says the server's
own growth is at least that (docs/design/consumers.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from echomq_bench.measurement.growth import MIN_TRIALS
from echomq_bench.measurement.verdicts import EQUIVALENT, FASTER, INCONCLUSIVE, SLOWER
from echomq_bench.records.files import Run
from echomq_bench.records.kinds.consumers import ConsumersRecord, GrowthEntry, growth_of
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines, machine
from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table

__all__ = ["section", "answer", "growth_line", "bound_text"]

QUESTION = "How does throughput grow with consumers?"
FIGURES = ("cycles_per_s", "server_utilization", "server_wait", "client_utilization")
SIDE = {"server": "the server", "client": "the client (the load generator's CPU)",
        "neither": "neither side (the round trip)"}


def _trials(run: Run) -> pd.DataFrame:
    """The table with every row's round; a table from before rounds is one round."""
    t = run.table("consumers")
    if "trial" not in t.columns:
        t = t.assign(trial=1)
    return t.assign(trial=t["trial"].fillna(1).astype(int))


def _points(run: Run) -> pd.DataFrame:
    """build, consumers, trials, the figures (median over the trials), the range of cycles/s and the bound
    most trials had: one row per point."""
    t = _trials(run)
    picked = t[t["metric"].isin(FIGURES)]
    wide = picked.pivot_table(index=["build", "consumers"], columns="metric", values="value",
                              aggfunc="median").reset_index()
    rates = t[t["metric"] == "cycles_per_s"].groupby(["build", "consumers"])
    extra = rates["value"].agg(trials="count", low="min", high="max").reset_index()
    bounds = rates["bound"].agg(lambda b: b.value_counts().index[0]).reset_index()
    order = {b: i for i, b in enumerate(dict.fromkeys(t["build"]))}
    out = wide.merge(extra, on=["build", "consumers"]).merge(bounds, on=["build", "consumers"])
    first = ["build", "consumers", "trials", "cycles_per_s", "low", "high"]
    out = out[[*first, *(c for c in out.columns if c not in first)]]
    return out.sort_values(["build", "consumers"], key=lambda c: c.map(order) if c.name == "build" else c)


def _factor(x: float) -> str:
    return f"{x:.2f}" if x < 2 else f"{x:.1f}"


def bound_text(g: GrowthEntry) -> str:
    """`the bound at 16: the server in 6 of 6 trials`, and what a client-bound majority means."""
    counts = sorted(g.bound_at_high.items(), key=lambda kv: -kv[1])
    total = sum(n for _, n in counts)
    if not counts:
        return f"the bound at {g.high}: not recorded"
    sides = ", ".join(f"{SIDE.get(side, side)} in {n} of {total} trials" for side, n in counts)
    text = f"the bound at {g.high}: {sides}"
    if counts[0][0] == "client":
        text += ("; the load generator, not the server, set the pace there, so the server's own growth is at "
                 "least this")
    return text


def growth_line(build: str, g: GrowthEntry) -> str:
    """One build's growth with its interval, or inconclusive and what would decide it, then its bound."""
    v = g.ratio
    who = g.version or build
    n = int(v.n or 0)
    if v.ratio is None or v.ratio != v.ratio:
        return f"From {g.low} to {g.high} consumers on {who}: no round measured both; {bound_text(g)}."
    interval = (f"95% CI {_factor(v.ci[0])}–{_factor(v.ci[1])}" if v.ci and n >= MIN_TRIALS
                else "too few trials for an interval")
    verb = {EQUIVALENT: "stays at", SLOWER: "falls to"}.get(v.verdict or "", "grows" if v.ratio >= 1 else "falls to")
    rates = f"{(g.low_cycles_per_s or 0):,.0f} to {(g.high_cycles_per_s or 0):,.0f} cycles/s"
    said = {FASTER: "", EQUIVALENT: f": no growth beyond ±{(v.margin or 0):.0%}", SLOWER: ": it falls"}
    if v.verdict == INCONCLUSIVE:
        short = n < MIN_TRIALS
        said[INCONCLUSIVE] = (f": inconclusive, {MIN_TRIALS} trials a point would decide it" if short
                              else ": inconclusive, more trials would decide it")
    return (f"From {g.low} to {g.high} consumers throughput {verb} {_factor(v.ratio)}× on {who} ({interval}, "
            f"n = {n}; {rates}){said.get(v.verdict or '', '')}; {bound_text(g)}.")


def _method(run: Run, record: ConsumersRecord, builds: int) -> str:
    if record.trials is None:   # a record from before rounds kept its window in meta.json
        window_s = (run.meta.get("settings") or {}).get("window_s")
        window = f" of {float(window_s):g} s" if window_s else ""
        return f"One trial per point{window}, builds one after another."
    given = (f"; the first {builds} of {record.builds_given} builds, the reference first"
             if record.builds_given and record.builds_given > builds else "")
    return (f"A trial is one {float(record.window_s or 0):g} s window (after {float(record.warmup_s or 0):g} s "
            f"of warm-up) at one count on one build; {record.trials} rounds, each every build at every count "
            f"once in an order drawn per round (seed {record.order_seed}){given}. Growth: the geometric mean of "
            f"each round's ratio, most over fewest consumers of one build, with its 95% t-interval on the log "
            f"ratios, n = rounds; under {MIN_TRIALS}, no interval.")


def _one_trial_line(grown: dict[str, GrowthEntry]) -> str:
    """A record from before rounds: one trial a point on every build, so one line for all of them, no
    interval, rather than a line per build that each says the same thing."""
    factors = [float(g.ratio.ratio) for g in grown.values() if g.ratio.ratio is not None and g.ratio.ratio > 0]
    g = next(iter(grown.values()))
    spread = f"{_factor(min(factors))}–{_factor(max(factors))}×" if factors else "-"
    return (f"From {g.low} to {g.high} consumers throughput grows {spread} across {len(grown)} builds (one trial a "
            f"point, n = 1; no interval): inconclusive, {MIN_TRIALS} trials a point would decide it.")


def _grown(run: Run) -> tuple[ConsumersRecord, dict[str, GrowthEntry]]:
    record = ConsumersRecord.from_record(run.summary)
    rows: list[dict[str, Any]] = _trials(run).to_dict("records")
    return record, growth_of(record, rows)


def answer(run: Run, out: Path) -> Answer | None:
    points = _points(run)
    if points.empty:
        return None
    record, grown = _grown(run)
    lines = ([_one_trial_line(grown)] if record.trials is None and len(grown) > 1
             else [growth_line(build, g) for build, g in grown.items()])
    png = charts.consumers_growth(points, out / "answer_consumers.png")
    foot = (f"Each consumer one connection with one call in flight, server and consumers unpinned on "
            f"{machine(run)}. {_method(run, record, len(grown))} A side is the bound when busy, or waiting for a "
            "core, 97% of the window; 'neither' means the round trip set the pace. Cycles/s and the chart: medians "
            "over the trials, filled where the server bound most of them.")
    return Answer(QUESTION, lines, png, foot, "answer-consumers")


def section(run: Run, out: Path) -> list[Block]:
    points = _points(run)
    record, grown = _grown(run)
    table = points.rename(columns={"cycles_per_s": "cycles/s", "low": "min cycles/s", "high": "max cycles/s",
                                   "server_utilization": "server busy", "server_wait": "server wait",
                                   "client_utilization": "client CPU", "bound": "bound (most trials)"})
    each = _trials(run)
    each = each[each["metric"] == "cycles_per_s"]
    columns = [c for c in ("order", "trial", "build", "consumers", "bound", "value") if c in each.columns]
    windows = each[columns].rename(columns={"value": "cycles/s"})
    if "order" in windows.columns:
        windows = windows.sort_values("order")
    return [Heading("Throughput against consumers", anchor="consumers"),
            Para("Each consumer is one connection with one claim or complete in flight: the closed loop a worker "
                 "pool makes. Throughput climbs until the server's main thread or the client runs out."),
            Table(table, "Throughput against consumers, medians over the trials"),
            Image(charts.throughput_vs_consumers(points, out / "consumers.png"),
                  "Throughput against consumers, one line per build"),
            Notes(context_lines(run, trials=_method(run, record, len(grown)).rstrip("."),
                                bottleneck="; ".join(f"{b}: {bound_text(g)}" for b, g in grown.items()))),
            Table(windows, "Every trial, in the order run")]
