"""Redis against Valkey in three interleave modes, written into one folder
and read back by the report: the agreement table carries each record's own
figures, and the line the overlap rule gives for them."""

from __future__ import annotations

import math
from pathlib import Path

from echomq_bench.cli import main
from echomq_bench.measurement.agreement import AGREE, agreement, rows
from echomq_bench.records.files import load
from echomq_bench.report.agreement import estimate_in

MODES = ("together", "slot", "trial")


def test_report_renders_the_agreement_of_three_short_compares(tmp_path: Path) -> None:
    folder = tmp_path / "agree"
    for mode in MODES:
        assert main(["compare", "--server", "redis", "--server", "valkey", "--interleave", mode, "--trials", "2",
                     "--duration", "0.4s", "--warmup", "100ms", "--slot", "100ms", "--no-ceiling",
                     "--out", str(folder / mode)]) == 0
    assert main(["report", str(folder)]) == 0
    text, page = (folder / "report.md").read_text(), (folder / "report.html").read_text()
    estimates = []
    for mode in MODES:
        run = load(folder / mode)
        assert run.summary["interleave"] == mode
        estimate = estimate_in(run, "valkey", mode)
        assert estimate is not None
        headline = run.summary["builds"]["valkey"]["verdicts"]["server_us"]
        ratio = headline["ratio"]
        assert (estimate.n, estimate.excluded, estimate.ci) == (headline["n"], headline["excluded"],
                                                                tuple(headline["ci"]) if headline.get("ci") else None)
        # No counted trial (none server-bound in so short a window) leaves no ratio: the row says so.
        assert estimate.ratio == ratio or math.isnan(estimate.ratio) and math.isnan(ratio)
        [row] = rows([estimate])
        assert row["ratio"] == (f"{ratio:.3f}" if math.isfinite(ratio) else "none")
        assert (f"| {mode} | {headline['n']} | {row['ratio']} | {row['95% CI']} | {headline['method']} | "
                f"{headline['excluded']} | {headline['text']} | {mode} |") in text
        estimates.append(estimate)
    found = agreement(estimates)
    # Two trials a mode are too few for the modes to agree; they may be found apart, never agreeing.
    assert found.status != AGREE and set(found.short) == set(MODES)
    assert found.line in text and found.line in page
    assert "Built from slot, together, trial." in text
