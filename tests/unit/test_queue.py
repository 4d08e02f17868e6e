"""The client's public surface: a Queue of eight verbs, nothing else, and the Worker over it."""

from __future__ import annotations

import pytest
import redis

import echomq
from echomq import Queue


def test_public_surface_is_exactly_the_eight_verbs() -> None:
    public = {n for n in dir(Queue) if not n.startswith("_")}
    assert public == {"enqueue", "browse", "pending_size", "claim", "complete", "retry", "promote", "reap"}
    assert set(echomq.__all__) == {
        "Queue", "Job", "mint", "parse_id", "EchoMQError", "StaleTokenError",
        "WrongKindError", "InvalidArgumentError", "ServerUnavailableError",
        "Worker", "WorkerSettings", "WorkerStats", "WorkerHealth", "OutcomeUnknownError", "KeyspaceDamageError",
        "OutOfMemoryError", "ServerReplyError", "EvictionWarning", "EvictionPolicyError",
    }


@pytest.mark.parametrize(("reply", "cls", "code"), [
    ("EMQDAMAGE emq:{q}:active is a string, not a sorted set; nothing moved", "KeyspaceDamageError", "EMQDAMAGE"),
    ("WRONGTYPE Operation against a key holding the wrong kind of value", "KeyspaceDamageError", "WRONGTYPE"),
    # Redis 6.2 wraps what a script's command answered inside its own error.
    ("Error running script (call to f_1): @user_script:1: WRONGTYPE Operation against a key holding the wrong kind "
     "of value", "KeyspaceDamageError", "WRONGTYPE"),
    ("Error running script (call to f_1): @user_script:12: -OOM command not allowed when used memory > 'maxmemory'",
     "OutOfMemoryError", "OOM"),
    ("OOM command not allowed when used memory > 'maxmemory'.", "OutOfMemoryError", "OOM"),
    ("NOPERM User alice has no permissions to run the 'hmget' command", "ServerReplyError", "EMQREPLY"),
    ("BUSY Redis is busy running a script.", "ServerBusyError", "BUSY"),
    ("LOADING Redis is loading the dataset in memory", "ServerBusyError", "LOADING"),
    ("TRYAGAIN Multiple keys request during rehashing of slot", "SlotMigratingError", "TRYAGAIN"),
    ("TRYAGAIN emq:{q}:job:JOB0000000000a may be on another node while slot 5 moves; nothing moved",
     "SlotMigratingError", "TRYAGAIN"),
    ("Script attempted to access a non local key in a cluster node script: f_1, on @user_script:12.",
     "SlotMigratingError", "TRYAGAIN"),
])
def test_every_error_reply_maps_into_the_tree(reply: str, cls: str, code: str) -> None:
    from echomq import errors

    mapped = errors.from_reply(reply)
    assert type(mapped).__name__ == cls and isinstance(mapped, errors.EchoMQError)
    assert mapped.code == code and str(mapped) == reply


@pytest.mark.parametrize(("raised", "cls"), [
    (redis.exceptions.ClusterError("TTL exhausted."), "ServerUnavailableError"),
    (redis.exceptions.ConnectionError("Connection refused"), "ServerUnavailableError"),
    (redis.exceptions.TryAgainError("Multiple keys request during rehashing of slot"), "SlotMigratingError"),
    (redis.exceptions.ResponseError("NOPERM no"), "ServerReplyError"),
    (redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"), "ServerBusyError"),
])
def test_a_cluster_pipelines_failure_in_a_calls_place_maps_into_the_tree(raised: Exception, cls: str) -> None:
    from echomq import errors
    from echomq.pipeline import as_error

    assert type(as_error(raised)) is getattr(errors, cls)
