"""Results folders into report.md, a self-contained report.html, PNG charts
and the terminal text every command prints. It reads; it never measures.

One set of blocks makes all three: the answers first (one per question a
record of the run answers, two by two on the first screen), then every
record's section folded, in the order of `records.record.KINDS`, each from
its kind's module (`echomq_bench.report.kinds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from echomq_bench.records.files import ResultsError, Run, load_many
from echomq_bench.records.kinds.compare import CompareRecord
from echomq_bench.records.record import CONTAINER
from echomq_bench.report import kinds, text
from echomq_bench.report.agreement import agreement_section
from echomq_bench.report.context import commit, machine
from echomq_bench.report.doc import Answer, Block, Doc, Fold, Heading, Warning
from echomq_bench.report.matrix import matrix_section

__all__ = ["Report", "build_report", "record_text", "QUICK_WARNING"]

QUICK_WARNING = ("Quick run: too few trials and too short a lease sweep to trust any verdict here. It shows the "
                 "charts; run without --quick for the answers.")


@dataclass(frozen=True)
class Report:
    md: Path
    html: Path
    answers: tuple[Answer, ...]
    text: str          # what the terminal prints: the answers, or every section when none answers


def _parts(runs: list[Run]) -> list[Run]:
    """The runs to render: a folder holding other runs (the main job's,
    whose own summary is written after its report) is read through them."""
    holders = {r.path.parent for r in runs}
    return [r for r in runs if r.path not in holders and r.kind != CONTAINER]


def _default_mode_first(run: Run) -> bool:
    """Of several compare records (one per interleave mode), the compare
    section shows the one made in compare's default mode."""
    return run.kind == "compare" and CompareRecord.from_record(run.summary).interleave != "together"


def _by_kind(parts: list[Run]) -> dict[str, Run]:
    by_kind: dict[str, Run] = {}
    for r in sorted(parts, key=_default_mode_first):
        by_kind.setdefault(kinds.kind_of(r), r)
    return {k: by_kind[k] for k in kinds.RENDERED if k in by_kind}


def _folded(blocks: list[Block]) -> Fold:
    """A section as a fold titled by its own heading."""
    head = blocks[0]
    assert isinstance(head, Heading), "every section opens with its heading"
    return Fold(head.text, blocks[1:], head.anchor)


def _quick(runs: list[Run]) -> bool:
    return any((r.meta.get("settings") or {}).get("quick") is True for r in runs)


def _one_server(runs: list[Run], parts: list[Run]) -> list[Answer]:
    """The build question's answer of a main job given one server, which compares nothing: the
    main job's own meta.json names the servers it was asked for, its parts' the version."""
    from echomq_bench.report.kinds.compare import one_server_answer

    shown = {r.path for r in parts}
    asked = [r for r in runs if r.path not in shown and (r.meta.get("settings") or {}).get("part") == CONTAINER]
    if len(asked) != 1 or len((asked[0].meta.get("settings") or {}).get("servers_requested") or ()) != 1:
        return []
    versions = [s["version"] for r in parts for s in r.meta.get("servers") or () if s.get("version")]
    return [one_server_answer(versions[0] if versions else
                              str(asked[0].meta["settings"]["servers_requested"][0]))]


def build_report(paths: Iterable[Path | str], out: Path | str | None = None) -> Report:
    """Write report.md and report.html (and the charts) into `out`, by
    default the first folder."""
    folders = [Path(p) for p in paths]
    runs = load_many(folders)
    parts = _parts(runs)
    by_kind = _by_kind(parts)
    if not by_kind:
        raise ResultsError(f"{', '.join(map(str, folders))}: no results this report knows how to read "
                           f"(the kinds it knows: {', '.join(kinds.RENDERED)})")
    out_dir = Path(out) if out else folders[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    first = next(iter(by_kind.values()))
    doc = Doc("echomq-bench report", context=f"{str(first.meta.get('created_utc', '?'))[:10]}, commit "
                                             f"{commit(first)}, {machine(first)}. Built from "
                                             f"{', '.join(sorted({r.run_id for r in parts}))}.")
    head: list[Block] = [Warning(QUICK_WARNING)] if _quick(runs) else []
    answers = tuple(a for run in by_kind.values() if (a := kinds.answer(run, out_dir)) is not None)
    if "compare" not in by_kind:
        answers = (*_one_server(runs, parts), *answers)
    doc.add(*head, *answers)
    matrix = matrix_section(by_kind, out_dir)
    if matrix:
        doc.add(_folded(matrix))
    for kind, run in by_kind.items():
        doc.add(_folded(kinds.section(run, out_dir)))
        if kind == "compare":
            agreement = agreement_section(parts, out_dir)
            if agreement:
                doc.add(_folded(agreement))
    md, html = doc.write(out_dir)
    body = text.render([*head, *answers] if answers else doc.blocks, base=out_dir)
    return Report(md, html, answers, body)


def record_text(path: Path | str) -> str:
    """One run folder as the terminal shows it: its answer, if it gives one, then its section; the
    charts go into the folder beside the record."""
    folder = Path(path)
    parts = _parts(load_many([folder]))
    blocks: list[Block] = []
    for run in _by_kind(parts).values():
        answer = kinds.answer(run, run.path)
        blocks += ([answer] if answer is not None else []) + kinds.section(run, run.path)
    return text.render(blocks, base=folder)
