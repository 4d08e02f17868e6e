"""Which server binary a count belongs to.

An instruction count is a property of the code that ran: the server binary,
the C library it calls into and the script text; not of the machine. A
count baseline is therefore keyed by the binary's SHA-256 and names its
version and GNU build id beside it, and it is valid on any machine that runs
that binary with that C library.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

__all__ = ["BinaryIdentity", "binary_identity", "gnu_build_id"]

# An ELF note: namesz 4, descsz 20, type NT_GNU_BUILD_ID (3), name "GNU\0" (little-endian).
_BUILD_ID_NOTE = b"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00"


@dataclass(frozen=True)
class BinaryIdentity:
    path: str          # the file the binary's path reaches
    version: str       # `redis 7.0.15`
    sha256: str
    build_id: str      # the linker's GNU build id, or "" when the file has none
    libc: str          # `glibc 2.36`: the string and memory functions a count includes

    @property
    def key(self) -> str:
        """What a count baseline is filed under: the binary's and the C library's identity."""
        return hashlib.sha256(f"{self.sha256} {self.libc}".encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "key": self.key}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BinaryIdentity:
        return cls(*(str(data.get(k, "")) for k in ("path", "version", "sha256", "build_id", "libc")))


def gnu_build_id(data: bytes) -> str:
    """The GNU build id an ELF file's note carries, in hex; "" when it has none."""
    at = data.find(_BUILD_ID_NOTE)
    if at < 0:
        return ""
    start = at + len(_BUILD_ID_NOTE)
    return data[start:start + 20].hex()


def binary_identity(binary: str) -> BinaryIdentity:
    from echomq_bench.servers.builds import identify

    path = os.path.realpath(binary)
    stat = os.stat(path)
    found = identify(binary)
    version = found.text() if found is not None else "?"
    return _identity(path, stat.st_mtime_ns, stat.st_size, version)


@lru_cache(maxsize=16)
def _identity(path: str, mtime_ns: int, size: int, version: str) -> BinaryIdentity:
    with open(path, "rb") as f:
        data = f.read()
    name, release = platform.libc_ver()
    return BinaryIdentity(path, version, hashlib.sha256(data).hexdigest(), gnu_build_id(data),
                          f"{name} {release}".strip() or "?")
