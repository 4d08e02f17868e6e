"""The error tree, drawn once.

    EchoMQError                     every failure the client raises
    ├── StaleTokenError             EMQSTALE: the token no longer holds the lease
    ├── WrongKindError              EMQKIND: an id of another kind (also ValueError)
    ├── InvalidArgumentError        EMQID, EMQARG: a malformed id or argument (also ValueError)
    ├── ServerUnavailableError      the server could not be reached in time
    │   ├── RepliesLostError        the connection failed after calls were written:
    │   │                           the calls whose replies were lost may have run
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
    │                               number): what it named is left to the server
    └── ServerReplyError            any other error reply (NOPERM, BUSY, a script error),
                                    with the server's message

Wire errors are error replies whose first word is the code; `from_reply`
maps them through one dict, and every reply no code names to
ServerReplyError, so no call of the client raises outside this tree.
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
    "SlotMigratingError",
    "OutcomeUnknownError",
    "OutOfMemoryError",
    "KeyspaceDamageError",
    "MalformedReplyError",
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
    """One call or a pipeline went out, and its connection failed before
    every reply came back. `replies` has one entry per call: its reply where
    it was read, None at the positions in `lost`, whose calls may or may not
    have run. Raised by the client's once-only senders; `Queue` and `Worker`
    judge each lost complete, retry and enqueue from the job's row."""

    def __init__(self, message: str, replies: list[Any], lost: tuple[int, ...]) -> None:
        super().__init__(message)
        self.replies = replies
        self.lost = lost


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
    lease expires."""

    code = "EMQMALFORMED"


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
