"""The report's section for a `locust` run: one Locust run of a scenario,
read from its record alone. The verdict first (the audit of every job and
the call-log check), then the run and its flow, Locust's own stats per
request name, requests/s over the run and the latency percentiles per
request name, and with --steps, cycles/s against consumers; on a cluster, a
row per master.

Locust rounds each response time before it keeps it (to whole milliseconds
below 100 ms), so its percentiles of sub-millisecond calls read 0 or 1 ms;
the mean is from the unrounded times. The note under the table says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.records.kinds.locust import LocustRecord
from echomq_bench.report import charts
from echomq_bench.report.audit import audit_table
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table
from echomq_bench.report.calllog_tables import LEGEND as CALL_LOG_LEGEND, cells, kinds as call_log_kinds, verdict

__all__ = ["section", "verdict_line"]

QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999))
REQUEST_COLUMNS = (("requests", "requests"), ("failures", "failures"), ("requests_per_s", "req/s"),
                   ("mean", "mean ms"), *((q, f"{q} ms") for q, _ in QUANTILES), ("max", "max ms"))
ROUNDING = ("Latency: Locust's own stats. Locust rounds each response time before it keeps it (whole ms below "
            "100 ms, two significant digits above), so percentiles of sub-millisecond calls read 0 or 1 ms; the "
            "mean is from the unrounded times.")


def verdict_line(record: LocustRecord) -> str:
    """`audit PASS, call-log check PASS`, and the workers whose books never came."""
    checked = {None: "not recorded", True: "PASS", False: "FAIL"}[record.call_log_passed]
    missing = (f"; the books of {record.missing_processes} worker(s) never came, so the audit cannot account for "
               "them" if record.missing_processes else "")
    return f"audit {'PASS' if record.audit.passed else 'FAIL'}, call-log check {checked}{missing}"


def _shape(run: Run) -> str:
    settings = run.meta.get("settings") or {}
    if settings.get("steps"):
        return f"consumers stepped {', '.join(map(str, settings['steps']))}"
    users, rate, seconds = (settings.get(k) for k in ("users", "spawn_rate", "run_time_s"))
    return f"{users if users is not None else '?'} users at {rate if rate is not None else '?'}/s" + (
        f" for {seconds} s" if seconds else "")


def _run_table(run: Run, record: LocustRecord) -> pd.DataFrame:
    r, flow, settled = record.run, record.flow, record.settled_unresolved
    rows: list[tuple[str, Any]] = [
        ("scenario", record.scenario), ("run", f"{r.run_id} ({r.role}, {r.load_processes} load process(es))"),
        ("server", r.server), ("queues", ", ".join(r.queues)), ("load", _shape(run)),
        ("seconds, ramp-up and drain included", f"{record.seconds:.1f}"),
        ("jobs completed", record.audit.completed), ("cycles/s", f"{record.cycles_per_s:,.0f}"),
        *((name.replace("_", " "), count) for name, count in flow.items() if count),
        ("interrupted calls settled against the server",
         f"{settled.get('enqueues', 0)} enqueues ({settled.get('enqueues_counted', 0)} applied), "
         f"{settled.get('completes', 0)} completes ({settled.get('completes_accepted', 0)} applied)"),
    ]
    return pd.DataFrame([{"figure": k, "value": str(v)} for k, v in rows])


def _requests(run: Run) -> pd.DataFrame:
    """A row per request type and name (the most requests first), a column per figure."""
    t = run.tables.get("requests")
    if t is None or t.empty:
        return pd.DataFrame()
    wide = t.pivot_table(index=["type", "name"], columns="metric", values="value", aggfunc="first").reset_index()
    wide = wide.sort_values(["type", "requests"], ascending=[True, False])
    present = [(m, label) for m, label in REQUEST_COLUMNS if m in wide.columns]
    return wide[["type", "name", *(m for m, _ in present)]].rename(columns=dict(present))


def _label(row: Any) -> str:
    return str(row["name"]) if row["type"] == "echomq" else f"{row['name']} ({row['type']})"


def _busiest(frame: pd.DataFrame) -> list[str]:
    """The request labels with the most requests, as many as a chart draws."""
    return list(frame.sort_values("requests", ascending=False)["label"].head(charts.MAX_LINES))


def _timeline(run: Run, out: Path, requests: pd.DataFrame) -> list[Block]:
    t = run.tables.get("timeline")
    if t is None or t.empty or requests.empty:
        return []
    t = t[t["metric"] == "requests"].assign(label=lambda f: f.apply(_label, axis=1))
    shown = _busiest(requests.assign(label=requests.apply(_label, axis=1)))
    left = sorted(set(t["label"]) - set(shown))
    png = charts.rate_timeline(t[t["label"].isin(shown)], out / "locust_requests.png", by="label",
                               ylabel="requests/s", title="Requests per second, by request name",
                               xlabel="seconds since the run's first request (Locust's per-second counts)")
    caption = "Requests per second over the run, the busiest request names" + (
        f" (not drawn: {', '.join(left)})" if left else "")
    return [Image(png, caption)]


def _latency(out: Path, requests: pd.DataFrame) -> list[Block]:
    columns = [f"{q} ms" for q, _ in QUANTILES]
    if requests.empty or not set(columns) <= set(requests.columns):
        return []
    frame = requests.assign(label=requests.apply(_label, axis=1))
    curves = {}
    for label in _busiest(frame):
        row = frame[frame["label"] == label].iloc[0]
        curves[label] = pd.DataFrame({"value_ms": [float(row[c]) for c in columns],
                                      "percentile": [q for _, q in QUANTILES]})
    png = charts.latency_quantiles(curves, out / "locust_latency.png", ROUNDING)
    return [Image(png, "Latency percentiles per request name, the busiest names (Locust's stats)")]


def _steps(run: Run, out: Path, record: LocustRecord) -> list[Block]:
    t = run.tables.get("steps")
    if t is None or t.empty:
        return []
    wide = t.pivot_table(index=["consumers", "bound"], columns="metric", values="value",
                         aggfunc="first").reset_index().sort_values("consumers")
    points = wide.assign(build=record.run.build or record.run.server)
    png = charts.throughput_vs_consumers(points, out / "locust_steps.png")
    names = {"cycles_per_s": "cycles/s", "server_main_cpu": "server CPU", "client_cpu": "client CPU",
             "machine_cpu": "machine CPU"}
    table = wide[["consumers", *(m for m in names if m in wide.columns), "bound"]].rename(columns=names)
    return [Table(table, "Cycles/s against consumers, each step's settled part", id="locust-steps"),
            Image(png, "Cycles/s against consumers (--steps)"),
            Notes(["CPU in cores over each step's settled part (after its first 30% or 2 s); server = its main "
                   "thread; client = the load process, or the workers' sum from their heartbeats; machine = every "
                   "process on the machine."])]


def _checks(record: LocustRecord) -> list[Block]:
    build = record.run.build or "audit"
    blocks: list[Block] = [Table(audit_table([build], [record.audit]),
                                 "The audit of every job", id="locust-audit")]
    rows = [{"jobs": "no fault" if kind == "none" else f"under {kind}", **cells(counts)}
            for kind, counts in call_log_kinds(record.call_log)]
    if rows:
        blocks += [Table(pd.DataFrame(rows), f"The call-log check: {verdict(record.call_log)}, jobs per fault kind",
                         id="locust-call-log"), Notes([CALL_LOG_LEGEND])]
    if record.recovery_ms:
        blocks.append(Table(pd.DataFrame([{"recovery": name, **{k: f"{float(v):.1f}" for k, v in s.items()}}
                                          for name, s in record.recovery_ms.items()]),
                            "Recovery after a crash, ms (count: recoveries)"))
    return blocks


def _nodes(record: LocustRecord) -> list[Block]:
    if not record.nodes:
        return []
    rows = [{"node": n.node, "queues": ", ".join(n.queues), "completed": n.completed,
             "cycles/s": f"{n.cycles_per_s:,.0f}", "server main util": n.server_main_util} for n in record.nodes]
    return [Table(pd.DataFrame(rows), "Per master: its queues' completes and its main thread's utilisation")]


def section(run: Run, out: Path) -> list[Block]:
    record = LocustRecord.from_record(run.summary)
    requests = _requests(run)
    blocks: list[Block] = [
        Heading(f"Locust: {record.scenario}", anchor="locust"),
        Para(f"Verdict: {verdict_line(record)}."),
        Para("Locust's users are consumers (one claim or complete in flight each); producers and the pump run "
             "beside them. When the run stops, the calls on the wire finish, the books are audited against the "
             "server's sets and every process's call log is checked apart from them."),
        Table(_run_table(run, record), "The run", id="locust-run"),
        *_checks(record),
    ]
    if not requests.empty:
        blocks += [Table(requests, "Locust's stats per request name", id="locust-requests"), Notes([ROUNDING])]
    blocks += [*_timeline(run, out, requests), *_latency(out, requests), *_steps(run, out, record),
               *_nodes(record)]
    bound = ", ".join(f"{int(c)}: {b}" for c, b in _bounds(run))
    return blocks + [Notes(context_lines(run, trials=f"one run, {_shape(run)}",
                                         bottleneck=f"the side that bound each step ({bound})" if bound else ""))]


def _bounds(run: Run) -> list[tuple[Any, str]]:
    t = run.tables.get("steps")
    if t is None or t.empty:
        return []
    return [(c, str(b)) for c, b in t[["consumers", "bound"]].drop_duplicates().itertuples(index=False)]
