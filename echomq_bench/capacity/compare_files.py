"""The files a comparison writes: meta.json, compare.csv (trial x build x
metric), summary.json and each build's merged .hgrm, with an SLO search's
block and probes when one ran. `echomq-bench compare` and the main job's
build comparison write the same folder through `write_compare`, so the
report reads them alike."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

from echomq_bench.capacity.compare import INTERLEAVE_TEXT, CompareResult
from echomq_bench.capacity.slo_result import SloResult

__all__ = ["write_compare"]


def write_compare(out: Path, result: CompareResult, argv: list[str] | None = None,
                  slo: SloResult | None = None) -> Path:
    """The run's files in `out`: meta.json, compare.csv (trial x build x metric), summary.json, merged .hgrm;
    with `slo`, its block in summary.json and a row per probe in slo.csv."""
    from echomq_bench.records import meta
    from echomq_bench.records.record import Record
    from echomq_bench.records.files import write_record

    out.mkdir(parents=True, exist_ok=True)
    info = meta.collect(servers=(), argv=argv, workload=asdict(result.settings), trials=len(result.of(
        result.builds[0].name)), interleave=result.interleave,
        order=INTERLEAVE_TEXT[result.interleave],
        scripts={b.name: str(b.lua_dir) if b.lua_dir else None for b in result.builds})
    info["servers"] = [{**result.of(b.name)[0].server, "name": b.name, "scripts": result.of(b.name)[0].scripts}
                       for b in result.builds]
    for b in result.builds:
        for verb in ("claim", "complete", "cycle"):
            hist = result.merged_latency(b.name, verb)
            if hist.count:
                hist.write_hgrm(out / f"{b.name}-{verb}.hgrm")
    record = result.record()
    tables = {"compare": result.rows(),
              "timeline": [row for t in result.trials for row in t.result.timeline_rows(trial=t.trial, order=t.order)]}
    if slo is not None:
        record = replace(record, slo=slo.compared({b.name: result.baseline_of(b.name) for b in result.builds},
                                                  result.margin))
        tables["slo"] = slo.rows()
    return write_record(out, Record(kind="compare", summary=record.to_record(), meta=info, tables=tables))
