from __future__ import annotations

import pytest

from echomq import InvalidArgumentError, WrongKindError, mint, parse_id
from echomq.ids import ALPHABET, EPOCH_MS, Minter, check_job_id, decode, encode


def test_seed_ids_parse() -> None:
    job = parse_id("JOB0Nvmd8aV5iy")
    assert job.kind == "JOB"
    assert str(job) == "JOB0Nvmd8aV5iy"
    order = parse_id("ORD0Nt6z93U3dY")
    assert order.kind == "ORD"
    # Both were minted in 2025, after the epoch and before today.
    assert EPOCH_MS < order.unix_ms < job.unix_ms < EPOCH_MS + 3 * 365 * 86_400_000


def test_fields_round_trip() -> None:
    m = Minter(node=513, clock=lambda: EPOCH_MS + 123_456)
    first, second = parse_id(m.mint()), parse_id(m.mint("ORD"))
    assert (first.unix_ms, first.node, first.seq) == (EPOCH_MS + 123_456, 513, 0)
    assert (second.kind, second.seq) == ("ORD", 1)


def test_alphabet_is_ascii_ordered() -> None:
    assert list(ALPHABET) == sorted(ALPHABET)
    assert decode(encode(2**64 - 1)) == 2**64 - 1


def test_lex_order_is_mint_order_over_100k_with_clock_stepping_back() -> None:
    # A clock that runs, stalls, steps back 50 ms twice and jumps forward.
    ticks = iter([EPOCH_MS + 10_000 + (i // 7) - (50 if 30_000 < i < 60_000 else 0)
                  - (50 if 80_000 < i < 81_000 else 0) for i in range(100_000)])
    m = Minter(node=7, clock=lambda: next(ticks))
    ids = [m.mint() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert [parse_id(i).value for i in ids] == sorted(parse_id(i).value for i in ids)


def test_sequence_overflow_borrows_the_next_millisecond() -> None:
    m = Minter(node=1, clock=lambda: EPOCH_MS + 5)
    ids = [m.mint() for _ in range(5000)]
    assert ids == sorted(ids) and len(set(ids)) == 5000
    assert parse_id(ids[-1]).unix_ms == EPOCH_MS + 6


def test_default_minter_is_monotonic() -> None:
    ids = [mint() for _ in range(10_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    "bad",
    ["", "JOB", "JOB0Nvmd8aV5i", "JOB0Nvmd8aV5iyy", "JOB0Nvmd8aV5i!", "JOB0Nvmd8aV5i{",
     "JOB0Nvmd8aV5i}", "JOB0Nvmd8aV5i:", "JOB0Nvmd8aV5i ", "JOB0Nvmd8aV5ié", "job0Nvmd8aV5iy",
     "JOBzzzzzzzzzzz", 12345, None, b"JOB0Nvmd8aV5iy"],
)
def test_malformed_ids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        parse_id(bad)
    assert info.value.code == "EMQID"


def test_wrong_kind_is_its_own_error() -> None:
    with pytest.raises(WrongKindError) as info:
        check_job_id("ORD0Nt6z93U3dY")
    assert info.value.code == "EMQKIND" and "ORD" in str(info.value)
    assert check_job_id("JOB0Nvmd8aV5iy") == "JOB0Nvmd8aV5iy"


def test_the_bulk_encoder_agrees_with_encode() -> None:
    import random

    import numpy as np

    from echomq_bench.load.bulk import encode_block

    rng = random.Random(62)
    values = [0, 1, 61, 62, 2**63, 2**64 - 2, 2**64 - 1] + [rng.getrandbits(64) for _ in range(5000)]
    assert encode_block(np.array(values, dtype=np.uint64)) == [encode(v).encode() for v in values]


def test_encode_keeps_leading_zeros_at_any_width() -> None:
    assert encode(0) == "0" * 11
    assert encode(61, 2) == "0z" and encode(62, 2) == "10"
    assert [encode(v, 2) for v in range(62**2)] == sorted(encode(v, 2) for v in range(62**2))
