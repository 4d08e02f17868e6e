"""Every test session keeps its results history in a temporary folder: a
test's run (written into pytest's tmp_path with --out) must never add rows
to the checkout's results/history.sqlite. Child processes inherit it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echomq_bench.records.history import HISTORY_ENV


MODEL_EXAMPLES = 100   # the CI budget of the model-based test (tests/integration/test_model.py)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--model-examples", type=int, default=MODEL_EXAMPLES,
                     help=f"examples the model-based test runs (default {MODEL_EXAMPLES}, each up to 40 steps)")


@pytest.fixture(autouse=True)
def history_outside_the_checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # One history per test: a compare reads its earlier runs' spread from the history, so a test
    # must not find the runs another test made of the same builds.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(HISTORY_ENV, str(tmp_path_factory.mktemp("history") / "history.sqlite"))
        yield
