"""The one progress line: rewritten in place on a terminal, plain lines in a log."""

from __future__ import annotations

import io

from echomq_bench.progress import CLEAR, Progress, prefixed, silent


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_status_is_rewritten_and_cleared() -> None:
    out = Terminal()
    progress = Progress(out, label="reapcost redis")
    progress("reap: cap 10 (1/3)")
    progress("reap: cap 100 (2/3)")
    progress.done()
    assert out.getvalue() == (CLEAR + "reapcost redis: reap: cap 10 (1/3)"
                               + CLEAR + "reapcost redis: reap: cap 100 (2/3)" + CLEAR)
    assert "\n" not in out.getvalue()
    progress.end("redis: done")
    assert out.getvalue().endswith(CLEAR + "reapcost redis: redis: done\n")


def test_in_a_log_each_phase_shows_at_once_and_a_countdown_every_so_often() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = Progress(out, every_s=10.0, clock=lambda: now[0])
    for second in range(25):
        now[0] = float(second)
        progress(f"redis: measuring {second}/25 s")
    progress("redis: filling 1,000 jobs")
    progress("redis: filling 2,000 jobs")
    lines = out.getvalue().splitlines()
    assert lines == ["redis: measuring 0/25 s", "redis: measuring 10/25 s", "redis: measuring 20/25 s",
                     "redis: filling 1,000 jobs"]
    assert "\r" not in out.getvalue() and "\033" not in out.getvalue()
    progress.done()  # nothing to clear in a log
    progress.end("done")
    assert out.getvalue().splitlines()[-1] == "done"


def test_a_prefixed_progress_names_whose_status_it_is() -> None:
    seen: list[str] = []
    prefixed(prefixed(seen.append, "[trial 1/3]"), "redis:")("measuring 1.0/5 s")
    assert seen == ["[trial 1/3] redis: measuring 1.0/5 s"]
    assert prefixed(None, "redis:") is silent
