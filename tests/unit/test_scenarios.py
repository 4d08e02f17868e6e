"""The Locust scenarios' options as a run reads them again from the web
form; the options as Locust's own parser refuses or reads them are checked
in the venv's `locust` by tests/integration/test_scenarios.py."""

from __future__ import annotations

import pytest


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
