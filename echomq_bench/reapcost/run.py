"""One reapcost run: the curves measured on each server, in each form, and
written as a record of kind "reapcost". `echomq-bench reapcost` and the main
job's reap part both run it here, so their folders are alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from echomq_bench.progress import Progress
from echomq_bench.reapcost.curve import FULL, QUICK, CurveSettings, run_record
from echomq_bench.reapcost.measure import measure_curves

__all__ = ["run_reap_curve"]


def run_reap_curve(servers: Sequence[Any], *, quick: bool = False, out_dir: Path | str | None = None,
                   settings: CurveSettings | None = None, verbose: bool = True, note: str | None = None) -> Path:
    """Measure the curves on each server, in each form, and write the record
    (results/<run-id>/: meta.json, reapcost.csv, drain.csv, summary.json).
    `note`, kept in meta.json, is why the sizes are what they are, for the
    report to say beside them. Returns the run's folder; the charts are the
    report's, drawn from the record."""
    from echomq_bench.records import meta, files as results

    settings = settings or (QUICK if quick else FULL)
    per_server = []
    for server in servers:
        progress = Progress(label=f"reapcost {server.name}") if verbose else None
        with server.client() as client:
            per_server.append(measure_curves(client, server=server.name, version=server.version(),
                                             settings=settings, progress=progress))
        if progress:
            progress.done()
    curves = [c for forms in per_server for c in forms.values()]
    run_dir = results.new_run_dir("reapcost", out_dir)
    info = meta.collect(servers, reapcost={
        "sizes": list(settings.sizes), "caps": list(settings.caps), "repeats": settings.repeats,
        "orphans": settings.orphans, "cadences_ms": list(settings.cadences_ms), "drain_size": settings.drain_size,
        "verbs": list(settings.verbs), "forms": list(settings.forms), "quick": quick,
        **({"note": note} if note else {})})
    results.write_record(run_dir, results.Record(
        kind="reapcost", summary=run_record(curves).to_record(), meta=info,
        tables={"reapcost": [r for c in curves for r in (*c.tidy_rows(), *c.ratio_rows())],
                "drain": [r for c in curves for r in c.drain_rows()]}))
    return run_dir
