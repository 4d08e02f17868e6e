"""The call log of a load: every operation's invocation and its outcome, one
JSON object a line, for `echomq_bench.measurement.calllog_check` to judge.

    {"type":"invoke","process":"consumer-0","f":"claim","job":null,"token":null,"t":812.402113,
     "server_ms":null,"fault":null,"lease_ms":1000}
    {"type":"ok","process":"consumer-0","f":"claim","job":"JOB0Nvmd8aV5iy","token":2,"t":812.402388,
     "server_ms":null,"fault":null,"lease_ms":1000}

One line when a call is sent (`invoke`) and one when its outcome is known:
`ok` (it took effect as the reply says), `fail` (refused before any write:
EMQSTALE, EMQKIND, EMQID/EMQARG, OOM, EMQDAMAGE; or never sent) or `info`
(no reply, or any other error: it may or may not have run). `t` is
time.monotonic(), one clock for every process of a machine. `server_ms` is
the server's time where a reply carries it; no verb's reply does today, so
the recorders write null and the checker approximates (see
docs/design/call-log-check.md). `fault` is the fault striking when the line
was written, as the caller's `fault()` says.

`LoggedCalls` wraps any object with the load engine's calls protocol (call,
pipeline, command) and records each script call it passes on; the engine
itself never hears of it. A `CallLog` is one file: lines are formatted when
recorded and written in chunks, once at the end for a load nobody kills. A
load whose processes may be SIGKILLed makes it `durable`: the buffer goes to
the kernel before each call is sent and once its reply is in (two writes a
round trip), so a kill loses no line of a call that may have run; a call in
flight at the kill has its invoke and no outcome, and reads as unknown.

A call log that is not durable loses its buffer with its process anyway, so
it writes no invoke lines: a call is one line, its outcome's, carrying the
invoke's time as `t0` (and the fault striking then):

    {"type":"ok","process":"consumer-0","f":"claim","job":"JOB0Nvmd8aV5iy","token":2,"t":812.402388,
     "server_ms":null,"fault":null,"lease_ms":1000,"t0":812.402113}

Half the lines of the paired form, formatted once: on a Locust process the
call log is on every call, and this is most of what it costs.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Callable, Protocol, Sequence

from echomq import InvalidArgumentError, KeyspaceDamageError, OutOfMemoryError, StaleTokenError, WrongKindError
from echomq._instrument import ScriptCall

__all__ = ["CallLog", "LoggedCalls", "FaultNow", "CallsLike", "REFUSED", "clock"]

clock = time.monotonic

# Errors that prove a call wrote nothing: the scripts check these before their first write.
REFUSED: tuple[type[BaseException], ...] = (StaleTokenError, WrongKindError, InvalidArgumentError, OutOfMemoryError,
                                            KeyspaceDamageError)
_LINE = '{"type":"%s","process":%s,"f":"%s","job":%s,"token":%s,"t":%.6f,"server_ms":%s,"fault":%s%s}\n'


def _q(text: str | None) -> str:
    """A JSON string; ids, verbs and process names take the fast path."""
    if text is None:
        return "null"
    if text.isascii() and (text.isalnum() or text.replace("-", "").replace(".", "").replace(":", "").replace(
            "_", "").isalnum()):
        return '"' + text + '"'
    return json.dumps(text)


def _n(value: int | None) -> str:
    return "null" if value is None else str(int(value))


class CallLog:
    """One file of call-log lines. `path` None: an anonymous temporary file,
    read back with `read_bytes` (a Locust worker ships its call log so)."""

    def __init__(self, path: Path | None, *, durable: bool = False, chunk: int = 4096) -> None:
        self.path, self.durable, self.chunk = path, durable, chunk
        self._spill: IO[bytes] | None = None
        if path is None:
            self._spill = tempfile.TemporaryFile()
            self._fd: int | None = self._spill.fileno()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._lines: list[str] = []
        self.lines = 0

    def line(self, type_: str, process: str, f: str, job: str | None = None, token: int | None = None, *,
             t: float | None = None, fault: str | None = None, extra: str = "") -> None:
        """Record one line; `extra` is preformatted JSON members, each led by a comma."""
        self.add([_LINE % (type_, _q(process), f, _q(job), _n(token), clock() if t is None else t, "null",
                           _q(fault), extra)])

    def add_line(self, line: str) -> None:
        """One line already formatted."""
        if self._fd is None:
            return
        self._lines.append(line)
        self.lines += 1
        if len(self._lines) >= self.chunk:
            self.flush()

    def add(self, lines: list[str]) -> None:
        """Record lines already formatted (LoggedCalls formats its own)."""
        if self._fd is None:
            return  # closed: the run's call log is final
        self._lines += lines
        self.lines += len(lines)
        if len(self._lines) >= self.chunk:
            self.flush()

    def note(self, what: str, fault: str, job: str | None = None, token: int | None = None,
             t: float | None = None) -> None:
        """A nemesis line: a fault's window opens (`start`) or closes (`stop`),
        or it strikes one job (`strike`: a consumer killed or frozen holding it)."""
        self.line("info", "nemesis", what, job, token, t=t, fault=fault)

    def sync(self) -> None:
        """A call is about to go out, or its reply is in: a durable call log
        puts its lines in the kernel now, so a kill loses neither an invoke of
        a call that may run nor the job and token a claim handed out."""
        if self.durable:
            self.flush()

    def flush(self) -> None:
        if not self._lines or self._fd is None:
            return
        data = "".join(self._lines).encode()
        self._lines.clear()
        while data:
            data = data[os.write(self._fd, data):]

    def read_bytes(self) -> bytes:
        """Everything recorded so far (a temporary call log's way out)."""
        self.flush()
        if self._spill is not None:
            self._spill.seek(0)
            data = self._spill.read()
            self._spill.seek(0, os.SEEK_END)  # later lines go after, not over, what was read
            return data
        return self.path.read_bytes() if self.path is not None else b""

    def close(self) -> None:
        self.flush()
        if self._spill is not None:
            self._spill.close()
        elif self._fd is not None:
            os.close(self._fd)
        self._fd = None


class CallsLike(Protocol):
    def call(self, call: ScriptCall) -> Any: ...

    def pipeline(self, calls: Sequence[ScriptCall]) -> list[Any]: ...

    def command(self, *args: Any) -> Any: ...


class FaultNow:
    """The fault striking now, for threads of one process: set it, clear it."""

    def __init__(self) -> None:
        self.kind: str | None = None

    def __call__(self) -> str | None:
        return self.kind


def _text(value: Any) -> str:
    return value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)


class LoggedCalls:
    """A calls object that records into a CallLog, as one `process`.

    `fault()` names the fault striking now (None: none); `unsent` are
    exceptions the wrapped calls raise before sending anything (a drain
    gate), recorded as `fail`.

    It sits on every call of a load, so it formats its lines itself: the
    process is quoted once, and a call's job, token and members are read
    from its ARGV once for both of its lines."""

    def __init__(self, calls: CallsLike, call_log: CallLog, process: str,
                 fault: Callable[[], str | None] | None = None, unsent: tuple[type[BaseException], ...] = ()) -> None:
        self.calls, self.call_log, self.process = calls, call_log, process
        self.fault = fault or (lambda: None)
        self.unsent = unsent
        self._process = _q(process)

    def call(self, call: ScriptCall) -> Any:
        return self.pipeline((call,))[0] if self.call_log.durable else self._one(call)

    def pipeline(self, calls: Sequence[ScriptCall]) -> list[Any]:
        named = [_argv(c) for c in calls]
        sent = self._invoke(calls, named)
        try:
            replies = self.calls.pipeline(calls) if len(calls) > 1 else [self.calls.call(calls[0])]
        except BaseException as exc:
            self._done(calls, named, [exc] * len(calls), sent)
            raise
        self._done(calls, named, replies, sent)
        return replies

    def _one(self, call: ScriptCall) -> Any:
        """One call of a call log that is not durable: one line, written
        when its outcome is known (the hot path of a load: no lists). It
        formats its ok line itself rather than through `_done`: a shared
        builder measured about 5% fewer Locust cycles/s
        (docs/measurements/2026-12-04-locust-speed.md)."""
        job, token, extra = _argv(call)
        t0, fault = clock(), self.fault()
        try:
            reply = self.calls.call(call)
        except BaseException as exc:
            self._done((call,), [(job, token, extra)], (exc,), (t0, fault))
            raise
        t = clock()
        job, token, value = _ok(call.verb, reply, job, token)
        extra += ',"t0":%.6f' % t0 if value is None else ',"t0":%.6f,"value":%s' % (t0, value)
        self.call_log.add_line(_LINE % ("ok", self._process, call.verb, job, token, t, "null",
                                        _q(self.fault() if fault is None else fault), extra))
        return reply

    def command(self, *args: Any) -> Any:
        return self.calls.command(*args)  # plain reads (a backlog's ZCARD) change nothing: not recorded

    def _invoke(self, calls: Sequence[ScriptCall], named: list[tuple[str, str, str]]) -> tuple[float, str | None]:
        """The calls are about to go out: a durable call log writes their
        invoke lines now; any other keeps when and under which fault, for
        the outcome lines."""
        sent = (clock(), self.fault())
        h = self.call_log
        if h.durable:
            t, fault, process = sent[0], _q(sent[1]), self._process
            h.add([_LINE % ("invoke", process, c.verb, job, token, t, "null", fault, extra)
                   for c, (job, token, extra) in zip(calls, named)])
            h.sync()
        return sent

    def _done(self, calls: Sequence[ScriptCall], named: list[tuple[str, str, str]], replies: Sequence[Any],
              sent: tuple[float, str | None]) -> None:
        """The outcome lines; without a durable call log each carries its
        invoke as `t0` (and the fault striking then, if any)."""
        h, t = self.call_log, clock()
        fault = _q(self.fault() if h.durable or sent[1] is None else sent[1])
        sent_at = "" if h.durable else ',"t0":%.6f' % sent[0]
        process = self._process
        lines = []
        for c, (job, token, extra), reply in zip(calls, named, replies):
            extra += sent_at
            if isinstance(reply, BaseException):
                sent_out = not isinstance(reply, self.unsent)
                type_ = "fail" if isinstance(reply, REFUSED) or not sent_out else "info"
                extra += ',"error":%s' % _q(type(reply).__name__ if sent_out else "not sent")
            else:
                type_ = "ok"
                job, token, value = _ok(c.verb, reply, job, token)
                if value is not None:
                    extra += ',"value":%s' % value
            lines.append(_LINE % (type_, process, c.verb, job, token, t, "null", fault, extra))
        h.add(lines)
        h.sync()


def _argv(call: ScriptCall) -> tuple[str, str, str]:
    """The job and token a call names in its ARGV (echomq.verbs' layouts), as
    JSON, and its extra members."""
    verb, args = call.verb, call.args
    if verb == "enqueue":
        return _q(_text(args[0])), "null", ""
    if verb in ("complete", "retry"):
        return _q(_text(args[0])), str(int(args[1])), ""
    if verb == "claim" and len(args) > 1:
        return "null", "null", ',"lease_ms":%d' % int(args[1])
    return "null", "null", ""


def _ok(verb: str, reply: Any, job: str, token: str) -> tuple[str, str, str | None]:
    """The job and token (as JSON) and the value an accepted reply carries: a
    claim's job and token, a count, a reply word."""
    if verb == "claim":
        if isinstance(reply, (list, tuple)) and len(reply) >= 3:
            return _q(_text(reply[0])), str(int(reply[2])), None
        # No job: {} (pending empty), or the count of damaged jobs the claim buried before it stopped.
        return "null", "null", str(reply) if isinstance(reply, int) else None
    if isinstance(reply, int):
        return job, token, str(reply)
    return job, token, _q(_text(reply)) if reply is not None else None
