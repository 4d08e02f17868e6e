"""--slo on real servers: a tiny search of the rate at a latency target, every
probe on a server started fresh for it; the rate found is one whose probe
held the target and the next probe up did not; the record is written, prints
and renders; and compare pairs each repetition's rates between builds."""

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
TINY = ["--duration", "300ms", "--warmup", "100ms", "--connections", "2", "--pipeline", "32", "--no-ceiling",
        "--slo-trials", "2", "--slo-resolution", "25%"]
TARGET = "claim p99 <= 200ms"


def _check_search(probes: pd.DataFrame, rate: float | None, failed_above: float | None) -> None:
    """The rate found is the highest that held; the lowest rate tried above it failed."""
    tried = probes[probes["phase"] != "closed loop"]
    held = tried[tried["passed"] == True]   # noqa: E712 (a column of True, False)
    assert rate is not None and failed_above is not None, tried
    assert rate == pytest.approx(held["rate_per_s"].max())
    above = tried[tried["rate_per_s"] > rate * (1 + 1e-9)].sort_values("rate_per_s")
    assert len(above) and not above["passed"].any(), tried
    assert above["rate_per_s"].iloc[0] == pytest.approx(failed_above)
    assert failed_above <= rate * 1.25 * (1 + 1e-9)


def test_capacity_slo_finds_a_rate_that_held_under_one_that_did_not(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "slo"
    code = main(["capacity", "--server", "redis", "--slo", TARGET, *TINY, "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "capacity"
    slo = summary["slo"]
    assert slo["target"]["text"] == TARGET and slo["searches"] == 2
    entry = slo["builds"]["redis"]
    assert entry["n"] == 2 and entry["ci95"] is None and entry["text"] == "inconclusive (2 searches)"
    probes = pd.read_csv(out / "slo.csv")
    for i, (rate, above) in enumerate(zip(entry["search_rates"], entry["failed_above"]), start=1):
        _check_search(probes[probes["search"] == i], rate, above)
    # Every run of every search had a server of its own.
    assert probes["server"].nunique() == len(probes)
    assert set(probes["phase"]) >= {"closed loop", "bracket"} and probes["bound"].notna().all()
    # What it prints is the record as the report renders it, and the report renders it too.
    assert printed == record_text(out) + f"\nresults: {out}\n"
    assert max(len(line) for line in printed.splitlines()) <= WIDTH
    assert f"Rate at {TARGET} per build" in printed and "inconclusive (2 searches)" in printed
    assert f"{entry['rate_per_s']:,.0f}" in printed
    report = build_report([out])
    assert f"Rate at {TARGET}" in report.md.read_text()


def test_compare_slo_pairs_each_repetitions_rates_in_a_rotated_order(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    code = main(["compare", "--server", "redis", "--server", "valkey", "--trials", "2", "--interleave", "trial",
                 "--slo", TARGET, *TINY, "--out", str(out)])
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
    assert f"Build against build: rate at {TARGET}" in text
