"""The checks every verb's arguments pass before anything is sent.

A script sees each argument as the text redis-py sends, and its `intArg`
accepts plain decimal digits within the verb's range. These checks accept
exactly the values whose text the scripts accept, and hand back the value
to send, normalised, so no check here passes what a script then refuses:

- an int, or anything that is one by `__index__` (an IntEnum, a NumPy
  integer): sent as `int(value)`. redis-py would send such a value's
  `repr()` (`<Color.RED: 1>`), which every script refuses; normalising
  first sends `1`.
- a str or bytes of ASCII decimal digits, as `intArg` reads them: at most
  16 digits (a longer run, even of leading zeros, is refused there too).
- never a bool (redis-py refuses to send one), a float (redis-py sends
  `1.0`, which no script accepts), or anything else.
"""

from __future__ import annotations

import operator
import re

from .errors import InvalidArgumentError

__all__ = ["INT31", "INT53", "MAX_LIMIT", "check_int", "check_bytes"]

INT31 = 2**31 - 1
INT53 = 2**53
MAX_LIMIT = 100_000
# intArg reads at most 16 digits; 2^53, the largest bound, has 16.
_DIGITS = re.compile(rb"[0-9]{1,16}")


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """`value` as the int to send, when it names an integer from lo to hi."""
    number = _integer(name, value)
    if not lo <= number <= hi:
        raise InvalidArgumentError(f"{name} must be from {lo} to {hi}, got {number}")
    return number


def _integer(name: str, value: object) -> int:
    if isinstance(value, bool):
        # An int to Python, but redis-py will not send it, and True is never a lease.
        raise InvalidArgumentError(f"{name} must be an integer, got bool {value!r}")
    if isinstance(value, (str, bytes)):
        text = value.encode("ascii", "replace") if isinstance(value, str) else value
        if not _DIGITS.fullmatch(text):
            raise InvalidArgumentError(f"{name} must be an integer or up to 16 decimal digits, got {value!r}")
        return int(text)
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidArgumentError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None


def check_bytes(name: str, value: object, cap: int) -> bytes:
    """`value` as the bytes to send: bytes-like as they are, a str as UTF-8,
    at most `cap` bytes. A str with a lone surrogate (json and
    `errors="surrogateescape"` make them from bytes that are not UTF-8) has
    no UTF-8 form, and is refused here rather than by the encoder."""
    if isinstance(value, str):
        try:
            value = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(
                f"{name} is not valid text: {exc.reason} at character {exc.start} "
                f"({value[exc.start:exc.end]!r}); pass bytes, or a str without lone surrogates; "
                "nothing was sent") from None
    elif isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    if not isinstance(value, bytes):
        raise InvalidArgumentError(f"{name} must be bytes or str, got {type(value).__name__}")
    if len(value) > cap:
        raise InvalidArgumentError(f"{name} is {len(value)} bytes, over the cap of {cap}; nothing was sent")
    return value
