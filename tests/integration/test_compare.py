"""compare end to end: short real comparisons of two builds, whole trials,
slots and together, each finding a planted slow claim or none."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from echomq_bench.capacity.settings import CapacitySettings
from echomq_bench.cli import main
from echomq_bench.capacity.compare import Build, run_compare
from echomq_bench.records.verdicts import RatioVerdictEntry
from echomq_bench.servers import parse_server_spec
from tests.helpers import LUA

@pytest.fixture(scope="module")
def slowed_lua(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's scripts with claim slowed by a busy loop: an effect of
    known sign (several times the cost of a cycle) that every verdict must find."""
    folder = tmp_path_factory.mktemp("lua-slow")
    shutil.copytree(LUA, folder, dirs_exist_ok=True)
    claim = folder / "claim-3.lua"
    text = claim.read_text()
    marker = "local rcall = redis.call\n"
    assert marker in text
    claim.write_text(text.replace(marker, marker + "local spin = 0\nfor i = 1, 20000 do spin = spin + i end\n", 1))
    return folder


def test_compare_by_whole_trials_runs_each_build_once_a_trial_and_writes_its_summary(tmp_path: Path,
                                                                                      slowed_lua: Path) -> None:
    out = tmp_path / "cmp"
    code = main(["compare", "--server", "redis", "--server", "valkey", "--scripts", f"valkey={slowed_lua}",
                 "--interleave", "trial", "--trials", "2", "--duration", "0.4s", "--warmup", "100ms", "--no-pin",
                 "--no-ceiling",
                 "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["baseline"] == "redis" and summary["trials"] == 2 and summary["interleave"] == "trial"
    assert summary["builds"]["redis"]["verdict"] == "baseline"
    valkey = summary["builds"]["valkey"]
    # Two trials are too few for the t-interval to say anything: no verdict, however large the effect.
    counted = valkey["trials_counted"]
    assert counted + valkey["trials_excluded"] == 2
    assert valkey["verdict"] == f"inconclusive ({counted} trials)"
    assert summary["method"].startswith("t-interval on log ratios") and summary["min_trials"] == 6
    if counted == 2:
        head = RatioVerdictEntry.from_record(valkey["verdicts"]["server_us"])
        assert head.ci is not None and head.ratio is not None and head.ci[0] <= head.ratio <= head.ci[1]
        assert f"n={counted}" in head.label()
    assert summary["builds"]["valkey"]["version"].startswith("valkey")
    assert summary["builds"]["valkey"]["scripts"] == str(slowed_lua)
    import pandas as pd

    rows = pd.read_csv(out / "compare.csv")
    orders = rows[rows["metric"] == "cycles_per_s"].sort_values("order")
    # Each trial runs every build once, in the order drawn for it, recorded with its seed.
    assert list(orders["order"]) == [1, 2, 3, 4] and list(orders["trial"]) == [1, 1, 2, 2]
    assert [sorted(orders[orders["trial"] == t]["build"]) for t in (1, 2)] == [["redis", "valkey"]] * 2
    assert isinstance(summary["order_seed"], int)
    assert set(rows["metric"]) >= {"cycles_per_s", "server_us_per_cycle", "claim_p99_ms"}
    assert (out / "meta.json").is_file() and (out / "redis-claim.hgrm").is_file()


@pytest.mark.serial   # six of eight trials must be server-bound: a second test file on the cores would take them
def test_six_counted_trials_call_the_planted_slow_claim_slower(tmp_path: Path, slowed_lua: Path) -> None:
    out = tmp_path / "cmp6"
    code = main(["compare", "--server", "redis", "--server", "valkey", "--scripts", f"valkey={slowed_lua}",
                 "--interleave", "trial", "--trials", "8", "--duration", "0.4s", "--warmup", "100ms",
                 "--no-ceiling", "--backlog", "200000", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    valkey = summary["builds"]["valkey"]
    # Pinned, each server has its core to itself; a trial that a busy machine kept from saturating the
    # baseline is left out, so a few may go, but six must count for the verdict this test is about.
    assert valkey["trials_counted"] >= 6, (summary["builds"]["redis"]["bound"], valkey["bound"])
    assert valkey["trials_counted"] + valkey["trials_excluded"] == 8
    assert valkey["verdict"] == "slower"
    head = RatioVerdictEntry.from_record(valkey["verdicts"]["server_us"])
    assert head.ci is not None and head.ci[0] > 1.0
    assert valkey["verdicts"]["throughput"]["text"] == "slower"
    assert f"n={valkey['trials_counted']}" in head.label()


def test_compare_in_slots_draws_who_goes_first_from_the_seed(tmp_path: Path, slowed_lua: Path) -> None:
    from echomq_bench.capacity.compare import trial_order

    builds = [Build(parse_server_spec("redis")), Build(parse_server_spec("valkey"), slowed_lua)]
    settings = CapacitySettings(duration_s=0.6, warmup_s=0.1, ceiling=False, ledger=True)
    result = run_compare(builds, settings, 2, interleave="slot", slot_s=0.1, seed=5)
    drawn = [[b.name for b in trial_order(builds, 5, i)] for i in range(2)]
    assert [(t.build, t.trial, t.order) for t in result.trials] == [
        (b.name, i + 1, 2 * i + drawn[i].index(b.name) + 1) for i in range(2) for b in builds]
    assert result.order_seed == 5 and result.record().order_seed == 5
    for t in result.trials:
        r = t.result
        assert r.audit is not None and r.audit["passed"], r.audit
        # Each build had half the window, and counted only what finished in its own turns.
        assert r.window_s == pytest.approx(0.3, abs=1e-6)
        assert 0 < r.cycles <= r.counts["a_completed"] <= r.counts["completed"]
    valkey = result.record().builds["valkey"]
    assert valkey.verdict == f"inconclusive ({valkey.trials_counted} trials)"


def test_compare_together_runs_every_build_at_once_on_fresh_servers() -> None:
    settings = CapacitySettings(duration_s=0.4, warmup_s=0.1, ceiling=False, ledger=True)
    result = run_compare(["redis", "redis"], settings, 2)
    assert result.interleave == "together"
    assert [t.build for t in result.trials] == ["redis", "redis-2", "redis", "redis-2"]
    for t in result.trials:
        assert t.result.audit is not None and t.result.audit["passed"], t.result.audit
        assert t.result.window_s == pytest.approx(0.4)
    ports = {t.result.server["url"] for t in result.trials}
    assert len(ports) == 4  # a fresh server for every build in every trial
    shares = result.record().builds["redis-2"].cpu_share_per_trial
    assert len(shares) == 2 and all(0 < s <= 1 for s in shares)


def test_a_trial_short_of_its_open_loop_rate_is_warned_in_the_compare_report(tmp_path: Path) -> None:
    from echomq_bench.report import build_report

    out = tmp_path / "cmp"
    code = main(["compare", "--server", "redis", "--server", "valkey", "--trials", "2", "--interleave", "trial",
                 "--duration", "300ms", "--warmup", "100ms", "--rate", "200000", "--connections", "2",
                 "--pipeline", "32", "--no-ceiling", "--no-pin", "--out", str(out)])
    assert code == 0
    builds = json.loads((out / "summary.json").read_text())["builds"]
    text = build_report([out]).md.read_text()
    for name in ("redis", "valkey"):
        shortfalls = [w for w in builds[name]["warnings"] if "could not keep the schedule" in w]
        assert len(shortfalls) == 2 and shortfalls[0].startswith("trial 1: achieved ")
        for warning in builds[name]["warnings"]:
            assert f"Warning ({name}): {warning}" in text
