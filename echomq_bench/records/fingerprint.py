"""The machine fingerprint: what a figure measured on one machine depends on
beyond the code, so that figures are only compared across runs that share it.

The CPU (model and a hash of its flags), the cores, the server's version and
its allocator. The gate keeps a baseline per fingerprint; every run's
meta.json carries each server's fingerprint (`meta.describe_server`), and
the results history draws one line per fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

__all__ = ["FIELDS", "fingerprint", "fingerprint_id", "cpu_flags_sha256", "cpu_model"]

FIELDS = ("cpu_model", "cpu_flags_sha256", "cores", "server_version", "allocator")


def cpu_model() -> str:
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags_sha256() -> str:
    """The first 16 hex digits of the sorted CPU flags' SHA-256 ('' flags when unreadable)."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:
        pass
    return hashlib.sha256(flags.encode()).hexdigest()[:16]


def fingerprint(client: Any) -> dict[str, Any]:
    """This machine's fingerprint with the server `client` talks to."""
    from echomq_bench.servers import server_version

    return {"cpu_model": cpu_model(), "cpu_flags_sha256": cpu_flags_sha256(), "cores": os.cpu_count(),
            "server_version": server_version(client),
            "allocator": str(client.info("memory").get("mem_allocator", "?"))}


def fingerprint_id(fp: Mapping[str, Any]) -> str:
    """A short stable name for a fingerprint: the folder its baselines live in."""
    return hashlib.sha256(json.dumps(dict(fp), sort_keys=True).encode()).hexdigest()[:12]
