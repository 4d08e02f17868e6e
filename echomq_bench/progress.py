"""The one progress line every command shows on stderr.

On a terminal it is one line rewritten in place (cut to the terminal's
width, so it never wraps and leaves a trail). Into a log or a pipe it is
plain lines: a new phase at once, the same phase again at most every
`every_s` seconds, so a countdown does not fill the log. The phase is the
status's leading words up to the first one holding a digit ("redis:
measuring" of "redis: measuring 4.1/5 s").

    progress = Progress(label="reapcost redis")
    progress("reap: cap 100 k 10 (3/12)")   # the status, replaced by the next
    progress.end("redis: done in 12 s")     # a line that stays
    progress.done()                          # clear the status line

Whatever shows a run's progress takes it as a `ProgressFn` parameter named
`progress` (a `Progress`, or any function of one string); one that shows
lines that must stay (a cluster's placement) takes a second one, `log`.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Any, Callable

__all__ = ["Progress", "ProgressFn", "silent", "prefixed"]

ProgressFn = Callable[[str], None]

CLEAR = "\r\033[K"


def _phase(text: str) -> str:
    words = []
    for word in text.split():
        if any(c.isdigit() for c in word):
            break
        words.append(word)
    return " ".join(words)


def silent(text: str) -> None:
    """The progress function of a run nobody watches."""


def prefixed(progress: ProgressFn | None, prefix: str) -> ProgressFn:
    """`progress` with every status led by `prefix` (a server's name); silent when there is none."""
    if progress is None:
        return silent
    return lambda text: progress(f"{prefix} {text}")


class Progress:
    """A progress line on `stream` (stderr by default); call it with the status text."""

    def __init__(self, stream: Any = None, *, label: str = "", every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.label = label
        self.every_s = every_s
        self.clock = clock
        self._phase: str | None = None
        self._last = -float("inf")
        self._shown = False

    def _text(self, text: str) -> str:
        return f"{self.label}: {text}" if self.label else text

    def __call__(self, text: str) -> None:
        line = self._text(text)
        if self.tty:
            width = shutil.get_terminal_size((160, 24)).columns - 1
            self.stream.write(CLEAR + line[:width])
            self._shown = True
        else:
            phase = _phase(text)
            now = self.clock()
            if phase == self._phase and now - self._last < self.every_s:
                return
            self._phase, self._last = phase, now
            self.stream.write(line + "\n")
        self.stream.flush()

    def end(self, text: str) -> None:
        """A line that stays, in place of the status line."""
        self.stream.write((CLEAR if self.tty else "") + self._text(text) + "\n")
        self.stream.flush()
        self._shown = False
        self._phase = None

    def done(self) -> None:
        """Clear the status line (on a terminal); the next output starts clean."""
        if self.tty and self._shown:
            self.stream.write(CLEAR)
            self.stream.flush()
        self._shown = False
        self._phase = None
