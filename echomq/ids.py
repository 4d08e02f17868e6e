"""Branded ids: a 3-letter kind and 11 base62 digits of a 64-bit snowflake.

    value = (unix_ms - EPOCH_MS) << 22 | node << 12 | seq

Fixed width and an ASCII-ordered alphabet make byte order equal mint order,
which is what lets a score-zero sorted set be FIFO, browse index and time
index at once.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable

from .errors import InvalidArgumentError, WrongKindError

# The format itself is public (its constants and `encode`): a bulk writer that
# mints ids a block at a time must produce exactly what `mint` would.
__all__ = ["ALPHABET", "EPOCH_MS", "DIGITS", "MAX_NODE", "MAX_SEQ", "encode", "BrandedId", "Minter", "mint",
           "parse_id", "check_job_id"]

ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
DIGITS = 11
MAX_VALUE = (1 << 64) - 1
MAX_NODE = (1 << 10) - 1
MAX_SEQ = (1 << 12) - 1
JOB_KIND = "JOB"

_INDEX = {c: i for i, c in enumerate(ALPHABET)}
_KIND = re.compile(r"[A-Z]{3}")
_SHAPE = re.compile(r"[A-Z]{3}[0-9A-Za-z]{11}")


def encode(value: int, width: int = DIGITS) -> str:
    """`value` in base62, `width` digits, leading zeros kept (so text order is number order)."""
    digits = []
    for _ in range(width):
        value, r = divmod(value, 62)
        digits.append(ALPHABET[r])
    return "".join(reversed(digits))


def decode(digits: str) -> int:
    value = 0
    for c in digits:
        value = value * 62 + _INDEX[c]
    return value


@dataclass(frozen=True)
class BrandedId:
    kind: str
    unix_ms: int
    node: int
    seq: int
    value: int

    def __str__(self) -> str:
        return self.kind + encode(self.value)


def parse_id(text: object) -> BrandedId:
    """Split an id into kind, mint time, node and sequence; EMQID if malformed."""
    if not isinstance(text, str):
        raise InvalidArgumentError(
            f"id must be a str, got {type(text).__name__}", code="EMQID"
        )
    if not _SHAPE.fullmatch(text):
        raise InvalidArgumentError(
            f"malformed id {text!r}: want 3 upper-case letters and 11 base62 digits",
            code="EMQID",
        )
    value = decode(text[3:])
    if value > MAX_VALUE:
        raise InvalidArgumentError(f"malformed id {text!r}: exceeds 64 bits", code="EMQID")
    return BrandedId(
        kind=text[:3],
        unix_ms=(value >> 22) + EPOCH_MS,
        node=(value >> 12) & MAX_NODE,
        seq=value & MAX_SEQ,
        value=value,
    )


def check_job_id(text: object) -> str:
    """The id itself when it is a well-formed JOB id; the wire's refusals otherwise."""
    parsed = parse_id(text)
    if parsed.kind != JOB_KIND:
        raise WrongKindError(f"id {text!r} has kind {parsed.kind}, not {JOB_KIND}")
    return text  # type: ignore[return-value]


class Minter:
    """Hands out ids that never go below the previous one, whatever the clock does.

    A clock that steps back, or more than 4096 ids in one millisecond, borrow
    the next millisecond instead of repeating or reordering.
    """

    def __init__(self, node: int | None = None, clock: Callable[[], int] | None = None) -> None:
        if node is None:
            node = _default_node()
        if not 0 <= node <= MAX_NODE:
            raise InvalidArgumentError(f"node must be 0..{MAX_NODE}, got {node}", code="EMQARG")
        self.node = node
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._last_ms = -1
        self._seq = 0
        self._lock = threading.Lock()

    def mint(self, kind: str = JOB_KIND) -> str:
        if not isinstance(kind, str) or not _KIND.fullmatch(kind):
            raise InvalidArgumentError(f"kind must be 3 upper-case letters, got {kind!r}", code="EMQARG")
        with self._lock:
            ms = self._clock()
            if ms > self._last_ms:
                self._last_ms, self._seq = ms, 0
            elif self._seq < MAX_SEQ:
                self._seq += 1
            else:
                self._last_ms, self._seq = self._last_ms + 1, 0
            value = (self._last_ms - EPOCH_MS) << 22 | self.node << 12 | self._seq
        return kind + encode(value)


def _default_node() -> int:
    # Processes of one run mint concurrently (Locust workers, driver
    # processes): a node drawn per process keeps their ids apart.
    env = os.environ.get("ECHOMQ_NODE")
    if env is not None:
        return int(env)
    return random.SystemRandom().randrange(MAX_NODE + 1)


_minter = Minter()


def _reseed_after_fork() -> None:
    global _minter
    _minter = Minter()


os.register_at_fork(after_in_child=_reseed_after_fork)


def mint(kind: str = JOB_KIND) -> str:
    """A new id of this kind from the process's minter."""
    return _minter.mint(kind)
