"""The run's call log across Locust's processes: each load process records
its own (echomq_bench.locust.session), a worker ships its call log with its
books, and the coordinator writes one file per process into the run's
results folder and checks them together (echomq_bench.measurement.calllog_check).

Times in a call log are each machine's monotonic clock. When every process
ran on the coordinator's machine they are one clock; a worker on another
machine makes the checker order operations only within each process's file.
"""

from __future__ import annotations

import re
import socket
import zlib
from pathlib import Path
from typing import Any, Iterable, Mapping

from echomq._instrument import Client
from echomq_bench.load import drain
from echomq_bench.measurement.calllog import CallLog
from echomq_bench.measurement.calllog_check import CallLogCheck, check_files

__all__ = ["call_log_path", "held_ids", "final_places", "shipped", "check_run"]


def call_log_path(folder: Path, run_id: str, name: str) -> Path:
    """Where one process's call log of one run goes: `call_log/<run>-<process>.jsonl`."""
    return folder / "call_log" / f"{run_id}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.jsonl"


def held_ids(client: Client, queues: Iterable[str]) -> set[str]:
    """Every id the queues hold (before a run: jobs no enqueue of this run made)."""
    return drain.held_ids(client, queues)


def final_places(client: Client, queues: Iterable[str]) -> dict[str, set[str]]:
    """The ids each of the queues' sets holds at the end, for the call-log check."""
    return drain.places(client, queues)


def shipped(call_log: CallLog) -> dict[str, Any]:
    """A worker's call log as its books message carries it."""
    return {"call_log": zlib.compress(call_log.read_bytes(), 1), "host": socket.gethostname()}


def check_run(own: CallLog, received: Mapping[str, Mapping[str, Any]], folder: Path, run_id: str,
              final: Mapping[str, set[str]], initial: set[str]) -> CallLogCheck:
    """Write each worker's call log beside the coordinator's, then check them all."""
    own.flush()
    paths = [own.path] if own.path is not None else []
    hosts = {socket.gethostname()}
    for node, data in received.items():
        if not data.get("call_log"):
            continue
        path = call_log_path(folder, run_id, node)
        path.write_bytes(zlib.decompress(data["call_log"]))
        paths.append(path)
        hosts.add(str(data.get("host")))
    return check_files(paths, final, initial, one_clock=len(hosts) == 1)
