"""Locust over echomq: the library the files in scenarios/ stand on.

A scenario file is a few lines:

    from echomq_bench.locust import Consumer, ConsumerSteps, install

    install("claim_complete", lease="30s", work="const:0")

    class Worker(Consumer):
        pass

`install` adds the echomq options to Locust's command line (and web UI)
with the scenario's defaults and hooks the run's life into Locust's events
(see control.py). Importing ConsumerSteps into the file offers the
consumer-stepping shape; it switches itself off unless --steps is given.

Modules: options (command line -> Settings), wire (script calls on a held
connection), client (the measured verbs, the books, the drain gate),
session (one run in one process: producers, pump, zombies), report
(settle, audit, steps, audit.json), control (Locust's events), users (the
abstract users and the shape).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echomq_bench.locust.control import Controller
    from echomq_bench.locust.users import Consumer, ConsumerSteps, EchoMQUser

__all__ = ["install", "controller", "Consumer", "ConsumerSteps", "EchoMQUser", "Controller"]

# Importing locust monkey-patches the whole process for gevent, so nothing
# here imports it until a locustfile asks for a user or installs itself:
# tests and tools may use echomq_bench.locust.report or .client without it.
_LAZY = {"Consumer": "users", "ConsumerSteps": "users", "EchoMQUser": "users", "Controller": "control"}
_controller: "Controller | None" = None


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def install(scenario: str, **defaults: Any) -> Controller:
    """Register the scenario with Locust's events; once per process."""
    global _controller
    from locust import events

    from echomq_bench.locust.control import Controller

    if _controller is not None:
        if _controller.scenario != scenario:
            raise RuntimeError(f"echomq scenario {_controller.scenario!r} is installed already; "
                               f"run one scenario file per Locust process, not {scenario!r} beside it")
        return _controller
    _controller = Controller(scenario, defaults)
    _controller.install(events)
    return _controller


def controller() -> Controller:
    if _controller is None:
        raise RuntimeError("echomq_bench.locust.install(...) was not called by the locustfile")
    return _controller
