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


def _mean(e: dict[str, Any], key: str) -> Any:
    """The geometric mean over the trials (the median where no interval was taken)."""
    c = (e.get("ci") or {}).get(key) or {}
    return c["mean"] if c.get("mean") is not None else e.get(key)


def _interval(e: dict[str, Any], key: str) -> str:
    ci = ((e.get("ci") or {}).get(key) or {}).get("ci")
    return "-" if not ci else f"{_fig(ci[0])}-{_fig(ci[1])}"


def _where(e: dict[str, Any]) -> dict[str, Any]:
    return {"server": e.get("server"), "queue": e.get("queue"), "mode": e.get("mode")}


def _server_cost(entries: list[dict[str, Any]]) -> Table:
    rows = [{**_where(e), "µs/job": _fig(_mean(e, "server_us_per_job")),
             "95% CI": _interval(e, "server_us_per_job"), "script µs": _fig(_mean(e, "script_us_per_job")),
             "cmds/job": _fig(_mean(e, "commands_per_job")), "trips/job": _fig(_mean(e, "round_trips_per_job")),
             "B/pending": _fig(_mean(e, "bytes_per_pending_job"))} for e in entries]
    return Table(pd.DataFrame(rows), "Server cost per job: main-thread µs with its 95% interval, µs inside scripts, "
                                     "commands (those inside scripts and MULTI included), round trips, and bytes "
                                     "held per pending job")


def _client_side(entries: list[dict[str, Any]]) -> Table:
    rows = [{**_where(e), "jobs/s": _fig(_mean(e, "jobs_per_s")), "95% CI": _interval(e, "jobs_per_s"),
             "client µs/job": _fig(_mean(e, "client_us_per_job")), "client 95% CI": _interval(e, "client_us_per_job"),
             "clean": "yes" if e.get("drained_clean") else "NO"} for e in entries]
    return Table(pd.DataFrame(rows), "A job's whole life, enqueued and drained: jobs/s, and the CPU µs per job of "
                                     "the producer and consumer processes; clean: every job ran once and nothing "
                                     "was left on the server")


def _ratio(v: dict[str, Any] | None) -> tuple[str, str]:
    if not v:
        return "-", "-"
    ci = v.get("ci")
    return f"{float(v['ratio']):.2f}" + (f" [{float(ci[0]):.2f}-{float(ci[1]):.2f}]" if ci else ""), str(v["text"])


def _ratios(entries: list[dict[str, Any]], base: str) -> Table | None:
    rows = []
    for e in entries:
        if e.get("queue") == base:
            continue
        vs = e.get("vs_baseline") or {}
        us, us_verdict = _ratio(vs.get("server_us_per_job"))
        rate, rate_verdict = _ratio(vs.get("jobs_per_s"))
        rows.append({**_where(e), "µs/job ratio": us, "µs verdict": us_verdict if vs else f"no {base} run",
                     "jobs/s ratio": rate, "jobs/s verdict": rate_verdict})
    if not rows:
        return None
    return Table(pd.DataFrame(rows), f"Ratio to {base} in the same mode on the same server: trial-paired geometric "
                                     "mean [95% CI] and verdict (below 1 is less server time per job; above 1 more "
                                     "jobs/s)")


def _headline(summary: dict[str, Any], entries: list[dict[str, Any]], base: str) -> list[Block]:
    """echomq's server µs per job against the baseline's, one line per server and mode, with n and interval."""
    head = summary.get("headline") or {}
    queue = str(head.get("queue") or "echomq")
    lines = []
    for e in entries:
        v = (e.get("vs_baseline") or {}).get("server_us_per_job")
        if e.get("queue") != queue or not v:
            continue
        ci = v.get("ci")
        width = f", ±{(float(ci[1]) / float(ci[0])) ** 0.5 - 1:.1%}" if ci else ""
        lines.append(f"{e.get('server')} {e.get('mode')}: {queue} costs {float(v['ratio']):.3f}x {base}'s server "
                     f"µs per job" + (f" [{float(ci[0]):.3f}, {float(ci[1]):.3f}{width}]" if ci else "")
                     + f", n = {v.get('n')} trial pairs: {v.get('text')}")
    if not lines:
        return []
    rule = (f"; the pair ran on alone until every interval was within ±{float(head['precision']):.0%}, "
            f"{head.get('max_trials')} trials or the run's budget" if head.get("precision") else "")
    return [Para(f"Headline, {queue} against {base} (95% t-interval on the trial-paired log ratios{rule}):"),
            Notes(lines)]


def _settings(entries: list[dict[str, Any]]) -> list[Block]:
    """What each queue ran with: the worker's settings per mode, the enqueue path per queue."""
    seen: dict[tuple[str, str], str] = {}
    enqueue: dict[str, str] = {}
    for e in entries:
        seen.setdefault((str(e.get("queue")), str(e.get("mode"))), str(e.get("drain_mode", "?")))
        enqueue.setdefault(str(e.get("queue")), f"{e.get('queue')} ({e.get('library', '?')}): enqueue "
                                                f"{e.get('enqueue_mode', '?')}")
    frame = pd.DataFrame([{"queue": q, "mode": m, "worker settings": text} for (q, m), text in seen.items()])
    return [Table(frame, "Settings: how each queue drains, in each mode"), Notes(list(enqueue.values()))]


def _trouble(summary: dict[str, Any]) -> list[Block]:
    lines = [f"skipped {name}: {why}" for name, why in (summary.get("skipped") or {}).items()]
    lines += [f"FAILED {f.get('server')} {f.get('queue')} ({f.get('mode', 'default')}) trial {f.get('trial')}: "
              f"{str(f.get('error', '')).splitlines()[0] if f.get('error') else '?'}"
              for f in summary.get("failures") or ()]
    return [Warning("; ".join(lines))] if lines else []


def _older(run: Run) -> list[Block]:
    """A record without the per-queue summary: the tidy table's medians."""
    t = run.table("peers")
    keep = t[t["metric"].isin(["server_us_per_job", "commands_per_job", "drain_jobs_per_s", "enqueue_jobs_per_s"])]
    idx = [c for c in ("server", "build", "queue", "mode") if c in keep.columns]
    piv = keep.pivot_table(index=idx, columns="metric", values="value", aggfunc="median").reset_index()
    return [Table(piv, "Peers: the same no-op jobs")]


def section(run: Run, out: Path) -> list[Block]:
    s = run.summary
    entries = [e for e in s.get("queues") or () if isinstance(e, dict)]
    blocks: list[Block] = [Heading("Beside BullMQ and the Python queues", anchor="peers")]
    if not entries:
        return blocks + _older(run) + [Notes(context_lines(run, bottleneck=BOTTLENECK))]
    base = str(s.get("baseline", "bullmq-node"))
    blocks += [*_trouble(s), *_headline(s, entries, base),
               Para(f"{_count(s.get('jobs'))} jobs of {s.get('payload_bytes', 64)} bytes per queue and trial, "
                    f"{s.get('consumers', '?')} consumer processes, {s.get('trials', '?')} trial(s), interleaved "
                    "round by round, each queue on a fresh server. Figures per job, geometric means over the "
                    "trials with 95% t-intervals; server µs are main-thread CPU."),
               _server_cost(entries), _client_side(entries)]
    ratios = _ratios(entries, base)
    blocks += ([ratios] if ratios is not None else []) + _settings(entries)
    bounds = sorted({str((e.get("drain") or {}).get("bottleneck", "?")) for e in entries})
    return blocks + [Notes(context_lines(run, trials=f"{s.get('trials', '?')} per queue and mode",
                                         bottleneck=f"while draining, {' or '.join(bounds)}; compare server µs per "
                                                    "job, which the client's speed does not change"))]
