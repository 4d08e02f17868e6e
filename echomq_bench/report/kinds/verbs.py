"""A `verbs` record: each verb's server time on each build, one call per round trip."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table

__all__ = ["section"]


def section(run: Run, out: Path) -> list[Block]:
    """Each verb's server µs and its ratio to the reference of its weight, per build."""
    labels: dict[str, str] = run.summary.get("labels") or {}
    rows = []
    for b in run.summary.get("builds") or ():
        for case, label in labels.items():
            f = (b.get("verbs") or {}).get(case)
            if f:
                rows.append({"build": b.get("build"), "verb": label, "server µs": round(f["server_us"], 1),
                             "calls": f["calls"], "ratio to reference": f"{f['server_ratio']:.3f} "
                             f"± {f['server_ratio_se'] * 100:.1f}%", "reference": f["reference"]})
    busy = "; ".join(f"{b.get('build')} server {b.get('server_utilization', 0):.0%}, client "
                     f"{b.get('client_utilization', 0):.0%}" for b in run.summary.get("builds") or ())
    return [Heading("Server time per verb", anchor="verbs"),
            Para("Each verb from its prepared state, one call per round trip; server µs on the server's own clock "
                 "(commandstats), the faster half's mean. The ratio is to the reference script of the verb's "
                 "weight measured in the same batches (± its bootstrap standard error), which moves less than the "
                 "µs when the machine is busier."),
            Table(pd.DataFrame(rows), "Server µs per verb", id="verbs-table"),
            Notes(context_lines(run, bottleneck=f"neither: one call in flight at a time (busy: {busy})"))]
