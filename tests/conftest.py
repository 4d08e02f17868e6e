"""Every test session keeps its results history in a temporary folder: a
test's run (written into pytest's tmp_path with --out) must never add rows
to the checkout's results/history.sqlite. Child processes inherit it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echomq_bench.records.history import HISTORY_ENV


@pytest.fixture(autouse=True, scope="session")
def history_outside_the_checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(HISTORY_ENV, str(tmp_path_factory.mktemp("history") / "history.sqlite"))
        yield
