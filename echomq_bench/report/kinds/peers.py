"""A `peers` record: the same no-op jobs through echomq and the other queues.

Per server, queue and mode: what a job costs the server (main-thread µs
with its interval, script µs, commands, round trips, memory while pending),
what it costs the clients and how fast it goes, and the ratio of each to
the baseline queue with its interval and verdict; then each queue's
settings. Every figure is the geometric mean over the trials, as
`echomq_bench.peers.summary` wrote it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.records.kinds.compare import RatioVerdictEntry
from echomq_bench.records.kinds.peers import PeersRecord, QueueEntry
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table, Warning

__all__ = ["section"]

BOTTLENECK = "client (Python consumers); compare server µs per job"


def _fig(value: Any) -> str:
    """A figure to three significant digits or so, thousands separated."""
    if value is None:
        return "-"
    v = float(value)
    if v != v:
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def _interval(e: QueueEntry, figure: str) -> str:
    c = e.ci.get(figure)
    return "-" if c is None or not c.ci else f"{_fig(c.ci[0])}-{_fig(c.ci[1])}"


def _where(e: QueueEntry) -> dict[str, Any]:
    return {"server": e.server, "queue": e.queue, "mode": e.mode}


def _server_cost(entries: tuple[QueueEntry, ...]) -> Table:
    rows = [{**_where(e), "µs/job": _fig(e.mean("server_us_per_job")),
             "95% CI": _interval(e, "server_us_per_job"), "script µs": _fig(e.mean("script_us_per_job")),
             "cmds/job": _fig(e.mean("commands_per_job")), "trips/job": _fig(e.mean("round_trips_per_job")),
             "B/pending": _fig(e.mean("bytes_per_pending_job"))} for e in entries]
    return Table(pd.DataFrame(rows), "Server cost per job: main-thread µs with its 95% interval, µs inside scripts, "
                                     "commands (those inside scripts and MULTI included), round trips, and bytes "
                                     "held per pending job")


def _client_side(entries: tuple[QueueEntry, ...]) -> Table:
    rows = [{**_where(e), "jobs/s": _fig(e.mean("jobs_per_s")), "95% CI": _interval(e, "jobs_per_s"),
             "client µs/job": _fig(e.mean("client_us_per_job")), "client 95% CI": _interval(e, "client_us_per_job"),
             "clean": "yes" if e.drained_clean else "NO"} for e in entries]
    return Table(pd.DataFrame(rows), "A job's whole life, enqueued and drained: jobs/s, and the CPU µs per job of "
                                     "the producer and consumer processes; clean: every job ran once and nothing "
                                     "was left on the server")


def _ratio(v: RatioVerdictEntry | None) -> tuple[str, str]:
    if v is None or v.ratio is None:
        return "-", "-"
    ci = v.ci
    return f"{v.ratio:.2f}" + (f" [{ci[0]:.2f}-{ci[1]:.2f}]" if ci else ""), str(v.text)


def _ratios(entries: tuple[QueueEntry, ...], base: str) -> Table | None:
    rows = []
    for e in entries:
        if e.queue == base:
            continue
        vs = e.vs_baseline
        us, us_verdict = _ratio(vs.get("server_us_per_job"))
        rate, rate_verdict = _ratio(vs.get("jobs_per_s"))
        rows.append({**_where(e), "µs/job ratio": us, "µs verdict": us_verdict if vs else f"no {base} run",
                     "jobs/s ratio": rate, "jobs/s verdict": rate_verdict})
    if not rows:
        return None
    return Table(pd.DataFrame(rows), f"Ratio to {base} in the same mode on the same server: trial-paired geometric "
                                     "mean [95% CI] and verdict (below 1 is less server time per job; above 1 more "
                                     "jobs/s)")


def _headline(record: PeersRecord) -> list[Block]:
    """echomq's server µs per job against the baseline's, one line per server and mode, with n and interval."""
    head, base = record.headline, record.baseline
    lines = []
    for e in record.queues:
        v = e.vs_baseline.get("server_us_per_job")
        if e.queue != head.queue or v is None or v.ratio is None:
            continue
        ci = v.ci
        width = f", ±{(ci[1] / ci[0]) ** 0.5 - 1:.1%}" if ci else ""
        lines.append(f"{e.server} {e.mode}: {head.queue} costs {v.ratio:.3f}x {base}'s server "
                     f"µs per job" + (f" [{ci[0]:.3f}, {ci[1]:.3f}{width}]" if ci else "")
                     + f", n = {v.n} trial pairs: {v.text}")
    if not lines:
        return []
    rule = (f"; the pair ran on alone until every interval was within ±{head.precision:.0%}, "
            f"{head.max_trials} trials or the run's budget" if head.precision else "")
    return [Para(f"Headline, {head.queue} against {base} (95% t-interval on the trial-paired log ratios{rule}):"),
            Notes(lines)]


def _settings(entries: tuple[QueueEntry, ...]) -> list[Block]:
    """What each queue ran with: the worker's settings per mode, the enqueue path per queue."""
    seen: dict[tuple[str, str], str] = {}
    enqueue: dict[str, str] = {}
    for e in entries:
        seen.setdefault((e.queue, e.mode), e.drain_mode)
        enqueue.setdefault(e.queue, f"{e.queue} ({e.library}): enqueue {e.enqueue_mode}")
    frame = pd.DataFrame([{"queue": q, "mode": m, "worker settings": text} for (q, m), text in seen.items()])
    return [Table(frame, "Settings: how each queue drains, in each mode"), Notes(list(enqueue.values()))]


def _trouble(record: PeersRecord) -> list[Block]:
    lines = [f"skipped {name}: {why}" for name, why in record.skipped.items()]
    lines += [f"FAILED {f.server} {f.queue} ({f.mode}) trial {f.trial}: "
              f"{f.error.splitlines()[0] if f.error else '?'}" for f in record.failures]
    return [Warning("; ".join(lines))] if lines else []


def _older(run: Run) -> list[Block]:
    """A record without the per-queue summary: the tidy table's medians."""
    t = run.table("peers")
    keep = t[t["metric"].isin(["server_us_per_job", "commands_per_job", "drain_jobs_per_s", "enqueue_jobs_per_s"])]
    idx = [c for c in ("server", "build", "queue", "mode") if c in keep.columns]
    piv = keep.pivot_table(index=idx, columns="metric", values="value", aggfunc="median").reset_index()
    return [Table(piv, "Peers: the same no-op jobs")]


def section(run: Run, out: Path) -> list[Block]:
    record = PeersRecord.from_record(run.summary)
    entries = record.queues
    blocks: list[Block] = [Heading("Beside BullMQ and the Python queues", anchor="peers")]
    if not entries:
        return blocks + _older(run) + [Notes(context_lines(run, bottleneck=BOTTLENECK))]
    trials = "?" if record.trials is None else record.trials
    blocks += [*_trouble(record), *_headline(record),
               Para(f"{_count(record.jobs)} jobs of {record.payload_bytes} bytes per queue and trial, "
                    f"{'?' if record.consumers is None else record.consumers} consumer processes, {trials} trial(s), "
                    "interleaved round by round, each queue on a fresh server. Figures per job, geometric means "
                    "over the trials with 95% t-intervals; server µs are main-thread CPU."),
               _server_cost(entries), _client_side(entries)]
    ratios = _ratios(entries, record.baseline)
    blocks += ([ratios] if ratios is not None else []) + _settings(entries)
    bounds = sorted({e.drain.bottleneck for e in entries})
    return blocks + [Notes(context_lines(run, trials=f"{trials} per queue and mode",
                                         bottleneck=f"while draining, {' or '.join(bounds)}; compare server µs per "
                                                    "job, which the client's speed does not change"))]
