"""The error tree, drawn once.

    EchoMQError                     every failure the client raises
    ├── StaleTokenError             EMQSTALE: the token no longer holds the lease
    ├── WrongKindError              EMQKIND: an id of another kind (also ValueError)
    ├── InvalidArgumentError        EMQID, EMQARG: a malformed id or argument (also ValueError)
    ├── ServerUnavailableError      the server could not be reached in time
    │   ├── RepliesLostError        the connection failed after calls were written,
    │   │                           or a reply could not be read or came past the
    │   │                           caller's deadline: the calls whose replies were
    │   │                           lost may have run
    │   ├── ServerBusyError         LOADING, BUSY: the server refused the call for
    │   │                           now (loading its dataset, running a script);
    │   │                           nothing ran
    │   └── SlotMigratingError      TRYAGAIN: the queue's cluster slot is moving to
    │                               another node and the call ran nothing; a later
    │                               call finds the keys
    ├── OutcomeUnknownError         claim, complete or retry lost its reply and the
    │                               server's state cannot tell whether it landed
    ├── OutOfMemoryError            OOM: maxmemory reached under noeviction; the
    │                               refused script wrote nothing
    ├── KeyspaceDamageError         EMQDAMAGE, WRONGTYPE: a queue key or job row holds
    │                               another type; the refused script moved nothing
    ├── MalformedReplyError         a reply the client cannot read as the contract's
    │                               (an id that is not ASCII, a token that is not a
    │                               number, a frame that is not RESP): what it named
    │                               is left to the server
    ├── EvictionPolicyError         the server may evict the queue's own keys (an
    │                               allkeys-* maxmemory-policy): no Queue is made on
    │                               it unless the caller accepts that policy by name
    └── ServerReplyError            any other error reply (NOPERM, a script error),
                                    with the server's message

Wire errors are error replies whose first word is the code; `from_reply`
maps them through one dict, and every reply no code names to
ServerReplyError, so no call of the client raises outside this tree.
What redis-py raises that is not an error reply is mapped by
`echomq.wire.wire_errors`: a lost connection, a reply it cannot parse, an
argument it cannot encode.
redis-py strips the server's own OOM code into its OutOfMemoryError, which
the Queue maps to ours; Redis 6.2 wraps an OOM refused inside a script as
"Error running script ... -OOM", which is mapped by that text.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EchoMQError",
    "StaleTokenError",
    "WrongKindError",
    "InvalidArgumentError",
    "ServerUnavailableError",
    "RepliesLostError",
    "ServerBusyError",
    "SlotMigratingError",
    "OutcomeUnknownError",
    "OutOfMemoryError",
    "KeyspaceDamageError",
    "MalformedReplyError",
    "EvictionPolicyError",
    "ServerReplyError",
    "WIRE_CODES",
    "from_reply",
]


class EchoMQError(Exception):
    code: str = "EMQ"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class StaleTokenError(EchoMQError):
    code = "EMQSTALE"


class WrongKindError(EchoMQError, ValueError):
    code = "EMQKIND"


class InvalidArgumentError(EchoMQError, ValueError):
    code = "EMQARG"


class ServerUnavailableError(EchoMQError):
    code = "EMQCONN"


class RepliesLostError(ServerUnavailableError):
    """One call or a pipeline went out, and not every reply came back: the
    connection failed, a reply could not be parsed, or the caller's deadline
    passed; the connection is dropped. `replies` has one entry per call: its
    reply where it was read, None at the positions in `lost`, whose calls
    may or may not have run. Raised by the client's once-only senders;
    `Queue` and `Worker` judge each lost complete, retry and enqueue from
    the job's row."""

    def __init__(self, message: str, replies: list[Any], lost: tuple[int, ...]) -> None:
        super().__init__(message)
        self.replies = replies
        self.lost = lost


class ServerBusyError(ServerUnavailableError):
    """The server refused the call for now, and nothing ran: LOADING (it is
    loading its dataset, after a start or a full resync) or BUSY (a script or
    function has run past busy-reply-threshold). `code` is the server's. The
    call may be sent again once the server answers: a claim or enqueue refused
    so never reached the queue."""

    code = "BUSY"


class SlotMigratingError(ServerUnavailableError):
    """TRYAGAIN: the queue's cluster slot is moving between nodes, and this
    node cannot serve the call whole now (some of its keys, or a job's row,
    may already be on the other node). The call ran nothing. The server
    answers it for the keys a call names; the scripts answer it for a row
    they found missing while the slot moves, instead of burying its job."""

    code = "TRYAGAIN"


class OutcomeUnknownError(EchoMQError):
    """A call that changes the queue may or may not have run: its reply was
    lost and the server's state cannot tell (never a wire code; the client
    raises it instead of a guess). Its worker should neither count the job
    done nor lost: the lease, when it expires, settles the job."""

    code = "EMQUNKNOWN"


class OutOfMemoryError(EchoMQError):
    code = "OOM"


class KeyspaceDamageError(EchoMQError):
    """A key of the queue or a job's row holds another type than the contract's:
    the script refused before it moved anything (docs/contract.md, damage)."""

    code = "EMQDAMAGE"


class MalformedReplyError(EchoMQError):
    """A reply that breaks the contract's shape, from a script of another
    version or a server that is not the one the Queue loaded scripts on. The
    call that got it may have changed the queue: a claim's job stays leased
    under a name the client cannot give, and returns through reap when the
    lease expires. Also a reply that is not RESP at all on redis-py's own
    command path (promote, reap, browse), after which redis-py dropped the
    connection; the once-only senders report that as RepliesLostError."""

    code = "EMQMALFORMED"


class EvictionPolicyError(EchoMQError):
    """The server's maxmemory-policy is allkeys-*: under memory pressure it
    evicts any key, the queue's sets included, and a job whose id is evicted
    from its set is left in no set. Raised when a Queue is made there, unless
    the caller passed that policy as `accept_eviction`."""

    code = "EMQEVICT"


class ServerReplyError(EchoMQError):
    """An error reply no echomq code names: the server's message, whole."""

    code = "EMQREPLY"


WIRE_CODES: dict[str, type[EchoMQError]] = {
    "EMQSTALE": StaleTokenError,
    "EMQKIND": WrongKindError,
    "EMQID": InvalidArgumentError,
    "EMQARG": InvalidArgumentError,
    "EMQDAMAGE": KeyspaceDamageError,
    "WRONGTYPE": KeyspaceDamageError,
    "OOM": OutOfMemoryError,
    "TRYAGAIN": SlotMigratingError,
    "LOADING": ServerBusyError,
    "BUSY": ServerBusyError,
}
# Codes a server wraps inside another reply: Redis 6.2 answers a command a
# script ran with "Error running script (call to f_...): @user_script:1:
# -OOM command not allowed ...", where 7.0 passes "OOM ..." through.
# A script that reads a key of a slot this node is handing over, when the
# key has already moved, is refused with "Script attempted to access a non
# local key in a cluster node": the call ran nothing (every script reads
# before its first write), as under TRYAGAIN.
WRAPPED_CODES: tuple[tuple[str, str], ...] = (("-OOM ", "OOM"), ("WRONGTYPE ", "WRONGTYPE"),
                                              ("access a non local key", "TRYAGAIN"))


def from_reply(message: str) -> EchoMQError:
    """The exception for an error reply: the class of its code, else ServerReplyError."""
    code = message.split(" ", 1)[0]
    if code not in WIRE_CODES:
        code = next((name for marker, name in WRAPPED_CODES if marker in message), code)
    cls = WIRE_CODES.get(code, ServerReplyError)
    return cls(message, code=code if cls is not ServerReplyError else None)
