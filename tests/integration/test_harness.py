"""The worker-process harness: children ready together, one go, each result
in order, a failing or silent child named, and no child left behind."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from echomq_bench.load.harness import Harness, HarnessError, Line


class Refused(Exception):
    """The caller's own error class: the harness raises it for a failing child."""


def _echo(line: Line, index: int) -> None:
    window = line.ready(os.getpid())
    line.result({"index": index, "window": window, "pid": os.getpid()})


def _fails_in_setup(line: Line) -> None:
    raise ValueError("no such queue")


def _dies_in_silence(line: Line) -> None:
    os._exit(3)


def _hangs(line: Line) -> None:
    threading.Event().wait()


def _fails_in_the_window(line: Line) -> None:
    line.ready()
    raise RuntimeError("lost the server")


def test_children_get_ready_get_one_go_and_report_in_the_order_started() -> None:
    with Harness() as harness:
        children = [harness.fork(f"worker {i}", _echo, i) for i in range(3)]
        said = harness.ready(30)
        harness.go(("start", "end"))
        results = harness.results(30)
    assert said == [c.pid for c in children]
    assert results == [{"index": i, "window": ("start", "end"), "pid": c.pid} for i, c in enumerate(children)]
    assert not any(c.alive() for c in children)


def test_a_child_that_fails_before_ready_is_named_with_its_error() -> None:
    with pytest.raises(Refused, match=r"driver worker 1 failed: ValueError: no such queue"):
        with Harness(error=Refused) as harness:
            harness.fork("driver worker 0", _echo, 0)
            harness.fork("driver worker 1", _fails_in_setup)
            harness.ready(30)
    assert not any(c.alive() for c in harness.children)


def test_a_child_that_dies_without_a_word_is_named_with_its_exit_code() -> None:
    with pytest.raises(HarnessError, match=r"lease 100 ms exited before it could get ready \(exit code 3\)"):
        with Harness() as harness:
            harness.fork("lease 100 ms", _dies_in_silence)
            harness.ready(30)


def test_a_child_that_fails_in_the_window_is_named() -> None:
    with pytest.raises(HarnessError, match=r"worker 0 failed: RuntimeError: lost the server"):
        with Harness() as harness:
            harness.fork("worker 0", _fails_in_the_window)
            harness.ready(30)
            harness.go()
            harness.results(30)


def test_a_child_that_hangs_is_named_and_killed() -> None:
    with pytest.raises(HarnessError, match=r"timed out after 0.5 s waiting for slow one to get ready"):
        with Harness() as harness:
            harness.fork("quick one", _echo, 0)
            harness.fork("slow one", _hangs)
            harness.ready(0.5)
    assert [c.alive() for c in harness.children] == [False, False]
    assert harness.children[1].process.exitcode == -9


@pytest.mark.parametrize("failure", [RuntimeError("the parent failed"), KeyboardInterrupt()])
def test_children_are_killed_when_the_parent_fails_or_is_interrupted(failure: BaseException) -> None:
    with pytest.raises(type(failure)):
        with Harness(grace_s=60) as harness:
            harness.fork("worker 0", _hangs)
            harness.fork("worker 1", _hangs)
            raise failure
    assert not any(c.alive() for c in harness.children)
    assert [c.process.exitcode for c in harness.children] == [-9, -9]


def test_a_child_that_only_logs_is_joined_at_the_end() -> None:
    with Harness() as harness:
        child = harness.fork("pump", time.sleep, 0.01, talk=False)
    assert child.process.exitcode == 0


# -- children run from a command, speaking lines ----------------------------

_LINE_CHILD = """
import json, sys
config = json.loads(sys.stdin.readline())
print("ready", flush=True)
assert sys.stdin.readline().strip() == "go"
print("progress 7", flush=True)
print("result " + json.dumps({"role": config["role"]}), flush=True)
"""


def _command(tmp_path: Path, source: str) -> tuple[str, ...]:
    script = tmp_path / "child.py"
    script.write_text(source)
    return (sys.executable, str(script))


def test_a_command_child_speaks_the_same_words(tmp_path: Path) -> None:
    with Harness() as harness:
        child = harness.spawn("arq producer", _command(tmp_path, _LINE_CHILD), {"role": "produce"},
                              tmp_path / "child.log")
        assert harness.ready(30) == [""]
        harness.go()
        assert harness.results(30) == ['{"role": "produce"}']
    assert child.heard["progress"] == "7"
    assert child.exit_code() == 0


def test_a_command_child_that_exits_early_is_named_with_its_log(tmp_path: Path) -> None:
    source = "import sys\nsys.stdin.readline()\nprint('cannot connect to the server', file=sys.stderr)\nsys.exit(5)\n"
    with pytest.raises(HarnessError) as raised:
        with Harness() as harness:
            harness.spawn("rq consume0", _command(tmp_path, source), {}, tmp_path / "child.log")
            harness.ready(30)
    text = str(raised.value)
    assert text.startswith("rq consume0 exited before it could get ready (exit code 5;")
    assert text.endswith("cannot connect to the server)")


def test_a_word_the_caller_names_fatal_raises_its_error(tmp_path: Path) -> None:
    source = "import sys\nsys.stdin.readline()\nprint('missing install the peers extra', flush=True)\n"
    with pytest.raises(Refused, match="^install the peers extra$"):
        with Harness(fatal={"missing": Refused}) as harness:
            harness.spawn("huey produce", _command(tmp_path, source), {}, tmp_path / "child.log")
            harness.ready(30)


def test_a_stop_sent_to_a_command_child_that_already_exited_is_dropped(tmp_path: Path) -> None:
    # A burst worker (arq, RQ, streaQ) may finish and exit before the runner says stop.
    with Harness() as harness:
        child = harness.spawn("streaq consume0", _command(tmp_path, "import sys\nsys.stdin.readline()\n"), {},
                              tmp_path / "child.log")
        assert child.exit_code(30) == 0
        child.send("stop")
    stdin: Any = child.process.stdin
    assert stdin.closed
