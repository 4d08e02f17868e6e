"""Calls that must not be resent blindly, and what a call whose reply was lost did.

claim, complete and retry change the queue each time they run. redis-py
resends a command whose connection dropped or timed out (its default Retry),
and a resend of a complete that had already landed is answered EMQSTALE: the
worker would hear "lost" for a job that is done. So `Queue` sends these
three itself, once per attempt, on a connection from the client's own pool
(`send_once`), and when the reply is lost it asks the server what happened
instead of guessing (docs/design/outcomes.md):

- claim: the job it may have leased cannot be named, so the call raises
  `OutcomeUnknownError`; such a job returns to pending when its lease
  expires and reap runs.
- complete and retry: the job's row is read (HMGET, an idempotent read that
  keeps the client's retries) and judged by `judge_complete` /
  `judge_retry`: landed (the reply it would have had), not landed and still
  ours (sent again), stale (the lease is gone and the call did not land) or
  unknown (`OutcomeUnknownError`).

- enqueue: the row is read. It holds our payload: the job is in the
  queue ("enqueued"). It holds another: the id was taken ("duplicate").
  It is absent: either the enqueue never ran, or it ran and a worker has
  since claimed and completed the job, which deletes its row, so the call
  raises `OutcomeUnknownError`; sending it again could run the job twice.

On a RedisCluster these calls go past the client's own command path, which
is the one that reads the slot map again after a connection failure; so
`send_once` does that itself (`refresh_slots`). Otherwise, after a
failover, a process that only claims and completes would keep sending to
the dead master.

A complete deletes its row, so an absent row alone does not say whose
complete deleted it. `Leases` remembers when this Queue sent each claim:
while the lease that claim took cannot have expired, no other worker can
have held the job, so an absent row means our own call landed. That holds
only on the dataset the claim was made on. A server that restarted empty,
a replica promoted in its place, or a master that resynced from another
also shows an absent row, so each lease keeps the server's `Identity` at
its claim, and an absence proves nothing once the identity has changed.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Sequence

import redis

from . import verbs
from .errors import RepliesLostError
from .scripts import Command, send_reloading
from .verbs import ScriptCall
from .wire import REPLIES, describe

__all__ = ["send_once", "send_all_once", "refresh_slots", "Row", "LostReplyOutcome", "Identity", "judge",
           "judge_complete", "judge_retry", "judge_enqueue", "Leases", "ServerClock", "LEASE_SAFETY", "REAP_ERROR"]

# A lease is trusted for this share of its length, less LEASE_SLACK_S: the
# server times leases with its own clock, this side with its monotonic one.
LEASE_SAFETY = 0.9
LEASE_SLACK_S = 0.01
MAX_LEASES = 100_000
REAP_ERROR = b"lease expired"  # what reap writes as last_error when it buries a job


def send_once(client: Any, sha: str, call: ScriptCall, load: Callable[[], None], node: Any = None) -> Any:
    """EVALSHA once, never resent after it may have reached the server.

    A failure to get a connection sent nothing and raises redis-py's own
    error; a failure after sending began raises RepliesLostError. NOSCRIPT
    ran nothing: the scripts are loaded (`load`) and the call sent again
    (`echomq.scripts.send_reloading`).

    On a RedisCluster the call goes to `node`, by default the master the
    client's slot map gives the call's first key. A connection failure there
    reads the slot map again (`refresh_slots`) before it is raised: the call
    is not resent, but the next one goes to whichever master owns the slot
    now, as after a failover."""
    target = client
    if isinstance(client, redis.RedisCluster):
        if node is None:
            node = client.get_node_from_key(call.keys[0])  # type: ignore[no-untyped-call]
        target = client.get_redis_connection(node)
    command = call.evalsha(sha)
    try:
        return _raised(send_reloading(lambda commands: _sent(client, node, target, commands), load, [command])[0])
    except (redis.exceptions.MovedError, redis.exceptions.AskError):
        # Nothing ran: the slot is elsewhere. The cluster client follows the
        # redirect and refreshes its slot map (with its usual resends).
        return client.execute_command(*command)


def _sent(client: Any, node: Any, target: redis.Redis, commands: Sequence[Command]) -> list[Any]:
    """`send_all_once`; on a cluster (`node` set), the slot map read again
    after the connection to `node` failed."""
    try:
        return send_all_once(target, commands)
    except (redis.exceptions.AuthenticationError, redis.exceptions.BusyLoadingError,
            redis.exceptions.MaxConnectionsError):
        raise  # the node is there: refused credentials, loading its dataset, or this client's own pool is full
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, RepliesLostError):
        if node is not None:
            refresh_slots(client, node)
        raise


def refresh_slots(client: redis.RedisCluster, node: Any) -> None:
    """What RedisCluster does after a connection failure of its own
    (`_execute_command`), for the calls `send_once` sends past it: `node`'s
    idle connections are dropped and those in use marked to reconnect, it
    goes last among the nodes asked, and the slot map is read again from the
    cluster. Until a replica is promoted the map still names the dead master,
    so each failure asks again. A map no node answers leaves the old one: the
    caller raises the failure it had, not this one."""
    pool = node.redis_connection.connection_pool if node.redis_connection is not None else None
    if pool is not None:
        pool.update_active_connections_for_reconnect()
        pool.disconnect_free_connections()
    manager = client.nodes_manager
    manager.move_node_to_end_of_cached_nodes(node.name)
    try:
        manager.initialize(last_failed_node_name=node.name)
    except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError):
        pass


def send_all_once(target: redis.Redis, commands: Sequence[Command], *, deadline: float | None = None) -> list[Any]:
    """The commands in one write on one connection of the client's own pool,
    each reply read once; an error reply comes back in its place as
    redis-py's exception, LOADING too (redis-py raises it as a
    ConnectionError, but it is a refusal: the replies after it are read all
    the same). Never resent: redis-py's `execute_command` and
    `Pipeline.execute` both run inside the connection's Retry, which after a
    ConnectionError or TimeoutError reconnects and sends everything again,
    though the server may have run it. Connecting keeps that Retry (nothing
    has been sent yet), and an argument redis-py cannot encode sends
    nothing. A failure after the write began (a reset, a timeout, a reply
    redis-py cannot parse) drops the connection, whose bytes no longer line
    up with the calls, and raises RepliesLostError, with the replies read
    before and the rest lost.

    With `deadline` (a time.monotonic() instant) no reply is waited for past
    it: a reply not yet buffered is awaited with the connection's
    `can_read` for the time left, and one not there by then is lost as after
    a timeout. Without it each read waits as the client's socket_timeout
    says, with no call beyond the read itself."""
    with _connection(target) as conn:
        packed = conn.pack_commands(commands)
        replies: list[Any] = []
        try:
            conn.send_packed_command(packed)
            for command in commands:
                replies.append(_read_reply(target, conn, command[0], deadline))
        except (redis.exceptions.RedisError, OSError, UnicodeDecodeError) as exc:
            conn.disconnect()
            heard, sent = len(replies), len(commands)
            raise RepliesLostError(
                f"server {describe(target)} unavailable: after {_calls(sent)} went out, {_calls(sent - heard)} "
                f"lost their replies and may have run ({type(exc).__name__}: {exc}); the connection was dropped",
                replies + [None] * (sent - heard), tuple(range(heard, sent))) from exc
        return replies


def _read_reply(target: redis.Redis, conn: Any, command: Any, deadline: float | None) -> Any:
    """One reply, or the error reply in its place, with the callback
    `Redis.parse_response` would give it. Read with disconnect_on_error=False:
    redis-py would drop the connection on the LOADING it raises, and with it
    the replies still to come; any failure that is not a reply is the
    caller's to drop the connection for."""
    try:
        if deadline is None:
            response = conn.read_response(disconnect_on_error=False)
        elif conn.can_read(timeout=max(deadline - time.monotonic(), 0.0)):
            # A reply begun but not whole is read under the time left too.
            response = conn.read_response(timeout=max(deadline - time.monotonic(), 0.0), disconnect_on_error=False)
        else:
            raise redis.exceptions.TimeoutError("no reply before the caller's deadline")
    except REPLIES as exc:
        return exc
    callback = target.response_callbacks.get(command)  # type: ignore[no-untyped-call]
    return callback(response) if callback is not None else response


def _calls(count: int) -> str:
    return "1 call" if count == 1 else f"{count} calls"


@contextmanager
def _connection(target: redis.Redis) -> Iterator[Any]:
    """A connection of the client's own pool, or a single-connection client's one."""
    own = target.connection
    if own is None:
        conn = target.connection_pool.get_connection()
        try:
            yield conn
        finally:
            target.connection_pool.release(conn)
        return
    lock = getattr(target, "single_connection_lock", None)
    if lock is not None:
        lock.acquire()
    try:
        yield own
    finally:
        if lock is not None:
            lock.release()


def _raised(reply: Any) -> Any:
    """A reply, or the error in its place raised: an error reply, or what stopped a reload."""
    if isinstance(reply, Exception):
        raise reply
    return reply


@dataclass(frozen=True)
class Row:
    """The fields of a job's row the judges read; None when the row is gone."""

    state: str
    attempts: int
    last_error: bytes | None = None
    payload: bytes | None = None


@dataclass(frozen=True)
class Identity:
    """Which server process, and which history of its dataset, answered.

    `run_id` is new each time a server starts, so a restart (empty without
    persistence, or reloaded from an older snapshot) changes it, as does a
    failover to another server. `replid` is the replication history: a
    replica promoted in place, or a master turned replica of another (which
    resyncs and drops its dataset), changes it with the same process."""

    run_id: str
    replid: str

    @classmethod
    def of(cls, info: dict[str, Any]) -> Identity | None:
        """From an INFO reply; None when the reply lacks either field."""
        run_id, replid = info.get("run_id"), info.get("master_replid")
        if run_id is None or replid is None:
            return None
        return cls(str(run_id), str(replid))


@dataclass(frozen=True)
class ServerClock:
    """The server's wall clock (INFO's server_time_usec) beside this process's
    monotonic clock, read together. A lease runs on the server's clock and is
    trusted on ours, so a server clock that steps forward (an operator's
    `date -s`, a VM resumed and corrected) expires leases early while ours
    still runs: two readings show by how much it moved ahead."""

    server_s: float
    local_s: float  # time.monotonic() when the reply was read

    @classmethod
    def of(cls, info: dict[str, Any], local_s: float) -> ServerClock | None:
        """From an INFO reply; None when the server does not report its time (before Redis 6.2)."""
        usec = info.get("server_time_usec")
        return cls(int(usec) / 1e6, local_s) if isinstance(usec, (int, str)) and str(usec).isdigit() else None

    def ahead_of(self, earlier: ServerClock) -> float:
        """How much further the server's clock moved than ours since `earlier`, in seconds."""
        return (self.server_s - earlier.server_s) - (self.local_s - earlier.local_s)


@dataclass(frozen=True)
class LostReplyOutcome:
    """What a call whose reply was lost did, as the server's row shows it."""

    kind: Literal["landed", "not_landed", "stale", "unknown"]
    reply: str = ""   # for landed: the reply the call would have had
    why: str = ""     # what the server showed, for messages


def judge_complete(row: Row | None, token: int, lease_live: bool) -> LostReplyOutcome:
    """A complete whose reply was lost. It deletes the row when it lands, and
    only the holder of the current token can delete it."""
    if row is None:
        if lease_live:
            return LostReplyOutcome("landed", "ok", "the row is gone while our lease was still running")
        return LostReplyOutcome("unknown",
                                why="the row is gone, and our lease may have expired and passed to another worker")
    if row.state == "active" and row.attempts == token:
        return LostReplyOutcome("not_landed", why="the job is still active under our token")
    return LostReplyOutcome("stale", why=f"the row stands, state {row.state}, attempts {row.attempts}: "
                                "a complete of ours would have deleted it")


def judge_retry(row: Row | None, token: int, error: bytes, max_attempts: int, lease_live: bool) -> LostReplyOutcome:
    """A retry whose reply was lost. When it lands the job goes to the schedule
    (token below max_attempts) or the dead set with our error; without it,
    the lease expires and reap returns the job to pending, or buries it
    with last_error "lease expired"."""
    landed = "scheduled" if token < max_attempts else "dead"
    if row is not None and row.attempts == token:
        if row.state == "active":
            return LostReplyOutcome("not_landed", why="the job is still active under our token")
        if row.state == "scheduled":
            return LostReplyOutcome("landed", "scheduled", "the job waits in the schedule under our token")
        if row.state == "dead" and error != REAP_ERROR:
            ours = row.last_error == error
            return LostReplyOutcome("landed" if ours else "stale", "dead" if ours else "",
                           f"the job is dead with last_error {row.last_error!r}")
    if row is not None and row.attempts < token:
        return LostReplyOutcome("unknown", why=f"the row shows attempts {row.attempts}, below our token {token}")
    if lease_live:
        # No reap can have touched the job: it moved on through our retry.
        return LostReplyOutcome("landed", landed, "the job moved on while our lease was still running")
    state = "gone" if row is None else f"{row.state}, attempts {row.attempts}"
    return LostReplyOutcome("unknown", why=f"the row is {state}, and our lease may have expired and been reaped")


def judge_enqueue(row: Row | None, payload: bytes) -> LostReplyOutcome:
    """An enqueue whose reply was lost. It writes the row when it lands, and
    completion deletes the row, so an absent row cannot tell "never ran"
    from "ran and completed already"."""
    if row is None:
        return LostReplyOutcome("unknown", why="the row is absent: the enqueue did not run, or it ran and the job was "
                                      "claimed and completed since, which deletes its row; sending it again "
                                      "could run the job twice")
    if row.payload == payload:
        return LostReplyOutcome("landed", "enqueued", f"the row holds this payload, state {row.state}")
    return LostReplyOutcome("landed", "duplicate", "the row holds another payload: the id was taken")


def judge(call: ScriptCall, row: Row | None, lease_live: bool) -> LostReplyOutcome:
    """What a complete or retry call whose reply was lost did, by its verb."""
    fence = verbs.fence(call)
    if call.verb == "retry" and fence.error is not None and fence.max_attempts is not None:
        return judge_retry(row, fence.token, fence.error, fence.max_attempts, lease_live)
    return judge_complete(row, fence.token, lease_live)


class Leases:
    """When this Queue sent each claim it got a job from: (id, token) -> the
    monotonic time until which that lease surely holds, the server's
    identity as the Queue knew it then, and the latest reading of the
    server's clock. Bounded: the oldest entries go first; a forgotten lease
    only means less can be proved."""

    def __init__(self, limit: int = MAX_LEASES) -> None:
        self._until: OrderedDict[tuple[str, int], tuple[float, Identity | None, ServerClock | None]] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def add(self, job_id: str, token: int, sent: float, lease_ms: int, identity: Identity | None,
            clock: ServerClock | None = None) -> None:
        until = sent + lease_ms / 1000 * LEASE_SAFETY - LEASE_SLACK_S
        with self._lock:
            self._until[(job_id, token)] = (until, identity, clock)
            while len(self._until) > self._limit:
                self._until.popitem(last=False)

    def live(self, job_id: str, token: int, identity: Identity | None, clock: ServerClock | None = None) -> bool:
        """Whether the lease surely still holds on the dataset it was taken on:
        its time has not run out, and the server now is the one it was
        claimed from (an unknown identity proves nothing). With the server's
        clock read now and at the claim, a forward step of it since counts
        as time the lease has run: the server reaps by its own clock."""
        with self._lock:
            entry = self._until.get((job_id, token))
        if entry is None or identity is None:
            return False
        until, claimed_on, then = entry
        ahead = max(0.0, clock.ahead_of(then)) if clock is not None and then is not None else 0.0
        return claimed_on == identity and time.monotonic() + ahead < until

    def drop(self, job_id: str, token: int) -> None:
        with self._lock:
            self._until.pop((job_id, token), None)
