"""Finding, expanding and loading the Lua scripts.

The verbs are discovered from the folder: `lua/<verb>-<numkeys>.lua`. A line
`--- @include "name"` is replaced by `lua/includes/name.lua` (BullMQ's
convention), so shared checks are written once and every script stays one
self-contained text with one SHA. An include may include others; each is
expanded once per script, where it is first named, so a helper two includes
rely on is defined once (a second copy would cost a closure on every call).
A cycle of includes is an error.

redis-py's Script already computes the SHA locally, tries EVALSHA first and
reloads on NOSCRIPT; `Scripts` wraps it and loads everything up front, so no
timed call ever pays for the fallback. The calls the client sends past a
Script (once only, or pipelined) and the Locust wire's held connections
reload through `send_reloading`, which resends only the calls answered
NOSCRIPT: they alone surely ran nothing.

On a cluster the same holds: redis-py's RedisCluster sends SCRIPT LOAD to
every primary and EVALSHA to the node owning the keys' slot (all keys of a
queue share the `{q}` tag). A replica promoted by a failover may lack a
script (SCRIPT LOAD is not replicated); the NOSCRIPT fallback reloads it.
One gap: redis-py (8.1 and earlier) refuses `evalsha` on a cluster
pipeline (redis-py#2914) although it routes EVALSHA by its keys, so calls on
a ClusterPipeline go through `evalsha()` below, i.e. `execute_command`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from typing import Any, Callable, Iterable, Sequence

import redis
from redis.cluster import ClusterPipeline
from redis.commands.core import Script

from .errors import EchoMQError, RepliesLostError

__all__ = ["ScriptSource", "lua_dir", "discover", "Scripts", "evalsha", "send_reloading", "Client", "Command",
           "Send"]

# A server or a cluster: every verb is one script on one hash tag, so either serves.
Client = redis.Redis | redis.RedisCluster
# One command as sent, and a transport that sends several in one round trip.
Command = tuple[Any, ...]
Send = Callable[[Sequence[Command]], Sequence[Any]]

_FILE = re.compile(r"(?P<verb>[a-z_]+)-(?P<numkeys>\d+)\.lua")
_INCLUDE = re.compile(r'^--- @include "(?P<name>[A-Za-z0-9_]+)"\s*$', re.MULTILINE)


def lua_dir() -> Path:
    """ECHOMQ_LUA_DIR, else the copy inside an installed wheel, else the checkout's."""
    env = os.environ.get("ECHOMQ_LUA_DIR")
    if env:
        path = Path(env)
        if not path.is_dir():
            raise FileNotFoundError(f"ECHOMQ_LUA_DIR={env} is not a directory")
        return path
    here = Path(__file__).resolve().parent
    for candidate in (here / "lua", here.parent / "lua"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no lua/ folder beside {here}; set ECHOMQ_LUA_DIR")


@dataclass(frozen=True)
class ScriptSource:
    verb: str
    numkeys: int
    path: Path
    text: str


def _expand(text: str, includes: Path, path: Path, done: set[str] | None = None,
            chain: tuple[str, ...] = ()) -> str:
    """text with its includes expanded, depth first; `done` holds the names
    already expanded in this script, `chain` the includes being expanded now."""
    done = set() if done is None else done

    def one(match: re.Match[str]) -> str:
        name = match["name"]
        if name in chain:
            raise ValueError(f"{path}: include cycle {' -> '.join((*chain, name))}")
        if name in done:
            return ""
        inc = includes / f"{name}.lua"
        if not inc.is_file():
            where = f" (included from {chain[-1]!r})" if chain else ""
            raise FileNotFoundError(f"{path}: include {name!r}{where} not found in {includes}")
        done.add(name)
        return _expand(inc.read_text(), includes, path, done, (*chain, name))

    return _INCLUDE.sub(one, text)


@lru_cache(maxsize=8)
def _discover(folder: Path) -> tuple[ScriptSource, ...]:
    found = []
    for path in sorted(folder.glob("*.lua")):
        match = _FILE.fullmatch(path.name)
        if not match:
            raise ValueError(f"{path}: script names are <verb>-<numkeys>.lua")
        text = _expand(path.read_text(), folder / "includes", path)
        found.append(ScriptSource(match["verb"], int(match["numkeys"]), path, text))
    if not found:
        raise FileNotFoundError(f"no <verb>-<numkeys>.lua scripts in {folder}")
    return tuple(found)


def discover(folder: Path | str | None = None) -> dict[str, ScriptSource]:
    """Every script in the folder by verb, includes expanded."""
    path = Path(folder) if folder is not None else lua_dir()
    return {s.verb: s for s in _discover(path.resolve())}


def evalsha(client: Any, sha: str, keys: Sequence[Any], args: Iterable[Any] = ()) -> Any:
    """EVALSHA through any client or pipeline, a cluster pipeline included."""
    return client.execute_command("EVALSHA", sha, len(keys), *keys, *args)


class _Script(Script):
    """redis-py's Script, also callable with a cluster pipeline as the client."""

    def __call__(self, keys: Sequence[Any] | None = None, args: Iterable[Any] | None = None,
                 client: Any = None) -> Any:
        if isinstance(client, ClusterPipeline):
            # Loaded at connect; a NOSCRIPT would come back in execute()'s results.
            return evalsha(client, self.sha, keys or [], args or [])
        return super().__call__(keys, args, client)


class Scripts:
    """The registered scripts of one client, loaded at construction."""

    def __init__(self, client: Client, folder: Path | str | None = None) -> None:
        self.sources = discover(folder)
        self._scripts = {verb: _Script(client, s.text) for verb, s in self.sources.items()}
        self.load(client)

    def load(self, client: Client) -> None:
        for source in self.sources.values():
            client.script_load(source.text)

    def __getitem__(self, verb: str) -> redis.commands.core.Script:
        return self._scripts[verb]

    def sha(self, verb: str) -> str:
        return self._scripts[verb].sha

    def numkeys(self, verb: str) -> int:
        return self.sources[verb].numkeys


def send_reloading(send: Send, load: Callable[[], None], commands: Sequence[Command],
                   resend: Send | None = None) -> list[Any]:
    """`send(commands)`, then the commands answered NOSCRIPT (the scripts were
    flushed, or the server restarted without them) sent once more after
    `load()`: per command its reply, an error reply in its place.

    The one place a script call is sent again, and only these: a NOSCRIPT
    reply means the call ran nothing. `send` (and `resend`, for the second
    send when it differs) returns one reply per command, an error reply as
    redis-py's exception in its place; it raises `RepliesLostError` when the
    connection failed after its write began (those calls may have run), and
    anything else only when nothing went out.

    The first send's replies stand whatever befalls the resend: they say
    what already ran. When the reload fails, or the resend goes out nowhere,
    each NOSCRIPT command holds the error that stopped it and the list is
    returned. When the resend's connection fails after its write began,
    `RepliesLostError` carries every reply read in either send, and as lost
    the resent commands not heard from."""
    replies = list(send(commands))
    missing = [i for i, reply in enumerate(replies) if isinstance(reply, redis.exceptions.NoScriptError)]
    if not missing:
        return replies
    try:
        load()
    except _NOT_SENT as exc:  # a reload that failed (a lost SCRIPT LOAD included) sent none of them
        return _placed(replies, missing, [exc] * len(missing))
    try:
        again = (resend or send)([commands[i] for i in missing])
    except RepliesLostError as exc:
        _placed(replies, missing, exc.replies)
        raise RepliesLostError(str(exc), replies, tuple(missing[i] for i in exc.lost)) from exc.__cause__
    except _NOT_SENT as exc:  # nothing of the resend went out
        return _placed(replies, missing, [exc] * len(missing))
    return _placed(replies, missing, again)


# What a transport raises when nothing went out, and what a reload raises.
_NOT_SENT = (EchoMQError, redis.exceptions.RedisError, OSError)


def _placed(replies: list[Any], where: Sequence[int], these: Sequence[Any]) -> list[Any]:
    for i, reply in zip(where, these):
        replies[i] = reply
    return replies
