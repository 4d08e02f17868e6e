"""A `verbs` record: each verb's server time on each build, one call per round trip."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from echomq_bench.records.files import Run
from echomq_bench.records.kinds.verbs import VerbsRecord
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Notes, Para, Table

__all__ = ["section"]


def section(run: Run, out: Path) -> list[Block]:
    """Each verb's server µs and its ratio to the reference of its weight, per build."""
    record = VerbsRecord.from_record(run.summary)
    rows = []
    for b in record.builds:
        for case, label in record.labels.items():
            f = b.verbs.get(case)
            if f:
                rows.append({"build": b.build, "verb": label, "server µs": round(f.server_us, 1),
                             "calls": f.calls, "ratio to reference": f"{f.server_ratio:.3f} "
                             f"± {(f.server_ratio_se or 0) * 100:.1f}%", "reference": f.reference})
    busy = "; ".join(f"{b.build} server {b.server_utilization:.0%}, client {b.client_utilization:.0%}"
                     for b in record.builds)
    return [Heading("Server time per verb", anchor="verbs"),
            Para("Each verb from its prepared state, one call per round trip; server µs on the server's own clock "
                 "(commandstats), the faster half's mean. The ratio is to the reference script of the verb's "
                 "weight measured in the same batches (± its bootstrap standard error), which moves less than the "
                 "µs when the machine is busier. This is the elapsed time inside the script alone, one call at a "
                 "time on a build alone; the build matrix's server µs/cycle is the main thread's whole CPU per "
                 "cycle, I/O, parsing and the allocator included, every build sharing one core. The two can rank "
                 "builds in opposite orders (the matrix says so when they do); for which build to run, read the "
                 "matrix's: it is what the server spends."),
            Table(pd.DataFrame(rows), "Server µs per verb", id="verbs-table"),
            Notes(context_lines(run, bottleneck=f"neither: one call in flight at a time (busy: {busy})"))]
