"""The notebooks run top to bottom on the committed sample, each in a Jupyter
kernel of its own: they read results and never produce them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from echomq_bench.records.history import HISTORY_ENV, reindex
from tests.helpers import ROOT

SAMPLE = ROOT / "results" / "sample" / "run"


def _run(name: str) -> Any:
    """The notebook executed, its outputs in place; it must be committed without them."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit notebooks without outputs"
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    return nb


def _printed(nb: Any) -> str:
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


@pytest.mark.parametrize("name", ["redis_vs_valkey.ipynb", "lease_sizing.ipynb", "reap_cost.ipynb"])
def test_notebooks_run_top_to_bottom_on_the_sample(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHOMQ_RESULTS", str(SAMPLE))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert str(SAMPLE) in _printed(_run(name))  # it read the sample, not some other folder


def test_the_history_notebook_runs_top_to_bottom_on_the_sample(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "sample-history.sqlite"
    assert reindex([ROOT / "results" / "sample"], db).rows > 0
    monkeypatch.setenv(HISTORY_ENV, str(db))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert f"reading {db.resolve()}" in _printed(_run("results_history.ipynb"))  # it read this history
