"""What `--server SPEC` means: the accepted forms, parsed into a
`ServerSpec`, and the redaction that keeps a password in a spec out of every
repr, message and file.

    redis | valkey                an embedded build found on the system PATH
                                  (PATH without a venv's bin: builds.system_path)
    redis6.2 | redis7.0 | redis8.2 | valkey8.0 | valkey8.1 | valkey9.1
                                  a named build, checked to be that version
                                  (echomq_bench.servers.builds)
    NAME=BINARY [ARGS...]         an embedded build with extra settings,
                                  e.g. valkey-io2=valkey-server --io-threads 2
    [NAME=]redis://... rediss://  a server that already runs
    redis-cluster | valkey-cluster
                                  a local cluster of that build (echomq_bench.servers.cluster_launcher)
    NAME=redis-cluster [--masters N] [--replicas N] [ARGS...]
    [NAME=]redis+cluster://...    a cluster that already runs

Parsing starts nothing and looks nothing up: a named build's binary is
found, and its version checked, when the server starts (or, on the command
line, when the option is read). `echomq_bench.servers.start` turns a spec
into a server. This module builds on the errors, the builds table and the
cluster layout only, so every server kind can import it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import SplitResult, urlsplit

from echomq_bench.servers.builds import BUILD_NAMES, build_named
from echomq_bench.servers.errors import ServerSpecError
from echomq_bench.servers.layout import split_cluster_args

__all__ = [
    "DEFAULT_SPECS",
    "ServerSpec",
    "BUILTIN_BINARIES",
    "DEFAULT_URL_PORT",
    "parse_server_spec",
    "redacted_url",
    "redacted_args",
    "secrets_in",
    "option_value",
    "check_args",
]

DEFAULT_SPECS: tuple[str, ...] = ("redis", "valkey")

Kind = Literal["embedded", "url", "cluster"]

BUILTIN_BINARIES: dict[str, str] = {"redis": "redis-server", "valkey": "valkey-server"}
CLUSTER_WORDS: tuple[str, ...] = ("redis-cluster", "valkey-cluster")
URL_SCHEMES: tuple[str, ...] = ("redis", "rediss")
CLUSTER_URL_SCHEMES: tuple[str, ...] = ("redis+cluster", "rediss+cluster")
DEFAULT_URL_PORT = 6379

ACCEPTED_FORMS = (
    "redis | valkey (the first redis-server or valkey-server on the system PATH, a venv's bin left out); "
    f"{' | '.join(BUILD_NAMES)} (a named build of that version); "
    "NAME=BINARY [ARGS...] (an embedded build with extra settings, "
    "e.g. valkey-io2=valkey-server --io-threads 2); "
    "[NAME=]redis://[USER:PASSWORD@]HOST[:PORT][/DB] or rediss://... (a running server); "
    "redis-cluster | valkey-cluster (a local cluster; NAME=redis-cluster [--masters N] "
    "[--replicas N] [ARGS...] to size it); [NAME=]redis+cluster://HOST:PORT (a running cluster)"
)

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,40}")
SCHEME_PATTERN = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")

# The launcher owns these: a user value would point the readiness check and
# the cleanup at the wrong port, dir or process.
MANAGED_OPTIONS = frozenset({"--port", "--dir", "--logfile", "--daemonize"})
SECRET_OPTIONS = frozenset(
    {"--requirepass", "--masterauth", "--tls-key-file-pass", "--tls-client-key-file-pass"}
)


# --------------------------------------------------------------------------
# Redaction


# The password runs to the last "@" of the token, as urlsplit reads it, so an
# unescaped "@" inside a password does not leak its tail.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)\S*@")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:password|pass|pwd)=)[^&#\s]*", re.IGNORECASE)
_ACL_PASSWORD = re.compile(r"(?P<head>(?:^|\s)[>#])\S+")


def redacted_url(url: str) -> str:
    """`url` with any password replaced by `***`.

    It works on any text that may hold URLs (a whole `NAME=URL` spec, an
    error message), because a message must not leak what it failed to parse.
    """
    text = _URL_PASSWORD.sub(r"\g<head>***@", url)
    return _QUERY_PASSWORD.sub(r"\g<head>***", text)


def redacted_args(args: Iterable[str]) -> tuple[str, ...]:
    """Server ARGS with the values of password options and ACL passwords hidden."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        hide_next = arg.lower() in SECRET_OPTIONS
        option, equals, _ = arg.partition("=")
        if equals and option.lower() in SECRET_OPTIONS:
            out.append(f"{option}=***")  # the server refuses this form, and its error would echo it
            continue
        out.append(_ACL_PASSWORD.sub(r"\g<head>***", arg))
    return tuple(out)


def secrets_in(args: Iterable[str]) -> tuple[str, ...]:
    """The password values in ARGS, so log tails can be scrubbed of them."""
    found: list[str] = []
    items = list(args)
    for index, arg in enumerate(items[:-1]):
        if arg.lower() in SECRET_OPTIONS and items[index + 1]:
            found.append(items[index + 1])
    for arg in items:
        option, equals, value = arg.partition("=")
        if equals and value and option.lower() in SECRET_OPTIONS:
            found.append(value)
    return tuple(found)


def option_value(args: Iterable[str], option: str) -> str | None:
    """The value after the last `option` in ARGS (the last one wins, as in the server)."""
    value: str | None = None
    items = list(args)
    for index, arg in enumerate(items[:-1]):
        if arg.lower() == option:
            value = items[index + 1]
    return value


# --------------------------------------------------------------------------
# Specs


@dataclass(frozen=True, repr=False)
class ServerSpec:
    """What to run or where to connect; build one with `parse_server_spec`.

    `build` is the short name of a named build (redis6.2, ...): the binary
    is then that build's, found where the build lives and checked to be its
    version when the server starts, not the file `binary` names on PATH.
    """

    name: str
    kind: Kind
    binary: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    build: str | None = None

    def __post_init__(self) -> None:
        # Callers building a spec by hand may pass a list.
        object.__setattr__(self, "args", tuple(self.args))
        if self.kind not in ("embedded", "url", "cluster"):
            raise ServerSpecError(f"server spec {self.name!r}: unknown kind {self.kind!r}")
        if self.kind == "embedded" and not self.binary:
            raise ServerSpecError(f"embedded server spec {self.name!r} needs a binary")
        if self.kind == "url" and not self.url:
            raise ServerSpecError(f"url server spec {self.name!r} needs a url")
        if self.kind == "cluster" and bool(self.binary) == bool(self.url):
            raise ServerSpecError(f"cluster spec {self.name!r} needs a binary or a url, not both")
        if self.build is not None and (self.kind != "embedded" or self.build not in BUILD_NAMES
                                       or build_named(self.build).binary != self.binary):
            raise ServerSpecError(f"server spec {self.name!r}: build {self.build!r} is not an embedded build of "
                                  f"binary {self.binary!r}; builds: {', '.join(BUILD_NAMES)}")

    def describe(self) -> str:
        """SPEC text that parses back to this spec, with passwords hidden."""
        if self.kind == "url" or self.kind == "cluster" and self.url:
            assert self.url is not None
            shown = redacted_url(self.url)
            return shown if self.name == _default_url_name(self.url) else f"{self.name}={shown}"
        assert self.binary is not None
        if self.kind == "cluster":
            word = _CLUSTER_WORD_OF[self.binary]
            if self.name == word and not self.args:
                return word
            return f"{self.name}={shlex.join([word, *redacted_args(self.args)])}"
        builtin = self.build is None and BUILTIN_BINARIES.get(self.name) == self.binary
        if not self.args and (builtin or self.name == self.build):
            return self.name
        word = self.build or self.binary
        return f"{self.name}={shlex.join([word, *redacted_args(self.args)])}"

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        if self.url is not None:
            return f"ServerSpec(name={self.name!r}, kind={self.kind!r}, url={redacted_url(self.url)!r})"
        build = f", build={self.build!r}" if self.build is not None else ""
        return (
            f"ServerSpec(name={self.name!r}, kind={self.kind!r}, binary={self.binary!r}, "
            f"args={redacted_args(self.args)!r}{build})"
        )


def parse_server_spec(text: str) -> ServerSpec:
    """Parse one `--server SPEC`; raise ServerSpecError naming SPEC if it is bad."""
    if not isinstance(text, str):
        raise ServerSpecError(f"server spec must be a string, not {type(text).__name__}")
    spec = text.strip()
    if not spec:
        raise _spec_error(text, "it is empty")
    if spec in BUILTIN_BINARIES:
        return ServerSpec(name=spec, kind="embedded", binary=BUILTIN_BINARIES[spec])
    if spec in BUILD_NAMES:
        return _build_spec(spec, spec, ())
    if spec in CLUSTER_WORDS:
        return _cluster_spec(text, spec, spec, ())
    if SCHEME_PATTERN.match(spec):
        return _parse_url(text, None, spec)
    name, equals, rest = spec.partition("=")
    if not equals:
        raise _spec_error(text, "it is neither redis, valkey, a named build, NAME=BINARY [ARGS...] nor a URL")
    return _parse_named(text, name.strip(), rest.strip())


def _parse_named(text: str, name: str, rest: str) -> ServerSpec:
    if not NAME_PATTERN.fullmatch(name):
        raise _spec_error(text, f"NAME {name!r} must be 1-40 of A-Z a-z 0-9 _ . -")
    if not rest:
        raise _spec_error(text, "nothing follows NAME=")
    if SCHEME_PATTERN.match(rest):
        return _parse_url(text, name, rest)
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise _spec_error(text, f"cannot split its arguments ({exc})") from None
    if not words:
        raise _spec_error(text, "nothing follows NAME=")
    binary, args = words[0], tuple(words[1:])
    if binary in CLUSTER_WORDS:
        return _cluster_spec(text, name, binary, args)
    check_args(text, args)
    if binary in BUILD_NAMES:
        return _build_spec(name, binary, args)
    # `NAME=valkey --io-threads 2` reads naturally; map the word to its binary.
    return ServerSpec(name=name, kind="embedded", binary=BUILTIN_BINARIES.get(binary, binary), args=args)


def _build_spec(name: str, build: str, args: tuple[str, ...]) -> ServerSpec:
    return ServerSpec(name=name, kind="embedded", binary=build_named(build).binary, args=args, build=build)


def check_args(text: str, args: tuple[str, ...]) -> None:
    managed = sorted({arg for arg in args if arg.lower() in MANAGED_OPTIONS})
    if managed:
        raise _spec_error(text, f"{', '.join(managed)} is set by the launcher and cannot be given")


# The cluster words name a build; the local cluster runs that build's server.
_CLUSTER_WORD_OF: dict[str, str] = {
    BUILTIN_BINARIES[word.removesuffix("-cluster")]: word for word in CLUSTER_WORDS
}


def _cluster_spec(text: str, name: str, word: str, args: tuple[str, ...]) -> ServerSpec:
    check_args(text, args)
    try:
        split_cluster_args(args)
    except ValueError as exc:
        raise _spec_error(text, str(exc)) from None
    binary = BUILTIN_BINARIES[word.removesuffix("-cluster")]
    return ServerSpec(name=name, kind="cluster", binary=binary, args=args)


def _parse_url(text: str, name: str | None, url: str) -> ServerSpec:
    parts = urlsplit(url)
    cluster = parts.scheme.lower() in CLUSTER_URL_SCHEMES
    if parts.scheme.lower() not in URL_SCHEMES and not cluster:
        raise _spec_error(
            text, f"unknown URL scheme {parts.scheme!r}; use redis://, rediss:// or redis+cluster://"
        )
    if not _has_valid_port(parts):
        raise _spec_error(text, "the URL has a bad port")
    if not parts.hostname:
        raise _spec_error(text, "the URL has no host")
    if parts.path.strip("/") and not parts.path.strip("/").isdigit():
        raise _spec_error(text, "the URL path must be a database number, like /0")
    if cluster and parts.path.strip("/") not in ("", "0"):
        raise _spec_error(text, "a cluster has only database 0")
    return ServerSpec(name=name or _default_url_name(url), kind="cluster" if cluster else "url", url=url)


def _has_valid_port(parts: SplitResult) -> bool:
    try:
        port = parts.port  # urlsplit checks the port only when asked
    except ValueError:
        return False
    return port != 0


def _default_url_name(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{parts.port or DEFAULT_URL_PORT}"


def _spec_error(text: str, why: str) -> ServerSpecError:
    return ServerSpecError(
        f"bad server spec {redacted_url(text)!r}: {why}. Accepted forms: {ACCEPTED_FORMS}"
    )
