"""One module per kind of record, named as the kind: `compare.py` renders a
record of kind "compare". The kinds and their order are
`echomq_bench.records.record.KINDS`, written once; this package finds each
kind's module by its name, as the client finds each verb's script by its
file, so no second list of kinds exists to drift from the first.

Every module has `section(run, out) -> list[Block]`: its part of the report
(a heading, then what a reader may open). The four that answer the main
job's questions also have `answer(run, out) -> Answer | None`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Callable

from echomq_bench.records.files import Run
from echomq_bench.records.record import CONTAINER, KINDS, ResultsError
from echomq_bench.report.doc import Answer, Block

__all__ = ["RENDERED", "module_of", "kind_of", "section", "answer"]

# Every kind but the main job's folder, which holds records of the others.
RENDERED: tuple[str, ...] = tuple(k for k in KINDS if k != CONTAINER)


def module_of(kind: str) -> ModuleType:
    """The module that renders `kind`; ResultsError naming the known kinds for any other."""
    if kind not in RENDERED:
        raise ResultsError(f"unknown kind {kind!r}; this report knows the kinds {', '.join(RENDERED)}")
    return importlib.import_module(f"{__name__}.{kind}")


def kind_of(run: Run) -> str:
    """The kind the folder's summary.json declares; a folder that declares none, or one
    this report does not know, is refused by its path."""
    known = f"this report knows the kinds {', '.join(RENDERED)}"
    if run.kind is None:
        raise ResultsError(f"{run.path}: summary.json declares no kind; {known}")
    if run.kind not in RENDERED:
        raise ResultsError(f"{run.path}: unknown kind {run.kind!r}; {known}")
    return run.kind


def section(run: Run, out: Path) -> list[Block]:
    render: Callable[[Run, Path], list[Block]] = module_of(kind_of(run)).section
    return render(run, out)


def answer(run: Run, out: Path) -> Answer | None:
    """The answer this record gives on the report's first screen, if its kind answers one."""
    render: Callable[[Run, Path], Answer | None] | None = getattr(module_of(kind_of(run)), "answer", None)
    return render(run, out) if render is not None else None
