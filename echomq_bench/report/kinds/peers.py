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
from echomq_bench.records.kinds.peers import FailureEntry, PeersRecord, QueueEntry
from echomq_bench.records.verdicts import RatioVerdictEntry
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


def _clean(e: QueueEntry) -> str:
    """The rounds that drained clean of the rounds the queue had (yes/NO in a record before counts)."""
    if not e.attempted:
        return "yes" if e.drained_clean else "NO"
    return f"{e.attempted - e.failed} of {e.attempted}"


def _client_side(entries: tuple[QueueEntry, ...]) -> Table:
    rows = [{**_where(e), "jobs/s": _fig(e.mean("jobs_per_s")), "95% CI": _interval(e, "jobs_per_s"),
             "client µs/job": _fig(e.mean("client_us_per_job")), "client 95% CI": _interval(e, "client_us_per_job"),
             "clean": _clean(e)} for e in entries]
    return Table(pd.DataFrame(rows), "A job's whole life, enqueued and drained: jobs/s, and the CPU µs per job of "
                                     "the producer and consumer processes; clean: the rounds in which every job "
                                     "ran once and nothing was left on the server, of the rounds the queue had "
                                     "(the others failed)")


def _ratio(v: RatioVerdictEntry | None) -> tuple[str, str]:
    if v is None or v.ratio is None:
        return "-", "-" if v is None or not v.text else v.text
    ci = v.ci
    return f"{v.ratio:.2f}" + (f" [{ci[0]:.2f}-{ci[1]:.2f}]" if ci else ""), str(v.text)


def _level(levels: set[float]) -> str:
    """The verdicts' interval level(s), as the caption states them."""
    if not levels:
        return "95%"
    return " or ".join(_pct(x) for x in sorted(levels))


def _pct(level: float) -> str:
    """A level with the digits that tell it from its neighbours: 95%, 97.5%, 99.94%."""
    return f"{level * 100:.2f}".rstrip("0").rstrip(".") + "%"


def _ratios(entries: tuple[QueueEntry, ...], base: str) -> Table | None:
    rows = []
    levels = {v.level for e in entries for v in e.vs_baseline.values() if v.level is not None and v.judged}
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
    return Table(pd.DataFrame(rows), f"Ratio to {base} in the same mode on the same server, interleaved rounds: "
                                     f"trial-paired geometric mean [{_level(levels)} CI] and verdict (below 1 is "
                                     "less server time per job; above 1 more jobs/s)")


def _family(record: PeersRecord) -> list[Block]:
    """How the verdicts allow for their number, and how failed rounds count: said once, under the tables."""
    if not record.correction:
        return []
    levels = {e.server: v.level for e in record.queues for v in e.vs_baseline.values() if v.level is not None}
    sizes = "; ".join(f"{server}: m = {m}, each at {_pct(levels[server])}"
                      for server, m in record.family_sizes.items() if m and server in levels)
    return [Para(f"Verdicts, {record.correction}" + (f" ({sizes})" if sizes else "") + ". A round is one run of "
                 "every queue in turn on one server; a queue's round that errored or did not drain clean counts "
                 "against it as a failure, named in its verdict, and a queue that failed in most of its rounds "
                 "gets no ratio verdict.")]


def _headline(record: PeersRecord) -> list[Block]:
    """echomq's server µs per job against the baseline's, one line per server and mode, with n and interval."""
    head, base = record.headline, record.baseline
    if not head.verdicts:
        return _older_headline(record)
    lines = [_headline_line(head.queue, base, h.verdict) for h in head.verdicts]
    lines = [f"{h.server} {h.mode}: {line}, n = {h.verdict.n} of {h.attempted} {h.rounds} rounds"
             + (f" ({h.failed} failed)" if h.failed else "") + f": {h.verdict.text}"
             for h, line in zip(head.verdicts, lines)]
    kinds = {h.rounds for h in head.verdicts}
    levels = {h.verdict.level for h in head.verdicts if h.verdict.level is not None}
    rounds = ("the headline rounds alone, the pair back to back with nothing between" if kinds == {"headline"}
              else "the interleaved rounds alone: no headline round ran")
    rule = (f"; the pair ran on alone until every interval was within ±{head.precision:.0%}, "
            f"{head.max_trials} headline rounds or the run's budget" if head.precision else "")
    return [Para(f"Headline, {head.queue} against {base}: t-interval on the trial-paired log ratios of {rounds}, "
                 f"each at {_level(levels)} (Bonferroni over the headline's verdicts on a server, one per mode; "
                 f"never pooled with the other kind of round){rule}:"),
            Notes(lines)]


def _headline_line(queue: str, base: str, v: RatioVerdictEntry) -> str:
    if v.ratio is None:
        return f"{queue} against {base}'s server µs per job: no ratio"
    ci = v.ci
    width = f", ±{(ci[1] / ci[0]) ** 0.5 - 1:.1%}" if ci else ""
    return (f"{queue} costs {v.ratio:.3f}x {base}'s server µs per job"
            + (f" [{ci[0]:.3f}, {ci[1]:.3f}{width}]" if ci else ""))


def _older_headline(record: PeersRecord) -> list[Block]:
    """A record before the headline had verdicts of its own: the headline queue's row, pooled as it was."""
    head, base = record.headline, record.baseline
    lines = []
    for e in record.queues:
        v = e.vs_baseline.get("server_us_per_job")
        if e.queue != head.queue or v is None or v.ratio is None:
            continue
        lines.append(f"{e.server} {e.mode}: {_headline_line(head.queue, base, v)}, n = {v.n} trial pairs: {v.text}")
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
    # A queue's failed trials in one kind of round, as one line with its first error.
    failed: dict[tuple[str, str, str, str], list[FailureEntry]] = {}
    for f in record.failures:
        failed.setdefault((f.server, f.queue, f.mode, f.rounds), []).append(f)
    for (server, queue, mode, kind), group in failed.items():
        error = group[0].error.splitlines()[0] if group[0].error else "?"
        trials = ", ".join(str(f.trial) for f in group)
        lines.append(f"FAILED {server} {queue} ({mode}) {kind} round{'s' if len(group) > 1 else ''}, "
                     f"trial{'s' if len(group) > 1 else ''} {trials}: {error}")
    unclean = [f"{e.server} {e.queue} ({e.mode}) {e.failed} of {e.attempted}" for e in record.queues if e.failed]
    if unclean:
        lines.append("rounds failed (errored or not drained clean): " + ", ".join(unclean))
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
    blocks += ([ratios] if ratios is not None else []) + _family(record) + _settings(entries)
    bounds = sorted({e.drain.bottleneck for e in entries})
    return blocks + [Notes(context_lines(run, trials=f"{trials} per queue and mode",
                                         bottleneck=f"while draining, {' or '.join(bounds)}; compare server µs per "
                                                    "job, which the client's speed does not change"))]
