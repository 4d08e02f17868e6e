"""Queue: the eight verbs of the echomq contract over one redis-py client."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import time
from typing import Any, Literal

import redis

from .args import INT31, INT53, MAX_LIMIT, check_bytes, check_int
from .errors import (InvalidArgumentError, MalformedReplyError, OutcomeUnknownError, RepliesLostError,
                     ServerUnavailableError, StaleTokenError)
from .ids import check_job_id
from .keys import QueueKeys
from .evidence import current_identity, follow_owner, judge_read, owner
from .outcome import Identity, Leases, LostReplyOutcome, Row, ServerClock, judge, judge_enqueue, send_once
from .scripts import Scripts
from . import verbs
from .verbs import ScriptCall
from .wire import check_eviction, wire_errors

__all__ = ["Queue", "Job", "DEFAULT_MAX_PAYLOAD", "DEFAULT_REAP_LIMIT", "DEFAULT_JUDGE_TIMEOUT_MS", "job_of_reply",
           "buried", "leased", "settle"]

DEFAULT_MAX_PAYLOAD = 1 << 20
DEFAULT_REAP_LIMIT = 100
MAX_SENDS = 3  # a complete or retry shown not to have landed is sent again, this many times in all
# How long the client may spend finding out what a call whose reply was lost did,
# its reads of the row and of the server's identity included; then OutcomeUnknownError.
DEFAULT_JUDGE_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class Job:
    id: str
    payload: bytes
    token: int


class Queue:
    """One queue's verbs. Scripts load when the queue is made, so the first
    timed call never pays for a NOSCRIPT round trip.

    enqueue, claim, complete and retry are never resent blindly, whatever
    the client's retry settings: each is sent once, and when its reply is
    lost (a reset, a timeout) the server's state decides what to report
    (`echomq.outcome`, docs/design/outcomes.md). A complete that landed is
    reported completed, never stale; one that did not land because the lease
    was lost is reported stale; when the state cannot tell, the call raises
    `OutcomeUnknownError`. A claim whose reply was lost raises
    `OutcomeUnknownError`: the job it may have leased returns to pending
    when that lease expires. An enqueue whose reply was lost is judged from
    the job's row: a resend could run a job twice, as completion deletes the
    row that makes enqueue idempotent. promote and reap keep the client's
    retries: they are safe to run twice.

    `leases` remembers when each claim that handed out a job was sent (this
    Queue's and its Worker's, through `leased`), and `identity` which server
    answered it: together they prove a lost complete landed.

    On a RedisCluster a connection failure of enqueue, claim, complete or
    retry reads the slot map again before the call reports it
    (`echomq.outcome.refresh_slots`), so after a failover the next call goes
    to the promoted replica even when the process makes no other call."""

    def __init__(
        self,
        client: redis.Redis,
        name: str,
        *,
        max_attempts: int = 3,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD,
        lua_dir: Path | str | None = None,
        judge_timeout_ms: int = DEFAULT_JUDGE_TIMEOUT_MS,
        accept_eviction: str | None = None,
    ) -> None:
        self.keys = QueueKeys(name)
        self.name = name
        self.max_attempts = check_int("max_attempts", max_attempts, 1, INT31)
        self.max_payload_bytes = check_int("max_payload_bytes", max_payload_bytes, 0, 512 << 20)
        self.judge_timeout_s = check_int("judge_timeout_ms", judge_timeout_ms, 1, INT31) / 1000.0
        if accept_eviction is not None and not isinstance(accept_eviction, str):
            raise InvalidArgumentError(f"accept_eviction must be a policy name, got {type(accept_eviction).__name__}")
        if client.get_encoder().decode_responses:
            raise InvalidArgumentError("Queue needs a client with decode_responses=False: payloads are bytes")
        self.client = client
        check_eviction(client, accept_eviction)
        with wire_errors(client):
            self.scripts = Scripts(client, lua_dir)
        self.leases = Leases()
        self.identity: Identity | None = None
        # The server's clock as last read with the identity: leases carry it, so
        # that a forward step of the server's clock voids their proof.
        self.clock: ServerClock | None = None
        self.judge_client: redis.Redis | None = None  # made at the first judging (_judge_client)
        # On a cluster, the node `identity` was read from: a claim the slot map
        # sends elsewhere (after a failover) reads the identity there first.
        self.identity_node: str | None = None
        current_identity(self)

    def _run(self, call: ScriptCall) -> Any:
        # A script's reply has the shape its header promises, not a type redis-py knows.
        with wire_errors(self.client):
            return self.scripts[call.verb](keys=call.keys, args=call.args, client=self.client)

    def enqueue(self, job_id: str, payload: bytes | str) -> str:
        check_job_id(job_id)
        data = check_bytes("payload", payload, self.max_payload_bytes)
        call = verbs.enqueue(self.keys, job_id, data)
        try:
            return _text(_send_once(self, call))
        except RepliesLostError as lost:
            outcome = judge_enqueue(_row(self, call, job_id, lost, time.monotonic() + self.judge_timeout_s), data)
            if outcome.kind != "landed":
                raise _unknown(call, job_id, lost, outcome) from lost.__cause__
        return outcome.reply

    def browse(self, limit: int = 10, state: Literal["pending", "dead"] = "pending") -> list[str]:
        """The newest ids in pending or the dead set. A member no enqueue could
        have written (not ASCII) is shown with backslash escapes."""
        limit = check_int("limit", limit, 1, MAX_LIMIT)
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
        """The oldest pending job under a lease of `lease_ms`; None when pending is
        empty. A claim that buried its scan limit of damaged ids handed out
        nothing though jobs may wait behind them, so another claim is sent."""
        lease_ms = check_int("lease_ms", lease_ms, 1, INT31)
        while True:
            node = follow_owner(self)
            sent = time.monotonic()
            try:
                reply = _send_once(self, verbs.claim(self.keys, lease_ms), node)
            except RepliesLostError as lost:
                raise OutcomeUnknownError(
                    f"claim on {self.name}: the reply was lost ({lost}); a job it may have leased returns to "
                    f"pending once its lease of {lease_ms} ms expires and reap runs") from lost.__cause__
            if not buried(reply):
                return leased(self, reply, sent, lease_ms)

    def complete(self, job_id: str, token: int) -> str:
        check_job_id(job_id)
        token = check_int("token", token, 1, INT53)
        return settle(self, verbs.complete(self.keys, job_id, token))

    def retry(self, job_id: str, token: int, error: str | bytes, delay_ms: int = 0) -> str:
        check_job_id(job_id)
        token = check_int("token", token, 1, INT53)
        text = check_bytes("error", error, self.max_payload_bytes)
        delay_ms = check_int("delay_ms", delay_ms, 0, INT31)
        return settle(self, verbs.retry(self.keys, job_id, token, text, delay_ms, self.max_attempts))

    def promote(self, limit: int = 100) -> int:
        limit = check_int("limit", limit, 1, MAX_LIMIT)
        return int(self._run(verbs.promote(self.keys, limit)))

    def reap(self, limit: int = DEFAULT_REAP_LIMIT) -> int:
        limit = check_int("limit", limit, 1, MAX_LIMIT)
        return int(self._run(verbs.reap(self.keys, limit, self.max_attempts)))


def buried(reply: Any) -> bool:
    """Whether a claim's reply says it buried its scan limit of damaged ids
    and handed out nothing: more jobs may wait, so claim again."""
    return isinstance(reply, int) and not isinstance(reply, bool) and reply > 0


def job_of_reply(reply: Any) -> Job | None:
    """The Job a claim's reply hands out; None when the queue was empty, or
    when the claim buried damaged ids instead (`buried`).
    MalformedReplyError when the reply is not the contract's {id, payload,
    token}: the scripts bury any member that is not a JOB id before handing
    it out, so this is a script or server of another version."""
    if not reply or buried(reply):
        return None
    try:
        job_id, payload, token = reply
        job = Job(job_id.decode("ascii") if isinstance(job_id, bytes) else str(job_id),
                  payload if payload is not None else b"", int(token))
        check_job_id(job.id)
    except (ValueError, TypeError) as exc:  # UnicodeDecodeError and InvalidArgumentError are ValueErrors
        raise MalformedReplyError(f"claim replied {_shown(reply)}, not {{id, payload, token}} with a JOB id "
                                  f"({exc}); the job it leased returns through reap when the lease expires") from None
    return job


def leased(queue: Queue, reply: Any, sent: float, lease_ms: int) -> Job | None:
    """The Job a claim's reply hands out, its lease remembered as taken at
    `sent` (the monotonic time the claim went out) on the server the Queue
    knows: Queue.claim and the Worker's pipelined claims both come through here."""
    job = job_of_reply(reply)
    if job is not None:
        queue.leases.add(job.id, job.token, sent, lease_ms, queue.identity, queue.clock)
    return job


def settle(queue: Queue, call: ScriptCall, lost: Exception | None = None, deadline: float | None = None) -> str:
    """Send a complete or retry call once; when its reply is lost, let the row
    decide (see Queue's docstring): the reply it had, StaleTokenError or
    OutcomeUnknownError. With `lost`, the call was already sent once (in a
    Worker's pipeline) and its reply lost: the row is read first, and the
    call is sent again only when the row shows it did not land. The judging
    ends by `deadline` (a time.monotonic() instant), by default the Queue's
    judge_timeout_ms after the loss."""
    fence = verbs.fence(call)
    job_id, token = fence.job_id, fence.token
    if deadline is None and lost is not None:
        deadline = time.monotonic() + queue.judge_timeout_s
    for sends in range(MAX_SENDS):
        if sends > 0 or lost is None:
            try:
                reply = _text(_send_once(queue, call))
                queue.leases.drop(job_id, token)
                return reply
            except RepliesLostError as exc:
                lost = exc
                deadline = deadline or time.monotonic() + queue.judge_timeout_s
            except StaleTokenError:
                if lost is None:  # sent once and refused: the lease is gone
                    queue.leases.drop(job_id, token)
                    raise
            except ServerUnavailableError as exc:
                if lost is None:  # nothing was sent
                    raise
                raise OutcomeUnknownError(f"{call.verb} {job_id} token {token}: a reply was lost ({lost}) and "
                                          f"the server is out of reach: {exc}") from exc
        assert deadline is not None  # set by the loss that brought the call here
        row = _row(queue, call, job_id, lost, deadline)
        identity = current_identity(queue, deadline=deadline)
        outcome = judge(call, row, queue.leases.live(job_id, token, identity, queue.clock))
        if outcome.kind == "not_landed":
            continue
        queue.leases.drop(job_id, token)
        if outcome.kind == "landed":
            return outcome.reply
        if outcome.kind == "stale":
            raise StaleTokenError(f"EMQSTALE token {token} does not hold the lease on {job_id} (a reply was "
                                  f"lost; {outcome.why})", code="EMQSTALE")
        raise _unknown(call, f"{job_id} token {token}", lost, outcome)
    raise OutcomeUnknownError(f"{call.verb} {job_id} token {token}: sent {MAX_SENDS} times, no reply ({lost})")


def _send_once(queue: Queue, call: ScriptCall, node: Any = None) -> Any:
    with wire_errors(queue.client):
        return send_once(queue.client, queue.scripts.sha(call.verb), call,
                         lambda: queue.scripts.load(queue.client), node)


def _row(queue: Queue, call: ScriptCall, job_id: str, lost: Exception | None, deadline: float) -> Row | None:
    """The job's row as the judges read it, asked until `deadline`."""
    fields = ("state", "attempts", "last_error") + (("payload",) if call.verb == "enqueue" else ())
    try:
        state, attempts, last_error, *payload = judge_read(queue, ("HMGET", queue.keys.job(job_id), *fields),
                                                            owner(queue), deadline)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ServerUnavailableError) as exc:
        raise OutcomeUnknownError(f"{call.verb} {job_id}: a reply was lost ({lost}) and the server could "
                                  f"not be asked what happened within {queue.judge_timeout_s:g} s: {exc}") from exc
    except redis.exceptions.ResponseError as exc:  # the row's key holds another type
        raise OutcomeUnknownError(f"{call.verb} {job_id}: a reply was lost ({lost}) and the row cannot be "
                                  f"read: {exc}") from exc
    if state is None:
        return None
    return Row(_text(state), _whole(attempts), last_error if isinstance(last_error, bytes) else None,
               payload[0] if payload and isinstance(payload[0], bytes) else None)


def _unknown(call: ScriptCall, subject: str, lost: Exception, outcome: LostReplyOutcome) -> OutcomeUnknownError:
    return OutcomeUnknownError(f"{call.verb} {subject}: a reply was lost ({lost}) and the server cannot tell "
                               f"whether it landed: {outcome.why}")


def _whole(value: object) -> int:
    # A row's attempts no script wrote reads as -1: never equal to a token, so never "ours".
    try:
        return int(value) if isinstance(value, (bytes, str)) else 0
    except ValueError:
        return -1


def _text(value: object) -> str:
    return value.decode("ascii", "backslashreplace") if isinstance(value, bytes) else str(value)


def _shown(reply: Any) -> str:
    text = repr(reply)
    return text if len(text) <= 120 else text[:117] + "..."
