"""The regression gate without a server: the slowed copy it measures against,
its refusals, and the committed baselines it compares with."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from echomq_bench.cli import main
from echomq_bench.commands.gate import (
    BaselineError,
    load_baseline,
    slowed_copy,
)
from echomq_bench.microbench.gate import Verdict
from echomq_bench.microbench.runner import VERB_CASES
from echomq.scripts import discover
from tests.helpers import ROOT

def test_slowed_copy_changes_only_the_named_script(tmp_path: Path) -> None:
    slowed = slowed_copy(tmp_path / "lua", "claim", 123)
    now, orig = discover(slowed), discover()
    assert set(now) == set(orig)
    changed = [v for v in now if now[v].text != orig[v].text]
    assert changed == ["claim"]
    assert "for i = 1, 123 do" in now["claim"].text


@pytest.mark.parametrize("bad", [
    ["--tolerance", "-1"], ["--tolerance", "abc"], ["--rounds", "0"], ["--verbs", "claim,nope"],
])
def test_cli_refuses_bad_options(bad: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["gate", "--server", "redis", "--baseline", str(tmp_path), *bad])
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_missing_or_broken_baseline_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "--server", "redis", "--baseline", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no baseline at" in err and "--update" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["gate", "--server", "redis", "--baseline", str(broken)]) == 2
    assert "not a readable baseline" in capsys.readouterr().err
    with pytest.raises(BaselineError):
        load_baseline(tmp_path / "x.json")


def test_committed_baselines_cover_every_verb() -> None:
    folder = ROOT / "results" / "baselines"
    for build in ("redis", "valkey"):
        data = load_baseline(folder / f"gate-{build}.json")
        assert data["build"] == build
        assert set(data["figures"]) >= {c.name for c in VERB_CASES}
        assert set(data["scripts"]) == set(discover())
        # Every verb has a figure to compare; PING, a reference, can read 0 µs on every call it keeps.
        assert all(data["figures"][c.name]["server_ratio"] > 0 for c in VERB_CASES)


def test_a_round_whose_reference_reads_zero_microseconds_has_no_ratio() -> None:
    # commandstats counts whole µs: a short round of the no-op can read 0 on every call it keeps.
    from echomq_bench.microbench.figures import pooled_ratio

    num = [[4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0]]
    den = [[0.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0]]
    ratio, se = pooled_ratio(num, den, keep_num=1.0, keep_den=1.0)
    assert ratio == pytest.approx(16.0 / 6.0)   # pooled: 4 µs against the mean 1.5 µs of all twelve
    assert se > 0
    assert math.isnan(pooled_ratio([[4.0]], [[0.0]], bootstrap=False)[0])   # nothing to divide by: no figure, no crash


def _verdict(**kw: object) -> Verdict:
    base = dict(case="claim", reference="noop_script", server_us=20.0, client_us=60.0, base_ratio=10.0,
                now_ratio=10.0, change=0.0, allowed=0.2)
    return Verdict(**{**base, **kw})  # type: ignore[arg-type]


def test_a_verb_missing_from_the_baseline_fails() -> None:
    v = _verdict(base_ratio=None, change=None, allowed=None, missing=True)
    assert v.regressed and v.status == "MISSING from the baseline"


def test_another_machines_baseline_is_advisory_and_cannot_fail() -> None:
    v = _verdict(now_ratio=15.0, change=0.5, advisory=True)
    assert not v.flagged and not v.regressed
    assert v.status == "ok (cross-run figure advisory: another machine)"
    assert _verdict(now_ratio=15.0, change=0.5).regressed   # the same change on the same machine fails


def test_a_first_baseline_is_not_called_another_machines() -> None:
    # --update with no baseline yet: no figure to compare, and no other machine either.
    v = _verdict(base_ratio=None, change=None, allowed=None, advisory=True)
    assert v.status == "ok"


def test_the_ab_check_fails_on_another_machine_too() -> None:
    v = _verdict(advisory=True, ab_change=0.25, ab_allowed=0.10, confirmed=True)
    assert v.regressed and v.status == "SLOWER"
    assert not _verdict(advisory=True, ab_change=0.25, ab_allowed=0.10, confirmed=False).regressed


def test_noise_above_tolerance_is_inconclusive_not_a_pass() -> None:
    v = _verdict(change=0.05, noisy=True)
    assert v.inconclusive and not v.regressed
    assert v.status == "inconclusive (noise above tolerance)"
    assert not _verdict(change=0.5, noisy=True, confirmed=True).inconclusive   # a regression is still one


def test_baselines_are_found_per_machine_fingerprint(tmp_path: Path) -> None:
    from echomq_bench.microbench.baseline import baseline_path, fingerprint_id

    here = fingerprint_id({"cpu_model": "x", "cores": 2, "server_version": "redis 7.0.15", "allocator": "jemalloc"})
    assert here == fingerprint_id({"allocator": "jemalloc", "server_version": "redis 7.0.15", "cores": 2,
                                   "cpu_model": "x"})
    assert here != fingerprint_id({"cpu_model": "x", "cores": 4, "server_version": "redis 7.0.15",
                                   "allocator": "jemalloc"})
    assert baseline_path(tmp_path, "redis", here) == tmp_path / "gate-redis.json"          # none of its own yet
    assert baseline_path(tmp_path, "redis", here, writing=True) == tmp_path / here / "gate-redis.json"
    (tmp_path / here).mkdir()
    (tmp_path / here / "gate-redis.json").write_text("{}")
    assert baseline_path(tmp_path, "redis", here) == tmp_path / here / "gate-redis.json"
    assert baseline_path(tmp_path / "one.json", "redis", here) == tmp_path / "one.json"


# -- the pytest-benchmark route: the fingerprint in machine_info, and the warning across machines ----------


def test_a_run_fingerprint_keeps_the_machine_once_and_each_build_by_name() -> None:
    from echomq_bench.microbench.benchmark_machine import run_fingerprint

    machine = {"cpu_model": "Xeon", "cpu_flags_sha256": "fc7d", "cores": 2}
    got = run_fingerprint({"redis": {**machine, "server_version": "redis 7.0.15", "allocator": "jemalloc-5.3.0"},
                           "valkey": {**machine, "server_version": "valkey 8.0.1", "allocator": "jemalloc-5.3.0"}})
    assert got == {**machine, "redis.server_version": "redis 7.0.15", "redis.allocator": "jemalloc-5.3.0",
                   "valkey.server_version": "valkey 8.0.1", "valkey.allocator": "jemalloc-5.3.0"}
    with pytest.raises(ValueError, match="at least one build"):
        run_fingerprint({})


def test_a_saved_run_from_another_fingerprint_is_named_field_by_field() -> None:
    from echomq_bench.microbench.benchmark_machine import FINGERPRINT_KEY, cross_machine_warning, differences

    here = {"cpu_model": "Xeon", "cores": 2, "redis.server_version": "redis 7.0.15"}
    assert cross_machine_warning(here, {FINGERPRINT_KEY: dict(here), "node": "elsewhere"}, "of today") is None
    saved = {"cpu_model": "Xeon", "cores": 64, "valkey.server_version": "valkey 8.0.1"}
    assert differences(here, saved) == ["cores 2 here, 64 saved",
                                        "redis.server_version redis 7.0.15 here, absent saved",
                                        "valkey.server_version absent here, valkey 8.0.1 saved"]
    text = cross_machine_warning(here, {FINGERPRINT_KEY: saved}, "of 2026-12-01 (commit 2c720de)")
    assert text == ("the saved run of 2026-12-01 (commit 2c720de) was measured on another machine fingerprint: "
                    "cores 2 here, 64 saved; redis.server_version redis 7.0.15 here, absent saved; "
                    "valkey.server_version absent here, valkey 8.0.1 saved. pytest-benchmark compares raw round-trip "
                    "seconds across these runs, and seconds do not carry across machines: --benchmark-compare-fail "
                    "is not meaningful against this run. To compare across machines use `echomq-bench gate`, which "
                    "judges each verb's server time against a reference measured in the same run and keeps a "
                    "baseline per machine fingerprint.")
    unknown = cross_machine_warning(here, {"node": "ci"}, "of yesterday")
    assert unknown is not None and unknown.startswith(
        "the saved run of yesterday carries no echomq machine fingerprint, so whether it was measured on this "
        "machine is unknown. pytest-benchmark compares raw round-trip seconds")
