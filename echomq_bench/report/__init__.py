"""Results folders into report.md, a self-contained report.html and PNG
charts. It reads; it never measures."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from echomq_bench.records.files import ResultsError, Run, load_many
from echomq_bench.report.doc import Doc, Heading, Notes, Para
from echomq_bench.report.sections import RENDERERS, headline_findings, kind_of

__all__ = ["build_report"]

ORDER = ("check", "compare", "consumers", "capacity", "reapcost", "lease", "faults", "peers", "gate")


def build_report(paths: Iterable[Path | str], out: Path | str | None = None) -> tuple[Path, Path, list[str]]:
    """Write report.md and report.html (and the charts) into `out`, by
    default the first folder; returns both paths and the headline findings."""
    paths = [Path(p) for p in paths]
    runs = load_many(paths)
    by_kind: dict[str, Run] = {}
    for r in runs:
        kind = kind_of(r)
        if kind and kind not in by_kind:
            by_kind[kind] = r
    if not by_kind:
        raise ResultsError(f"{', '.join(map(str, paths))}: no results this report knows how to read "
                           "(no check, compare, consumers, reapcost, lease, faults, peers or microbench table)")
    out_dir = Path(out) if out else paths[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    findings = headline_findings(by_kind)
    doc = Doc("echomq-bench report")
    first = next(iter(by_kind.values()))
    doc.add(Heading("Headline findings", anchor="findings"))
    doc.add(*(Para(f) for f in findings) if findings else [Para("No headline figures in these results.")])
    doc.add(Notes([f"Built from: {', '.join(sorted(r.run_id for r in by_kind.values()))}.",
                   f"Machine: {first.meta.get('machine', {}).get('cpu_model', '?')} x "
                   f"{first.meta.get('machine', {}).get('cpu_count', '?')} cores; server and load generator share it."]))
    for kind in ORDER:
        if kind in by_kind and kind in RENDERERS:
            doc.add(*RENDERERS[kind](by_kind[kind], out_dir))
    md, html = doc.write(out_dir)
    return md, html, findings
