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
    ("--lease", "0", "must be from 1ms"),
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


def test_the_old_spellings_are_refused_as_unknown(tmp_path: Path) -> None:
    """--lease-ms and --enqueue-rate are gone: argparse refuses them as it refuses any unknown flag."""
    for option, value in (("--lease-ms", "300"), ("--enqueue-rate", "50")):
        code, output = finished(locust(["-f", str(SCENARIOS / "claim_complete.py"), "--headless", "-t", "1s",
                                        option, value], tmp_path))
        assert code == 2
        assert f"unrecognized arguments: {option}" in output


def test_the_options_parse_as_given(tmp_path: Path) -> None:
    # Locust's own parser, in a child: importing locust here would monkey-patch this test process.
    code = ("from locust.argument_parser import LocustArgumentParser\n"
            "from echomq_bench.locust.options import DEFAULTS, add_options\n"
            "p = LocustArgumentParser()\n"
            "add_options(p, DEFAULTS)\n"
            "given = p.parse_args(['--lease', '300ms', '--rate', '50'])\n"
            "default = p.parse_args([])\n"
            "print(given.lease, given.enqueue_rate, default.lease, default.enqueue_rate)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env(),
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["300ms", "50.0", "30s", "0.0"]
