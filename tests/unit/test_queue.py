"""The client's public surface: a Queue of eight verbs, nothing else, and the Worker over it."""

from __future__ import annotations



import echomq
from echomq import Queue


def test_public_surface_is_exactly_the_eight_verbs() -> None:
    public = {n for n in dir(Queue) if not n.startswith("_")}
    assert public == {"enqueue", "browse", "pending_size", "claim", "complete", "retry", "promote", "reap"}
    assert set(echomq.__all__) == {
        "Queue", "Job", "mint", "parse_id", "EchoMQError", "StaleTokenError",
        "WrongKindError", "InvalidArgumentError", "ServerUnavailableError",
        "Worker", "WorkerSettings", "WorkerStats", "OutcomeUnknownError",
    }
