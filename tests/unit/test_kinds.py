"""The kinds of record are written once (records.record.KINDS): the report
finds a module per kind by its name, the results history an extractor per
kind by its declaration, and neither holds a kind the list lacks."""

from __future__ import annotations

import pytest

from echomq_bench.records.headlines import HEADLINE_KINDS, extracts
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


def test_every_headline_extractor_is_of_a_kind_in_the_list() -> None:
    assert set(HEADLINE_KINDS) == set(KINDS) - {CONTAINER}
    with pytest.raises(ValueError, match="no record kind 'sideways'"):
        extracts("sideways")
