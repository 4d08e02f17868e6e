"""Results folders into report.md, a self-contained report.html and PNG
charts. It reads; it never measures."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from echomq_bench.records.files import ResultsError, Run, load_many
from echomq_bench.report.agreement import agreement_groups, agreement_section
from echomq_bench.report.doc import Doc, Heading, Notes, Para
from echomq_bench.report.matrix import matrix_frame, matrix_section
from echomq_bench.report.sections import RENDERERS, headline_findings

__all__ = ["build_report", "matrix_text", "ORDER", "kind_of"]

ORDER = ("check", "verbs", "compare", "consumers", "capacity", "reapcost", "lease", "faults", "peers", "gate",
         "failover")
# The main job's folder holds one run per part; the report reads the parts.
CONTAINER = "run"


def kind_of(run: Run) -> str:
    """The kind the folder's summary.json declares; a folder that declares
    none, or one this report does not know, is refused by name."""
    kind = run.kind
    if kind is None:
        raise ResultsError(f"{run.path}: summary.json declares no kind; this report knows the kinds "
                           f"{', '.join(ORDER)}")
    if kind not in RENDERERS and kind != CONTAINER:
        raise ResultsError(f"{run.path}: unknown kind {kind!r}; this report knows the kinds {', '.join(ORDER)}")
    return kind


def _parts(runs: list[Run]) -> list[Run]:
    """The runs to render: a folder holding other runs (the main job's,
    whose own summary is written after its report) is read through them."""
    holders = {r.path.parent for r in runs}
    return [r for r in runs if r.path not in holders and r.kind != CONTAINER]


def _default_mode_first(run: Run) -> bool:
    """Of several compare records (one per interleave mode), the compare
    section shows the one made in compare's default mode."""
    return run.kind == "compare" and run.summary.get("interleave", "together") != "together"


def build_report(paths: Iterable[Path | str], out: Path | str | None = None) -> tuple[Path, Path, list[str]]:
    """Write report.md and report.html (and the charts) into `out`, by
    default the first folder; returns both paths and the headline findings."""
    folders = [Path(p) for p in paths]
    parts = _parts(load_many(folders))
    by_kind: dict[str, Run] = {}
    for r in sorted(parts, key=_default_mode_first):
        by_kind.setdefault(kind_of(r), r)
    agreeing = [r for group in agreement_groups(parts) for r in group]
    if not by_kind:
        raise ResultsError(f"{', '.join(map(str, folders))}: no results this report knows how to read "
                           f"(the kinds it knows: {', '.join(ORDER)})")
    out_dir = Path(out) if out else folders[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    findings = headline_findings(by_kind)
    doc = Doc("echomq-bench report")
    first = next(iter(by_kind.values()))
    doc.add(Heading("Headline findings", anchor="findings"))
    doc.add(*(Para(f) for f in findings) if findings else [Para("No headline figures in these results.")])
    machine = first.meta.get("machine", {})
    built_from = {r.run_id for r in [*by_kind.values(), *agreeing]}
    doc.add(Notes([f"Built from: {', '.join(sorted(built_from))}.",
                   f"Machine: {machine.get('cpu_model', '?')} x {machine.get('cpu_count', '?')} cores; "
                   "server and load generator share it."]))
    doc.add(*matrix_section(by_kind, out_dir))
    for kind in ORDER:
        if kind in by_kind:
            doc.add(*RENDERERS[kind](by_kind[kind], out_dir))
        if kind == "compare":
            doc.add(*agreement_section(parts, out_dir))
    md, html = doc.write(out_dir)
    return md, html, findings


def matrix_text(paths: Iterable[Path | str]) -> str:
    """The build matrix as plain text for a terminal; empty with fewer than two builds."""
    by_kind: dict[str, Run] = {}
    for r in sorted(_parts(load_many([Path(p) for p in paths])), key=_default_mode_first):
        by_kind.setdefault(kind_of(r), r)
    frame, _ = matrix_frame(by_kind)
    return frame.to_string(index=False) if len(frame) >= 2 else ""
