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

The load itself is the load engine's roles (echomq_bench.load.engine): a
consumer user's task is one Consumer step, the producers and the pump are
Producer and Pump roles in background greenlets.

Modules: installed (the one scenario a process runs), options (command line -> Settings), wire (script calls on a held
connection; cluster_wire the same routed by slot), calls (a user's one client over a wire: the engine's calls
protocol, a zombie's complete and the crash notes, each call a Locust
request), books (the books, the drain gate, the
request names), session (one run in one process: producers, pump,
zombies), report (settle, audit, steps, the run's record), control (Locust's
events), users (the abstract users, their policy, and the shape).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from echomq_bench.locust.installed import controller, install

if TYPE_CHECKING:
    from echomq_bench.locust.control import Controller
    from echomq_bench.locust.users import Consumer, ConsumerSteps, EchoMQUser

__all__ = ["install", "controller", "Consumer", "ConsumerSteps", "EchoMQUser", "Controller"]

# Importing locust monkey-patches the whole process for gevent, so nothing
# here imports it until a locustfile asks for a user or installs itself:
# tests and tools may use echomq_bench.locust.report or .books without it.
_LAZY = {"Consumer": "users", "ConsumerSteps": "users", "EchoMQUser": "users", "Controller": "control"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
