"""Queue: the eight verbs of the echomq contract over one redis-py client."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
import time
import warnings
from typing import Any, Iterator, Literal

import redis

from .errors import (InvalidArgumentError, OutcomeUnknownError, OutOfMemoryError, ServerUnavailableError,
                     StaleTokenError, from_reply)
from .ids import check_job_id
from .keys import QueueKeys
from .outcome import Leases, ReplyLost, Row, judge, send_once
from .scripts import Client, Scripts
from . import verbs
from .verbs import ScriptCall

__all__ = ["Queue", "Job", "DEFAULT_MAX_PAYLOAD", "DEFAULT_REAP_LIMIT", "job_of_reply", "leased", "settle",
           "EvictionWarning", "eviction_policy"]

DEFAULT_MAX_PAYLOAD = 1 << 20
DEFAULT_REAP_LIMIT = 100
INT31 = 2**31 - 1
INT53 = 2**53
MAX_LIMIT = 100_000
MAX_SENDS = 3  # a complete or retry shown not to have landed is sent again, this many times in all


@dataclass(frozen=True)
class Job:
    id: str
    payload: bytes
    token: int


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    # bool is an int to Python but never what a caller meant by a lease.
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise InvalidArgumentError(f"{name} must be from {lo} to {hi}, got {value}")
    return value


def check_bytes(name: str, value: object, cap: int) -> bytes:
    if isinstance(value, str):
        value = value.encode("utf-8")
    elif isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    if not isinstance(value, bytes):
        raise InvalidArgumentError(f"{name} must be bytes or str, got {type(value).__name__}")
    if len(value) > cap:
        raise InvalidArgumentError(f"{name} is {len(value)} bytes, over the cap of {cap}; nothing was sent")
    return value


@contextmanager
def wire_errors(client: Client) -> Iterator[None]:
    """Turn the server's error replies and connection failures into the tree."""
    try:
        yield
    except redis.exceptions.OutOfMemoryError as exc:
        # Scripts check maxmemory only before their first write, so a refused
        # call wrote nothing: the OOM reply is all-or-nothing like any other.
        raise OutOfMemoryError(f"OOM server {describe(client)} is out of memory: {exc}") from None
    except redis.exceptions.ResponseError as exc:
        # Every error reply lands in the tree: an unknown one as ServerReplyError.
        raise from_reply(str(exc)) from None
    except redis.exceptions.AuthenticationError as exc:
        # Without a password redis-py's HELLO gets a reply about HELLO; say what is wrong.
        # A cluster client has no pool of its own to ask, so it gets the answer that covers both.
        pool = getattr(client, "connection_pool", None)
        given = pool.connection_kwargs.get("password") if pool is not None else True
        why = "it needs a password and none was given" if not given else "it refused the user or password"
        raise ServerUnavailableError(f"server {describe(client)} unavailable: {why} ({exc})") from exc
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise ServerUnavailableError(f"server {describe(client)} unavailable: {exc}") from exc


class EvictionWarning(UserWarning):
    """The server may evict keys under memory pressure: a job row can vanish."""


def eviction_policy(client: Any) -> str | None:
    """The server's maxmemory-policy, or None when it cannot be read (an ACL
    without CONFIG, a managed server): on a cluster, the first node's that is
    not noeviction."""
    try:
        got = client.config_get("maxmemory-policy")
    except redis.exceptions.RedisError:
        return None
    values = got.values() if isinstance(got, dict) else ()
    # A RedisCluster answers per node ({node: {name: value}}) or merged, by version.
    found = [v for v in values if not isinstance(v, dict)] + [
        x for v in values if isinstance(v, dict) for x in v.values()]
    policies = [x.decode() if isinstance(x, bytes) else str(x) for x in found]
    return next((p for p in policies if p != "noeviction"), policies[0] if policies else None)


def warn_if_evicting(client: Any) -> None:
    """BullMQ's start-up warning, here: under any policy but noeviction the
    server may drop a job row to make room, and the job is then damaged (it
    goes to the dead set when a script meets it: docs/contract.md)."""
    policy = eviction_policy(client)
    if policy is not None and policy != "noeviction":
        warnings.warn(f"server {describe(client)} has maxmemory-policy {policy}: it may evict job rows; "
                      "set maxmemory-policy noeviction so that a full server refuses enqueues instead",
                      EvictionWarning, stacklevel=3)


def describe(client: Any) -> str:
    """Where a client points: a redis.Redis, or a RedisCluster (no pool of its own)."""
    pool = getattr(client, "connection_pool", None)
    if pool is None:  # a RedisCluster: one pool per node, none of its own
        node = client.get_default_node()
        return f"cluster via {node.host}:{node.port}" if node is not None else "cluster"
    kw = pool.connection_kwargs
    if "path" in kw:
        return str(kw["path"])
    return f"{kw.get('host', '?')}:{kw.get('port', '?')}"


class Queue:
    """One queue's verbs. Scripts load when the queue is made, so the first
    timed call never pays for a NOSCRIPT round trip.

    claim, complete and retry are never resent blindly, whatever the
    client's retry settings: each is sent once, and when its reply is lost
    (a reset, a timeout) the server's state decides what to report
    (`echomq.outcome`, docs/design/outcomes.md). A complete that landed is
    reported completed, never stale; one that did not land because the lease
    was lost is reported stale; when the state cannot tell, the call raises
    `OutcomeUnknownError`. A claim whose reply was lost raises
    `OutcomeUnknownError`: the job it may have leased returns to pending
    when that lease expires. The other verbs keep the client's retries:
    enqueue, promote and reap are safe to run twice.

    `leases` remembers when each claim that handed out a job was sent (this
    Queue's and its Worker's, through `leased`): it is what proves a lost
    complete landed."""

    def __init__(
        self,
        client: redis.Redis,
        name: str,
        *,
        max_attempts: int = 3,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD,
        lua_dir: Path | str | None = None,
    ) -> None:
        self.keys = QueueKeys(name)
        self.name = name
        self.max_attempts = check_int("max_attempts", max_attempts, 1, INT31)
        self.max_payload_bytes = check_int("max_payload_bytes", max_payload_bytes, 0, 512 << 20)
        if client.get_encoder().decode_responses:
            raise InvalidArgumentError("Queue needs a client with decode_responses=False: payloads are bytes")
        self.client = client
        with wire_errors(client):
            self.scripts = Scripts(client, lua_dir)
        self.leases = Leases()
        warn_if_evicting(client)

    def _run(self, call: ScriptCall) -> Any:
        # A script's reply has the shape its header promises, not a type redis-py knows.
        with wire_errors(self.client):
            return self.scripts[call.verb](keys=call.keys, args=call.args, client=self.client)

    def enqueue(self, job_id: str, payload: bytes | str) -> str:
        check_job_id(job_id)
        data = check_bytes("payload", payload, self.max_payload_bytes)
        return _text(self._run(verbs.enqueue(self.keys, job_id, data)))

    def browse(self, limit: int = 10, state: Literal["pending", "dead"] = "pending") -> list[str]:
        check_int("limit", limit, 1, MAX_LIMIT)
        if state not in ("pending", "dead"):
            raise InvalidArgumentError(f"browse state must be 'pending' or 'dead', got {state!r}")
        key = self.keys.pending if state == "pending" else self.keys.dead
        with wire_errors(self.client):
            ids = self.client.zrange(key, "+", "-", desc=True, bylex=True, offset=0, num=limit)
        return [_text(i) for i in ids]

    def pending_size(self) -> int:
        with wire_errors(self.client):
            return int(self.client.zcard(self.keys.pending))

    def claim(self, lease_ms: int) -> Job | None:
        check_int("lease_ms", lease_ms, 1, INT31)
        sent = time.monotonic()
        try:
            reply = _send_once(self, verbs.claim(self.keys, lease_ms))
        except ReplyLost as lost:
            raise OutcomeUnknownError(
                f"claim on {self.name}: the reply was lost ({lost}); a job it may have leased returns to "
                f"pending once its lease of {lease_ms} ms expires and reap runs") from lost.__cause__
        return leased(self, reply, sent, lease_ms)

    def complete(self, job_id: str, token: int) -> str:
        check_job_id(job_id)
        check_int("token", token, 1, INT53)
        return settle(self, verbs.complete(self.keys, job_id, token))

    def retry(self, job_id: str, token: int, error: str | bytes, delay_ms: int = 0) -> str:
        check_job_id(job_id)
        check_int("token", token, 1, INT53)
        text = check_bytes("error", error, self.max_payload_bytes)
        check_int("delay_ms", delay_ms, 0, INT31)
        return settle(self, verbs.retry(self.keys, job_id, token, text, delay_ms, self.max_attempts))

    def promote(self, limit: int = 100) -> int:
        check_int("limit", limit, 1, MAX_LIMIT)
        return int(self._run(verbs.promote(self.keys, limit)))

    def reap(self, limit: int = DEFAULT_REAP_LIMIT) -> int:
        check_int("limit", limit, 1, MAX_LIMIT)
        return int(self._run(verbs.reap(self.keys, limit, self.max_attempts)))


def job_of_reply(reply: Any) -> Job | None:
    """The Job a claim's reply hands out; None when the queue was empty."""
    if not reply:
        return None
    job_id, payload, token = reply
    return Job(_text(job_id), payload if payload is not None else b"", int(token))


def leased(queue: Queue, reply: Any, sent: float, lease_ms: int) -> Job | None:
    """The Job a claim's reply hands out, its lease remembered as taken at
    `sent` (the monotonic time the claim went out): Queue.claim and the
    Worker's pipelined claims both come through here."""
    job = job_of_reply(reply)
    if job is not None:
        queue.leases.add(job.id, job.token, sent, lease_ms)
    return job


def settle(queue: Queue, call: ScriptCall, lost: Exception | None = None) -> str:
    """Send a complete or retry call once; when its reply is lost, let the row
    decide (see Queue's docstring): the reply it had, StaleTokenError or
    OutcomeUnknownError. With `lost`, the call was already sent once (in a
    Worker's pipeline) and its reply lost: the row is read first, and the
    call is sent again only when the row shows it did not land."""
    fence = verbs.fence(call)
    job_id, token = fence.job_id, fence.token
    for sends in range(MAX_SENDS):
        if sends > 0 or lost is None:
            try:
                reply = _text(_send_once(queue, call))
                queue.leases.drop(job_id, token)
                return reply
            except ReplyLost as exc:
                lost = exc
            except StaleTokenError:
                if lost is None:  # sent once and refused: the lease is gone
                    queue.leases.drop(job_id, token)
                    raise
            except ServerUnavailableError as exc:
                if lost is None:  # nothing was sent
                    raise
                raise OutcomeUnknownError(f"{call.verb} {job_id} token {token}: a reply was lost ({lost}) and "
                                          f"the server is out of reach: {exc}") from exc
        verdict = judge(call, _row(queue, call, job_id, lost), queue.leases.live(job_id, token))
        if verdict.kind == "not_landed":
            continue
        queue.leases.drop(job_id, token)
        if verdict.kind == "landed":
            return verdict.reply
        if verdict.kind == "stale":
            raise StaleTokenError(f"EMQSTALE token {token} does not hold the lease on {job_id} (a reply was "
                                  f"lost; {verdict.why})", code="EMQSTALE")
        raise OutcomeUnknownError(f"{call.verb} {job_id} token {token}: a reply was lost ({lost}) and the "
                                  f"server cannot tell whether it landed: {verdict.why}")
    raise OutcomeUnknownError(f"{call.verb} {job_id} token {token}: sent {MAX_SENDS} times, no reply ({lost})")


def _send_once(queue: Queue, call: ScriptCall) -> Any:
    with wire_errors(queue.client):
        return send_once(queue.client, queue.scripts.sha(call.verb), call,
                         lambda: queue.scripts.load(queue.client))


def _row(queue: Queue, call: ScriptCall, job_id: str, lost: Exception | None) -> Row | None:
    """The job's row as the judges read it, asked with the client's own retries."""
    try:
        state, attempts, last_error = queue.client.hmget(queue.keys.job(job_id), "state", "attempts", "last_error")
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise OutcomeUnknownError(f"{call.verb} {job_id}: a reply was lost ({lost}) and the server could "
                                  f"not be asked what happened: {exc}") from exc
    if state is None:
        return None
    return Row(_text(state), int(attempts or 0), last_error if isinstance(last_error, bytes) else None)


def _text(value: object) -> str:
    return value.decode("ascii") if isinstance(value, bytes) else str(value)
