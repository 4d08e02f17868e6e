"""The pytest-benchmark route across machines: a saved run carries the
machine fingerprint, and comparing against one whose fingerprint differs
names the fields and says the raw-seconds comparison is not meaningful."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from echomq_bench.microbench.benchmark_machine import FINGERPRINT_KEY, measured_fingerprint
from echomq_bench.servers import parse_server_spec
from tests.helpers import ROOT

ONE_VERB = ["-k", "test_verb and pending_size", "--bench-server", "redis"]
MARK = "was measured on another machine fingerprint"


def _outside_xdist(env: dict[str, str]) -> dict[str, str]:
    """The environment without an xdist worker's marks: pytest-benchmark turns itself off in a process
    that inherits them, and this run is a benchmark's own, not a worker's."""
    return {k: v for k, v in env.items() if not k.startswith("PYTEST_XDIST")}


def _bench(cwd: Path, *args: str) -> tuple[str, str]:
    """pytest over bench/ for one verb on redis, run in `cwd` (pytest-benchmark
    names its storage relative to the working folder): its stdout and stderr."""
    done = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "bench" / "test_verbs.py"), *ONE_VERB,
                           "--benchmark-storage=file://./saved", "-p", "no:cacheprovider", "-q", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=_outside_xdist({**os.environ, "PYTHONPATH": str(ROOT)}))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout, done.stderr


def test_a_saved_run_from_another_fingerprint_is_named_and_this_one_is_not(tmp_path: Path) -> None:
    _bench(tmp_path, "--benchmark-autosave")
    [saved] = (tmp_path / "saved").glob("*/0001_*.json")
    data = json.loads(saved.read_text())
    here = data["machine_info"][FINGERPRINT_KEY]
    assert here == measured_fingerprint([parse_server_spec("redis")])
    assert set(here) == {"cpu_model", "cpu_flags_sha256", "cores", "redis.server_version", "redis.allocator"}

    data["machine_info"][FINGERPRINT_KEY] = {**here, "cores": 64, "redis.allocator": "libc"}
    (saved.parent / saved.name.replace("0001_", "0002_")).write_text(json.dumps(data))
    out, err = _bench(tmp_path, "--benchmark-compare=0002", "--benchmark-compare-fail=median:1000%")
    fields = f"cores {here['cores']} here, 64 saved; redis.allocator {here['redis.allocator']} here, libc saved."
    commit = str(data["commit_info"].get("id") or "unknown")[:10]   # "unversioned" outside a checkout
    warning = f"the saved run of {data['datetime']} (commit {commit}) {MARK}: {fields}"
    assert f"PytestBenchmarkWarning: {warning}" in err      # pytest-benchmark's own channel, when it loads the run
    assert f"WARNING: {warning}" in out                     # and again under the table it concerns
    assert "--benchmark-compare-fail is not meaningful against this run" in out and "`echomq-bench gate`" in out

    out, err = _bench(tmp_path, "--benchmark-compare=0001", "--benchmark-compare-fail=median:1000%")
    assert "Comparing against benchmarks from" in out + err and "0001_" in out + err
    assert "machine fingerprint" not in out + err and "WARNING: the saved run" not in out
