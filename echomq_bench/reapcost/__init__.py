"""The reap/promote cost curve: what one call costs the server against the size of
the set it scans and the cap on what it moves (the `reapcost` command's machinery).

`curve` holds the settings and the immutable points and drains, `measure`
takes them on a server, in each form of the live entries (bare, or with
job rows), and `run` on every server, writing the run's folder. The record
they make is rendered, tables and charts, by
`echomq_bench.report.kinds.reapcost`, as every record is.
"""

from __future__ import annotations

from echomq_bench.reapcost.curve import (FORM_LABELS, FORMS, FULL, QUICK, VERBS, Curve, CurveSettings, Drain, Point,
                                        run_record, side_by_side)
from echomq_bench.reapcost.measure import LiveEntries, measure_curves

__all__ = ["FORMS", "FORM_LABELS", "FULL", "QUICK", "VERBS", "Curve", "CurveSettings", "Drain", "LiveEntries", "Point",
           "measure_curves", "run_record", "side_by_side"]
