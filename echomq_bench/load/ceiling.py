"""The ceiling: what the C benchmark client gets from the same claim script.

`redis-benchmark` (or `valkey-benchmark`) sends EVALSHA of the project's
claim script, pipelined, on a pending set pre-filled with exactly as many
jobs as it will claim, so every call pops a real job. It costs the client
almost nothing per call, so its rate is the most claims per second this
server gives one script; the Python driver's rate is reported against it.
"""

from __future__ import annotations

import csv
import io
import os
import secrets
import shutil
import subprocess
from dataclasses import asdict, dataclass
from typing import Any

from echomq_bench.measurement import serverstats
from echomq_bench.load.bulk import drop_queue, fill
from echomq._instrument import QueueKeys, verbs
from echomq_bench.load.wire import Target, as_bytes
from echomq_bench.progress import ProgressFn, silent

__all__ = ["Ceiling", "CeilingOptions", "run_ceiling", "benchmark_binary"]

PIPELINE = 32
CLIENTS = 4
TIMEOUT_S = 300


@dataclass(frozen=True)
class Ceiling:
    claims_per_s: float
    server_utilization: float     # main thread, while the C client ran
    server_us_per_claim: float    # main-thread CPU per claim
    tool: str
    requests: int
    pipeline: int
    clients: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def benchmark_binary(version: str) -> str | None:
    """The build's own benchmark client when installed, else the other one."""
    order = ("valkey-benchmark", "redis-benchmark") if version.startswith("valkey") else (
        "redis-benchmark", "valkey-benchmark")
    for name in order:
        if shutil.which(name):
            return name
    return None


@dataclass(frozen=True)
class CeilingOptions:
    """How big the ceiling run is, and where its client runs."""

    requests: int = 100_000
    payload: bytes = b"x" * 64
    lease_ms: int = 60_000
    cpus: tuple[int, ...] | None = None          # pin the C client to these cores
    progress: ProgressFn = silent


def run_ceiling(client: Any, target: Target, claim_sha: str, version: str,
                options: CeilingOptions = CeilingOptions()) -> Ceiling | None:
    """Run the C client on its own throwaway queue; None when no benchmark client is installed."""
    requests, payload, lease_ms, cpus, progress = (options.requests, options.payload, options.lease_ms,
                                                   options.cpus, options.progress)
    tool = benchmark_binary(version)
    if tool is None:
        progress("no redis-benchmark or valkey-benchmark on PATH: no ceiling")
        return None
    name = f"ceiling-{secrets.token_hex(3)}"
    keys = QueueKeys(name)
    progress(f"ceiling: filling {requests:,} jobs")
    fill(target, name, requests, payload)
    command = [tool, "-h", target.host, "-p", str(target.port), "-n", str(requests), "-P", str(PIPELINE),
               "-c", str(CLIENTS), "--csv"]
    if target.db:
        command += ["--dbnum", str(target.db)]
    if target.username is not None:
        command += ["--user", target.username]
    if target.password is not None:
        # The benchmark clients read a password from argv only; it is never written anywhere.
        command += ["-a", target.password]
    command += [as_bytes(arg).decode() for arg in verbs.claim(keys, lease_ms).evalsha(claim_sha)]
    progress(f"ceiling: {tool} -P {PIPELINE} -c {CLIENTS}, {requests:,} claims")
    try:
        before = serverstats.sample(client)
        proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                              preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        after = serverstats.sample(client)
        claimed = int(client.zcard(keys.active))
    finally:
        drop_queue(client, name)
    rps = _parse_rps(proc.stdout)
    if proc.returncode != 0 or rps is None:
        # Its stderr may echo the command; never show a password.
        tail = proc.stderr.strip().splitlines()[-1:] if proc.stderr else []
        text = " ".join(tail).replace(target.password, "***") if target.password else " ".join(tail)
        progress(f"ceiling: {tool} failed ({proc.returncode}): {text}")
        return None
    if claimed != requests:
        progress(f"ceiling: {tool} claimed {claimed:,} of {requests:,} jobs")
    use = serverstats.usage(before, after)
    return Ceiling(claims_per_s=rps, server_utilization=use.utilization,
                   server_us_per_claim=use.main_cpu_s * 1e6 / max(1, claimed), tool=tool,
                   requests=requests, pipeline=PIPELINE, clients=CLIENTS)


def _parse_rps(text: str) -> float | None:
    rows = list(csv.reader(io.StringIO(text)))
    for row in rows[1:]:
        if len(row) >= 2:
            try:
                return float(row[1])
            except ValueError:
                continue
    return None
