"""--slo on real servers: a tiny search of the rate at a latency target, every
probe on a server started fresh for it; the rate found is one at which the
probes in a row the share asks for held the target, and at the next rate up
one did not; the record is written, prints and renders, naming its figure;
and compare pairs each repetition's rates between builds."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from echomq_bench.cli import main
from echomq_bench.report import build_report, record_text
from echomq_bench.report.text import WIDTH

# Short windows and a coarse resolution: a handful of probes per search. The limit is loose, so a
# busy machine still passes at half the closed-loop rate; past it, the schedule cannot be kept.
# Compare: two repetitions of one probe per rate (50%); capacity: one search of two in a row (70%).
TINY = ["--duration", "300ms", "--warmup", "100ms", "--connections", "2", "--pipeline", "32", "--no-ceiling",
        "--slo-resolution", "25%"]
TARGET = "claim p99 <= 200ms"


def _check_search(probes: pd.DataFrame, rate: float | None, failed_above: float | None, in_a_row: int = 1) -> None:
    """Each rate tried is a step: it held when `in_a_row` probes at it held, and ended at its first
    miss otherwise. The rate found is the highest that held; the lowest rate tried above it missed."""
    tried = probes[probes["phase"] != "closed loop"]
    assert rate is not None and failed_above is not None, tried
    held, missed = [], []
    for _, step in tried.groupby("step"):
        passed = list(step.sort_values("attempt")["passed"])
        assert list(step.sort_values("attempt")["attempt"]) == list(range(1, len(step) + 1))
        assert step["rate_per_s"].nunique() == 1 and step["server"].nunique() == len(step)
        if passed == [True] * in_a_row:
            held.append(float(step["rate_per_s"].iloc[0]))
        else:   # stopped at its first miss
            assert passed == [True] * (len(passed) - 1) + [False], step
            missed.append(float(step["rate_per_s"].iloc[0]))
    assert rate == pytest.approx(max(held))
    above = sorted(r for r in missed if r > rate * (1 + 1e-9))
    assert above and above[0] == pytest.approx(failed_above), tried
    assert failed_above <= rate * 1.25 * (1 + 1e-9)


def test_capacity_slo_finds_a_rate_that_held_under_one_that_did_not(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "slo"
    code = main(["capacity", "--server", "redis", "--slo", TARGET, *TINY, "--slo-trials", "1", "--slo-held", "70%",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "capacity"
    slo = summary["slo"]
    assert slo["target"]["text"] == TARGET and slo["searches"] == 1
    assert slo["holds_in_a_row"] == 2 and slo["figure"] == "the rate a 0.3 s probe holds 71% of the time"
    entry = slo["builds"]["redis"]
    assert entry["n"] == 1 and entry["interval"] is None and entry["text"] == "inconclusive (1 search)"
    probes = pd.read_csv(out / "slo.csv")
    for i, (rate, above) in enumerate(zip(entry["search_rates"], entry["failed_above"]), start=1):
        _check_search(probes[probes["search"] == i], rate, above, in_a_row=2)
    # Every run of every search had a server of its own.
    assert probes["server"].nunique() == len(probes)
    assert set(probes["phase"]) >= {"closed loop", "bracket"} and probes["bound"].notna().all()
    # What it prints is the record as the report renders it, and the report renders it too.
    assert printed == record_text(out) + f"\nresults: {out}\n"
    assert max(len(line) for line in printed.splitlines()) <= WIDTH
    assert f"Rate at {TARGET} per build: the rate a 0.3 s probe holds 71% of the time" in " ".join(printed.split())
    assert "inconclusive (1 search)" in printed
    assert f"{entry['rate_per_s']:,.0f}" in printed
    report = build_report([out])
    assert f"Rate at {TARGET}" in report.md.read_text()


def test_compare_slo_pairs_each_repetitions_rates_in_a_rotated_order(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    code = main(["compare", "--server", "redis", "--server", "valkey", "--trials", "2", "--interleave", "trial",
                 "--slo", TARGET, *TINY, "--slo-trials", "2", "--slo-held", "50%", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["builds"]["valkey"]["verdict"].startswith("inconclusive")   # the first headline, as before
    slo = summary["slo"]
    redis, valkey = slo["builds"]["redis"], slo["builds"]["valkey"]
    assert redis["verdict"] == "baseline" and valkey["baseline"] == "redis"
    assert valkey["verdict"] == "inconclusive (2 searches)"
    assert valkey["search_ratios"] == pytest.approx([v / r for v, r in zip(valkey["search_rates"],
                                                                           redis["search_rates"])])
    probes = pd.read_csv(out / "slo.csv")
    first = [probes[probes["search"] == i]["build"].iloc[0] for i in (1, 2)]
    assert first == ["redis", "valkey"]   # A B, then B A
    for name, e in (("redis", redis), ("valkey", valkey)):
        for i, (rate, above) in enumerate(zip(e["search_rates"], e["failed_above"]), start=1):
            _check_search(probes[(probes["search"] == i) & (probes["build"] == name)], rate, above)
    text = record_text(out)
    assert "holds claim p99 <= 200ms at" in " ".join(text.split())
    assert "(the rate a 0.3 s probe holds half the time; too few searches" in " ".join(text.split())
    assert f"Build against build: rate at {TARGET}" in text
