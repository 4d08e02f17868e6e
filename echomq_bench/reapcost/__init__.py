"""The reap/promote cost curve: what one call costs the server against the size of
the set it scans and the cap on what it moves (the `reapcost` command's machinery).

`curve` holds the settings and the immutable points and drains, `measure`
takes them on a server, `report` formats and draws them.
"""

from __future__ import annotations

from echomq_bench.reapcost.curve import FULL, QUICK, VERBS, Curve, CurveSettings, Drain, Point
from echomq_bench.reapcost.measure import measure_curve
from echomq_bench.reapcost.report import chart, format_curve

__all__ = ["FULL", "QUICK", "VERBS", "Curve", "CurveSettings", "Drain", "Point", "chart", "format_curve",
           "measure_curve"]
