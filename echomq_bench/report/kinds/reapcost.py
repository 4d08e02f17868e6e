"""A `reapcost` record: what does the reaper's cap cost? How long one reap
call blocks the server at the cap, against the size of the active set, and
how long a mass crash takes to drain at the reaper's interval; what another
cap would change. The live entries beside the expired ones come in two
forms, bare sorted-set members and members with their job rows.

The answer reads reap alone; the section shows every verb the record holds
(reap, and promote when it was measured): one full call's server µs at each
M and cap, whether the cost grows with M (the ratio and the fit), and the
drain of a mass crash back to back and at each cadence."""

from __future__ import annotations

import math
from pathlib import Path
import pandas as pd

from echomq_bench.formatting import fmt_ms
from echomq_bench.measurement.stats import median
from echomq_bench.records.files import Run
from echomq_bench.records.kinds.reapcost import DEFAULT_CAP, ReapcostRecord
from echomq_bench.report import charts
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table

__all__ = ["section", "answer", "PRODUCT_CAP"]

QUESTION = "What does the reaper's cap cost?"
PRODUCT_CAP = DEFAULT_CAP
PREFERRED_BUILD = "redis7.0"   # the sentence speaks of the main job's baseline when it is here


def _form_of(record: ReapcostRecord) -> tuple[str, str]:
    """The form the answer reads (with job rows, a real queue's keyspace, when measured) and its label."""
    key = "rows" if "rows" in record.forms else next(iter(record.forms))
    return key, record.label_of(key)


def _full_calls(run: Run, form: str) -> tuple[pd.DataFrame, int]:
    """build, cap, ms: one call that moves `cap` expired jobs, at the largest M, median of its repeats."""
    t = run.table("reapcost")
    t = t[(t["metric"] == "server_us") & (t["verb"] == "reap") & (t["form"] == form) & (t["k"] == t["cap"])]
    largest = int(t["M"].max())
    full = t[t["M"] == largest].groupby(["build", "cap"], sort=False)["value"].agg(median).reset_index()
    return full.assign(ms=full["value"] / 1000.0)[["build", "cap", "ms"]], largest


def _drains(run: Run, form: str) -> tuple[pd.DataFrame, int, float]:
    """build, cap, s: a mass crash of K drained at one call per tick of the reaper's interval."""
    d = run.table("drain")
    d = d[(d["metric"] == "drain_at_cadence_ms") & (d["verb"] == "reap") & (d["form"] == form)]
    cadence = float(d["cadence_ms"].min())
    d = d[d["cadence_ms"] == cadence]
    out = d.groupby(["build", "cap"], sort=False)["value"].agg(median).reset_index()
    return out.assign(s=out["value"] / 1000.0)[["build", "cap", "s"]], int(d["K"].iloc[0]), cadence


def _at(frame: pd.DataFrame, build: str, cap: int, column: str) -> float | None:
    hit = frame[(frame["build"] == build) & (frame["cap"] == cap)][column]
    return float(hit.iloc[0]) if len(hit) else None


def _sentence(build: str, version: str, blocking: pd.DataFrame, drains: pd.DataFrame, m: int, k: int,
              cadence: float, label: str) -> str:
    def block_ms(cap: int) -> str:
        v = _at(blocking, build, cap, "ms")
        return "?" if v is None else f"{v:.2g} ms"

    def drain(cap: int) -> str:
        v = _at(drains, build, cap, "s")
        return "?" if v is None else fmt_ms(v * 1000)

    others = [c for c in sorted(set(blocking["cap"])) if c != PRODUCT_CAP]
    then = "; ".join(f"cap {c:,} would block {block_ms(c)} and drain in {drain(c)}" for c in others)
    return (f"At cap {PRODUCT_CAP}, one reap call blocks {version} for {block_ms(PRODUCT_CAP)} at M = {m:,} live "
            f"leases ({label}), and a crash of {k:,} jobs drains in {drain(PRODUCT_CAP)} at one reap every "
            f"{fmt_ms(cadence)}" + (f"; {then}." if then else "."))


def answer(run: Run, out: Path) -> Answer | None:
    if "reapcost" not in run.tables or "drain" not in run.tables:
        return None
    record = ReapcostRecord.from_record(run.summary)
    form, label = _form_of(record)
    blocking, m = _full_calls(run, form)
    drains, k, cadence = _drains(run, form)
    builds = list(dict.fromkeys(blocking["build"]))
    if not builds:
        return None
    build = PREFERRED_BUILD if PREFERRED_BUILD in builds else builds[0]
    png = charts.reap_against_cap(blocking, drains, PRODUCT_CAP, out / "answer_reap.png")
    table = run.table("reapcost")
    reap = table[(table["metric"] == "server_us") & (table["verb"] == "reap")]
    repeats = reap.groupby(["build", "form", "M", "cap", "k"]).size().min()
    sizes = " and ".join(f"{int(size):,}" for size in sorted(set(reap["M"])))
    note = ((run.meta.get("settings") or {}).get("reapcost") or {}).get("note")
    foot = (f"Server time of one call from commandstats, median of {repeats} calls per point, at M = {m:,} live "
            f"leases ({label}), the largest M measured (M = {sizes}{f': {note}' if note else ''}); drain: "
            f"ceil(K/cap) calls, one per {fmt_ms(cadence)} tick (the lease sweep's interval), plus each call's own "
            f"time. Bound: the server, one call at a time. Builds: {', '.join(builds)}.")
    return Answer(QUESTION, [_sentence(build, record.version_of(build), blocking, drains, m, k, cadence, label)], png,
                  foot, "answer-reap")


def _si(n: int) -> str:
    """1k, 100k, 1M: a size as the columns name it."""
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % div == 0:
            return f"{n // div:,}{unit}"
    return f"{n:,}"


def _us(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.1f}"


def _ratio_cap(points: pd.DataFrame) -> int:
    """The cap of the ratio check (100 unless the caps measured leave it out)."""
    check = points[points["metric"] == "ratio_check_server_us"]
    if len(check):
        return int(check["cap"].iloc[0])
    caps = sorted(set(int(c) for c in points["cap"]))
    return min(caps, key=lambda c: abs(math.log(c) - math.log(PRODUCT_CAP)))


def _grid(run: Run, record: ReapcostRecord, verb: str) -> Table | None:
    """One call that moves cap jobs (and one that finds nothing due), server µs at each M."""
    t = run.table("reapcost")
    t = t[(t["metric"] == "server_us") & (t["verb"] == verb)]
    if not len(t):
        return None
    empty_cap = _ratio_cap(run.table("reapcost"))
    t = t[(t["k"] == t["cap"]) | ((t["k"] == 0) & (t["cap"] == empty_cap))]
    med = t.groupby(["build", "form", "cap", "k", "M"], sort=False)["value"].agg(median)
    sizes = sorted(set(int(m) for m in t["M"]))
    rows = []
    for (build, form, cap, k), by_m in med.groupby(level=[0, 1, 2, 3], sort=False):
        values = {int(key[-1]): float(v) for key, v in by_m.items()}
        rows.append({"build": build, "form": record.label_of(str(form)), "cap": f"{int(cap):,}", "k": f"{int(k):,}",
                     **{f"M={_si(m)}": _us(values.get(m)) for m in sizes}, "_order": (int(cap), -int(k))})
    builds = list(dict.fromkeys(t["build"]))
    rows.sort(key=lambda r: (builds.index(r["build"]), r["_order"]))   # stable: bare before rows
    frame = pd.DataFrame(rows).drop(columns="_order")
    repeats = int(t.groupby(["build", "form", "M", "cap", "k"]).size().min())
    return Table(frame, f"{verb}: server µs of one call, median of {repeats}, by M live entries; k = cap is a "
                        f"full call, k = 0 finds nothing {'expired' if verb == 'reap' else 'due'}")


def _scaling(run: Run, record: ReapcostRecord) -> Table | None:
    """Whether a call's cost grows with M, and the fit, per build, form and verb."""
    t = run.table("reapcost")
    lo, hi = int(t["M"].min()), int(t["M"].max())
    span, pairs, rows = f"{_si(hi)}/{_si(lo)}", 0, []
    for b in record.builds:
        for verb, v in b.verbs.items():
            fit, pairs = v.fit, max(pairs, v.ratio_pairs)
            pair, ratio = v.ratio_per_pair_median_q1_q3, v.ratio_largest_to_smallest_M
            rows.append({"build": b.build, "form": b.form_label,
                         "verb": verb, "base µs": _us(fit.base_us),
                         "µs/job": "-" if fit.us_per_job is None else f"{fit.us_per_job:.2f}",
                         "µs/2xM": "-" if fit.us_per_doubling_of_M is None else f"{fit.us_per_doubling_of_M:+.2f}",
                         span: "-" if ratio is None else f"{ratio:.2f}x",
                         "per pair [IQR]": f"{pair[0]:.2f} [{pair[1]:.2f}-{pair[2]:.2f}]" if pair else "-",
                         "k=0": "-" if v.ratio_k0 is None else f"{v.ratio_k0:.2f}x",
                         "<= 2x": "-" if ratio is None else ("ok" if ratio <= v.ratio_target else "OVER")})
    if not rows:
        return None
    return Table(pd.DataFrame(rows),
                 f"Cost against M: one call of {_ratio_cap(t)} at M={_si(hi)} over the same at M={_si(lo)} "
                 f"(median of {pairs} side-by-side pairs, target at most 2x; a cost linear in M gives "
                 f"{hi / lo:,.0f}x), k=0 the same from the grid; the fit: µs = base + µs/job x moved "
                 "+ µs/2xM x log2(M)")


def _drain(run: Run, record: ReapcostRecord) -> Table | None:
    """A mass crash drained back to back (measured) and at one call per tick of each cadence (computed)."""
    if "drain" not in run.tables:
        return None
    d = run.table("drain")
    rows = []
    for (build, form, verb, cap), g in d.groupby(["build", "form", "verb", "cap"], sort=False):
        one = g[g["metric"] != "drain_at_cadence_ms"].groupby("metric")["value"].agg(median)
        at = g[g["metric"] == "drain_at_cadence_ms"].groupby("cadence_ms")["value"].agg(median)
        rows.append({"build": build, "form": record.label_of(str(form)), "verb": verb, "cap": f"{int(cap):,}",
                     "calls": f"{int(one.get('calls', 0)):,}", "max µs": _us(one.get("max_call_us")),
                     "back-to-back": fmt_ms(one.get("drain_back_to_back_ms")),
                     **{f"@{fmt_ms(float(c)).replace(' ', '')}": fmt_ms(float(v)) for c, v in at.items()}})
    if not rows:
        return None
    return Table(pd.DataFrame(rows).fillna("-"),
                 f"Drain of a mass crash: K={int(d['K'].iloc[0]):,} at once beside M={int(d['M'].iloc[0]):,} live "
                 "entries; back to back (measured), and at one call per tick of each cadence (computed: the ticks "
                 "between the calls plus the calls' own time)")


def _busy(record: ReapcostRecord) -> list[str]:
    """How busy each side was while a curve was taken: the figures are the server's own clock either way."""
    parts = []
    for b in record.builds:
        server, client = b.server_main_thread_busy, b.client_busy
        if server is not None and client is not None:
            parts.append(f"{b.build} ({b.form_label}) server main thread {server:.0%} busy, client {client:.0%}")
    return ["Busy while measured: " + "; ".join(parts) + "."] if parts else []


def section(run: Run, out: Path) -> list[Block]:
    record = ReapcostRecord.from_record(run.summary)
    verbs = list(dict.fromkeys(run.table("reapcost")["verb"]))
    footer = context_lines(run, trials="median of the repeats of each point",
                           bottleneck="server (one call at a time; the figure is the server's own time inside "
                                      "the script)", extra=_busy(record))
    blocks: list[Block] = [
        Heading("Reap cost against the cap", anchor="reapcost"),
        Para("One reap call blocks the server for its whole run: the latency spike every other client waits out. "
             "A smaller cap keeps the spike small but drains a mass crash more slowly. Flat across M means the "
             "cost grows like log M + k, not like M. "
             + ("Promote (due retries from the schedule) runs the same curve; the charts are reap's. "
                if "promote" in verbs else "")
             + "The live entries beside the expired ones: "
             + "; ".join(f"{f.label or key} ({f.meaning})" for key, f in record.forms.items()) + ".")]
    if "reap" in verbs and "drain" in run.tables:
        for form in record.forms:
            blocking, _ = _full_calls(run, form)
            drains, k, cadence = _drains(run, form)
            png = charts.reap_against_cap(blocking, drains, PRODUCT_CAP, out / f"reapcost_{form}.png")
            blocks.append(Image(png, f"{record.label_of(form)}: one full reap call's blocking time and a {k:,}-job "
                                     f"drain at one call per {fmt_ms(cadence)}, against the cap"))
    tables = [*(_grid(run, record, verb) for verb in verbs), _scaling(run, record), _drain(run, record)]
    return blocks + [t for t in tables if t is not None] + [Notes(footer)]
