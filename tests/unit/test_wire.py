"""The instrument's RESP writer and its templates agree with the script calls
they are built from, byte for byte, whatever the values."""

from __future__ import annotations

import random

import hiredis
import pytest

from echomq._instrument import QueueKeys, verbs
from echomq_bench.load.wire import CommandTemplate, as_bytes, encode_call, hole, resp

SHA = "f" * 40
KEYS = QueueKeys("wire-q")


def parsed(data: bytes) -> object:
    reader = hiredis.Reader()
    reader.feed(data)
    return reader.gets()


def test_encode_call_is_the_calls_evalsha() -> None:
    call = verbs.retry(KEYS, "JOB0Nvmd8aV5iy", 7, "boom %s", 250, 3)
    assert parsed(encode_call(call, SHA)) == [as_bytes(a) for a in call.evalsha(SHA)]
    assert resp(b"PING") == b"*1\r\n$4\r\nPING\r\n"


def test_complete_template_fills_like_the_call() -> None:
    id_hole, token_hole = hole("id", 14), hole("token", 8)
    template = CommandTemplate(verbs.complete(KEYS, id_hole, token_hole).evalsha(SHA),
                               fixed={"id": id_hole}, variable={"token": token_hole})
    fill = template.filler("id", "token", "len(token)")
    rng = random.Random(1)
    for token in (1, 9, 10, 2**53, *(rng.randrange(1, 2**53) for _ in range(200))):
        job_id = "JOB" + "".join(rng.choice("0123456789ABCxyz") for _ in range(11))
        tok = b"%d" % token
        want = encode_call(verbs.complete(KEYS, job_id, token), SHA)
        assert fill((job_id.encode(), tok, len(tok))) == want
        assert template.fill(id=job_id, token=token) == want


def test_enqueue_pieces_join_around_ids_and_keep_percent_signs() -> None:
    id_hole = hole("id", 14)
    payload = b"100% %s %d"
    pieces = CommandTemplate(verbs.enqueue(KEYS, id_hole, payload).evalsha(SHA), fixed={"id": id_hole}).pieces()
    job_id = "JOB0Nvmd8aV5iy"
    assert job_id.encode().join(pieces) == encode_call(verbs.enqueue(KEYS, job_id, payload), SHA)


def test_a_template_refuses_holes_it_cannot_fill() -> None:
    id_hole, token_hole = hole("id", 14), hole("token", 8)
    with pytest.raises(ValueError, match="not in the command"):
        CommandTemplate(verbs.claim(KEYS, 1000).evalsha(SHA), fixed={"id": id_hole})
    template = CommandTemplate(verbs.complete(KEYS, id_hole, token_hole).evalsha(SHA),
                               fixed={"id": id_hole}, variable={"token": token_hole})
    with pytest.raises(ValueError, match="does not fill"):
        template.filler("id")
    with pytest.raises(ValueError, match="length"):
        template.pieces()
