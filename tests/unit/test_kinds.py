"""The kinds of record are written once (records.record.KINDS): the report
finds a renderer per kind by its name, the results history each kind's
headlines in its record module by its name, and neither holds a kind the
list lacks."""

from __future__ import annotations

from echomq_bench.records.headlines import extractor_of
from echomq_bench.records.record import CONTAINER, KINDS
from echomq_bench.report import kinds
from tests.helpers import ROOT


def test_every_kind_but_the_container_has_its_renderer_and_no_renderer_lacks_a_kind() -> None:
    modules = {p.stem for p in (ROOT / "echomq_bench" / "report" / "kinds").glob("*.py") if p.stem != "__init__"}
    assert modules == set(KINDS) - {CONTAINER} == set(kinds.RENDERED)
    assert kinds.RENDERED == tuple(k for k in KINDS if k != CONTAINER)   # the report's order is the list's
    for kind in kinds.RENDERED:
        assert callable(kinds.module_of(kind).section)


def test_the_four_answers_come_in_the_order_the_questions_are_asked() -> None:
    answering = [k for k in kinds.RENDERED if hasattr(kinds.module_of(k), "answer")]
    assert answering == ["compare", "lease", "reapcost", "consumers"]


def test_every_kind_but_the_container_has_its_record_module_with_its_headlines() -> None:
    modules = {p.stem for p in (ROOT / "echomq_bench" / "records" / "kinds").glob("*.py") if p.stem != "__init__"}
    assert modules == set(KINDS) - {CONTAINER}
    for kind in modules:
        assert callable(extractor_of(kind))


def test_a_kind_not_in_the_list_and_the_container_have_no_headlines() -> None:
    assert extractor_of("sideways") is None
    assert extractor_of(CONTAINER) is None
