from __future__ import annotations

import random
from pathlib import Path

import pytest

from echomq_bench.measurement.workdist import DistError, parse_dist, parse_duration_ms


@pytest.mark.parametrize("text,ms", [("0", 0), ("20ms", 20), ("1.5s", 1500), ("250us", 0.25), ("2m", 120_000),
                                     ("7", 7)])
def test_durations(text: str, ms: float) -> None:
    assert parse_duration_ms(text) == pytest.approx(ms)


def test_known_answers() -> None:
    assert parse_dist("const:20ms").sf(19.9) == 1 and parse_dist("const:20ms").sf(20) == 0
    exp = parse_dist("exp:mean=20ms")
    assert exp.sf(20) == pytest.approx(0.36787944) and exp.quantile_ms(0.5) == pytest.approx(13.8629436)
    logn = parse_dist("lognormal:median=50ms,p99=400ms")
    assert logn.quantile_ms(0.5) == pytest.approx(50) and logn.quantile_ms(0.99) == pytest.approx(400)
    assert logn.sf(400) == pytest.approx(0.01)
    uni = parse_dist("uniform:lo=10ms,hi=30ms")
    assert uni.sf(15) == pytest.approx(0.75) and uni.quantile_ms(0.5) == 20


def test_samples_follow_the_distribution() -> None:
    rng = random.Random(7)
    logn = parse_dist("lognormal:median=50ms,p99=400ms")
    xs = sorted(logn.sample_ms(rng) for _ in range(20_000))
    assert xs[10_000] == pytest.approx(50, rel=0.05)
    assert sum(x > 400 for x in xs) / len(xs) == pytest.approx(0.01, abs=0.003)


def test_empirical_from_csv(tmp_path: Path) -> None:
    f = tmp_path / "work.csv"
    f.write_text("job,work_s\na,0.010\nb,0.020\nc,0.030\nd,0.040\n")
    d = parse_dist(f"empirical:{f}")
    assert d.sf(25) == 0.5 and d.quantile_ms(0.5) == pytest.approx(20)


@pytest.mark.parametrize("bad, said", [
    ("", "bad distribution '': want KIND:PARAMS"),
    ("exp", "bad distribution 'exp': want KIND:PARAMS"),
    ("exp:", "exp: missing mean"),
    ("exp:mean=", "bad duration ''"),
    ("exp:mean=-1ms", "bad duration '-1ms'"),
    ("exp:avg=3ms", "exp: bad parameter 'avg=3ms'; want mean=DURATION"),
    ("lognormal:median=50ms", "lognormal: missing p99"),
    ("lognormal:median=50ms,p99=10ms", "lognormal: want 0 < median < p99"),
    ("const:fast", "bad duration 'fast'"),
    ("gamma:k=2", "unknown distribution kind 'gamma'"),
    ("uniform:lo=5,hi=1", "uniform: want 0 <= lo < hi"),
    ("empirical:/no/such/file.csv", "empirical: no such file /no/such/file.csv"),
    ("exp:mean=20xs", "bad duration '20xs'"),
])
def test_malformed_specs_name_the_problem(bad: str, said: str) -> None:
    with pytest.raises(DistError) as info:
        parse_dist(bad)
    assert said in str(info.value)
