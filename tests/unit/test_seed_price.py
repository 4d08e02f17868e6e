"""The seed's price without a server: project over seed per verb and per cycle, its entry in the counts
record written and read back, and what the gate prints of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from echomq_bench.counts.identity import BinaryIdentity
from echomq_bench.counts.measure import CountRun, VerbCount
from echomq_bench.counts.seed_price import SEED_SCRIPTS, VERBS, seed_price
from echomq_bench.records.kinds.counts import CountsBuild, CountsRecord, SeedPrice

IDENTITY = BinaryIdentity("/usr/bin/redis-check-rdb", "redis 7.0.15", "a" * 64, "b" * 40, "glibc 2.36")


def _run(lua_dir: str, **per_call: float) -> CountRun:
    verbs = {verb: VerbCount(verb, 1200, n, {"ZADD": (1.0, 1_000.0)}) for verb, n in per_call.items()}
    return CountRun("redis", IDENTITY, {verb: "f" * 40 for verb in per_call}, verbs, "valgrind-3.19.0", 12.34,
                    lua_dir=lua_dir)


# Ratios 1.5, 1.0 and 2.0: their mean is 1.5, the cycle's ratio (sums) is 120,000 / 105,000.
PROJECT = _run("lua", enqueue=30_000, enqueue_duplicate=9_000, claim=80_000, complete=10_000)
SEED = _run(str(SEED_SCRIPTS), enqueue=20_000, claim=80_000, complete=5_000)


def test_each_verb_is_project_over_seed_and_the_cycle_is_the_sums_ratio() -> None:
    price = seed_price(PROJECT, SEED)
    assert price.cycle == VERBS == ("enqueue", "claim", "complete")
    assert [(v.verb, v.project, v.seed, v.ratio) for v in price.verbs] == [
        ("enqueue", 30_000, 20_000, 1.5), ("claim", 80_000, 80_000, 1.0), ("complete", 10_000, 5_000, 2.0)]
    assert (price.project, price.seed) == (120_000, 105_000)
    assert price.ratio == pytest.approx(120_000 / 105_000, abs=1e-4) and price.ratio != 1.5
    assert (price.wall_s, price.skipped, set(price.scripts)) == (12.3, None, set(VERBS))


def test_a_run_without_one_of_the_three_verbs_has_no_price() -> None:
    with pytest.raises(ValueError, match="missing: complete"):
        seed_price(PROJECT, _run(str(SEED_SCRIPTS), enqueue=20_000, claim=80_000))


def test_the_seed_s_scripts_sit_in_the_package() -> None:
    assert {p.name for p in SEED_SCRIPTS.glob("*.lua")} == {"enqueue-2.lua", "claim-3.lua", "complete-2.lua"}
    assert SEED_SCRIPTS.parent.name == "counts"


def test_the_price_round_trips_through_the_build_entry_and_an_older_entry_reads_without_one() -> None:
    price = seed_price(PROJECT, SEED)
    written = CountsBuild(build="redis", seed_price=price).to_record()
    assert [v["ratio"] for v in written["seed_price"]["verbs"]] == [1.5, 1.0, 2.0]
    assert CountsBuild.from_record(written) == CountsBuild(build="redis", seed_price=price)
    skipped = SeedPrice(skipped="CallgrindError: valgrind is not installed")
    assert CountsBuild.from_record(CountsBuild(build="redis", seed_price=skipped).to_record()).seed_price == skipped
    older = CountsBuild(build="redis").to_record()
    assert "seed_price" not in older and CountsBuild.from_record(older).seed_price is None
    record = CountsRecord(builds=(CountsBuild(build="redis", seed_price=price),)).to_record()
    assert CountsRecord.from_record(record).builds[0].seed_price == price


def _printed(tmp_path: Path, price: SeedPrice | None) -> str:
    from echomq_bench.counts.gate import CountGateResult, counts_record
    from echomq_bench.counts.verdict import judge
    from echomq_bench.records.files import write_record
    from echomq_bench.report import record_text

    figure = {"instructions": 80_000.0, "sd": 160.0, "commands": {"ZADD": {"calls": 1, "instructions": 1_000.0}}}
    verdict = judge("claim", PROJECT.verbs["claim"].to_dict(), figure, 10)
    result = CountGateResult("redis", IDENTITY, Path("/b/counts/count-redis.json"), (PROJECT,), (verdict,),
                             baseline_info={"passes": 10}, seed_price=price)
    write_record(tmp_path, counts_record([result], {"created_utc": "2026-12-03T10:00:00+00:00", "servers": []}))
    return record_text(tmp_path)


def test_the_gate_prints_each_verb_against_the_seed_then_the_cycle_and_its_verdict_last(tmp_path: Path) -> None:
    text = _printed(tmp_path, seed_price(PROJECT, SEED))
    lines = text.splitlines()
    for verb, project, seed, ratio in (("enqueue", "30,000", "20,000", "1.50"), ("claim", "80,000", "80,000", "1.00"),
                                       ("complete", "10,000", "5,000", "2.00")):
        assert any(re.fullmatch(rf"{verb}\s+{project}\s+{seed}\s+{ratio}\s*", line) for line in lines), verb
    assert "enqueue + claim + complete: 120,000 against 105,000 (ratio 1.14)" in lines
    assert lines[-1] == "PASS on redis: 1 verbs within their allowance"


def test_an_uncounted_seed_is_said_and_no_price_is_not_drawn(tmp_path: Path) -> None:
    skipped = _printed(tmp_path / "skipped", SeedPrice(skipped="CallgrindError: valgrind is not installed"))
    assert "redis: the seed's scripts went uncounted: CallgrindError: valgrind is not installed." in skipped
    assert skipped.splitlines()[-1].startswith("PASS on redis")
    assert "the seed's" not in _printed(tmp_path / "none", None)


def test_the_timing_gate_refuses_to_skip_a_price_it_never_counts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from echomq_bench.cli import main

    out = tmp_path / "out"
    assert main(["gate", "--count", "time", "--no-seed-price", "--out", str(out)]) == 2
    assert "--no-seed-price is the count gate's (--count instructions)" in capsys.readouterr().err
    assert not out.exists()
