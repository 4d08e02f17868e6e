"""The Locust scenarios' options, refused or read as a user gives them, in
the venv's `locust` where it matters; no run reaches a server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from echomq_bench.servers import free_port
from tests.helpers import SCENARIOS, child_env, finished, locust

def test_master_without_a_url_says_what_it_needs(tmp_path: Path) -> None:
    code, output = finished(locust(["-f", str(SCENARIOS / "claim_complete.py"), "--master", "--master-bind-host",
                                    "127.0.0.1", "--master-bind-port", str(free_port()), "--headless"], tmp_path))
    assert code == 2
    assert "distributed run needs --server redis://HOST:PORT" in output


@pytest.mark.parametrize("option, value, said", [
    ("--work", "lognormal:median=50ms", "lognormal: missing p99"),
    ("--work", "gauss:1", "unknown distribution kind 'gauss'"),
    ("--server", "memcached", "bad server spec 'memcached'"),
    ("--reap-every", "soon", "bad duration 'soon'"),
    ("--crash-rate", "1.5", "must be from 0 to 1"),
    ("--reap-every", "50", "has no unit"),
    ("--lease", "300", "has no unit"),
    ("--step-time", "10", "500ms, 10s, 1.5s, 2m"),
    ("--lease-ms", "0", "must be from 1ms"),
    ("--rate", "fast", "'fast' is not a number"),
])
def test_bad_option_exits_2_naming_it(option: str, value: str, said: str, tmp_path: Path) -> None:
    code, output = finished(locust(["-f", str(SCENARIOS / "claim_complete.py"), "--headless", "-t", "1s",
                                    option, value], tmp_path))
    assert code == 2
    assert f"argument {option}" in output and said in output


def test_option_values_are_checked_again_when_a_run_starts() -> None:
    """Values from the web form reach Settings.from_options as text: the same rules hold there."""
    from types import SimpleNamespace

    from echomq_bench.locust.options import DEFAULTS, Settings, SettingsError

    s = Settings.from_options(SimpleNamespace(**{**DEFAULTS, "lease": "1.5s", "reap_every": "0",
                                                 "idle_wait": "250us", "enqueue_rate": "200"}))
    assert (s.lease_ms, s.reap_every_ms, s.idle_wait_ms, s.enqueue_rate) == (1500, 0.0, 0.25, 200.0)
    for name, value, said in [("lease", "300", "--lease: duration '300' has no unit"),
                              ("backoff_cap", "2", "--backoff-cap: duration '2' has no unit"),
                              ("enqueue_rate", "fast", "--rate 'fast' is not a number")]:
        with pytest.raises(SettingsError, match=said):
            Settings.from_options(SimpleNamespace(**{**DEFAULTS, name: value}))


def test_old_option_spellings_still_parse(tmp_path: Path) -> None:
    # Locust's own parser, in a child: importing locust here would monkey-patch this test process.
    code = ("from locust.argument_parser import LocustArgumentParser\n"
            "from echomq_bench.locust.options import DEFAULTS, add_options\n"
            "p = LocustArgumentParser()\n"
            "add_options(p, DEFAULTS)\n"
            "a = p.parse_args(['--lease-ms', '300', '--enqueue-rate', '50'])\n"
            "b = p.parse_args(['--lease', '300ms', '--rate', '50'])\n"
            "c = p.parse_args([])\n"
            "print(a.lease, a.enqueue_rate, b.lease, b.enqueue_rate, c.lease)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env(),
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["300ms", "50.0", "300ms", "50.0", "30s"]
