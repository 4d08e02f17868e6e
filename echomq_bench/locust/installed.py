"""The scenario this process runs: `install` registers it with Locust's
events once, and `controller` finds it again from inside a user.

It lives apart from the package's `__init__` so the users, which need the
controller, import this module and not the package they belong to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from echomq_bench.errors import BenchError

if TYPE_CHECKING:
    from echomq_bench.locust.control import Controller

__all__ = ["install", "controller"]

_controller: "Controller | None" = None


def install(scenario: str, **defaults: Any) -> "Controller":
    """Register the scenario with Locust's events; once per process."""
    global _controller
    from locust import events

    from echomq_bench.locust.control import Controller

    if _controller is not None:
        if _controller.scenario != scenario:
            raise BenchError(f"echomq scenario {_controller.scenario!r} is installed already; "
                             f"run one scenario file per Locust process, not {scenario!r} beside it")
        return _controller
    _controller = Controller(scenario, defaults)
    _controller.install(events)
    return _controller


def controller() -> "Controller":
    if _controller is None:
        raise BenchError("echomq_bench.locust.install(...) was not called by the locustfile")
    return _controller
