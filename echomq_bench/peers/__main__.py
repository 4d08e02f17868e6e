"""One child process of the peers runner: one producer or one consumer.

Protocol. stdin: one JSON line with role, peer, mode, url, queue, n; later
the line `go`, and for a consumer the line `stop` once the runner has seen
all n jobs run (a worker with no burst mode stops on it). stdout (the original fd; anything a library prints goes to
stderr instead): `ready`, `progress N`, `done T` (perf_counter when this
process finished its share, before teardown), `result {json}`, or
`missing MESSAGE` / `error MESSAGE`. The URL travels on stdin so that a
password never shows in a process listing.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, TextIO

from echomq_bench.peers import jobs
from echomq_bench.peers.registry import get
from echomq_bench.peers.base import PeerMissingError

# Often enough that the runner's `stop` follows the last job within a few
# ms; each report is one write to a pipe only when the count has changed.
PROGRESS_S = 0.005


def cpu_s() -> float:
    """This process's CPU and that of its children it has waited for (RQ's work horses)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class StdioGate:
    def __init__(self, out: TextIO, inp: TextIO) -> None:
        self.out, self.inp = out, inp
        self.lock = threading.Lock()
        self.t_go = self.t_done = 0.0
        self.cpu_go = self.cpu_done = 0.0
        self.stop = threading.Event()

    def send(self, word: str, text: str = "") -> None:
        with self.lock:
            self.out.write(f"{word} {text}".rstrip() + "\n")
            self.out.flush()

    def ready(self) -> None:
        self.send("ready")
        line = self.inp.readline().strip()
        if line != "go":
            raise SystemExit(f"expected 'go' from the runner, got {line!r}")
        self.cpu_go, self.t_go = cpu_s(), time.perf_counter()
        threading.Thread(target=self._await_stop, daemon=True).start()

    def _await_stop(self) -> None:
        for line in self.inp:
            if line.strip() == "stop":
                self.stop.set()
                return

    def done(self, at: float | None = None) -> None:
        self.t_done, self.cpu_done = (time.perf_counter() if at is None else at), cpu_s()
        self.send("done", repr(self.t_done))


def _report_progress(gate: StdioGate, stop: threading.Event) -> None:
    last = -1
    while not stop.wait(PROGRESS_S):
        if jobs.ran != last:
            last = jobs.ran
            gate.send("progress", str(last))


def main() -> int:
    # Keep the protocol on its own descriptor; send fd 1 to stderr so a
    # library's print cannot corrupt it.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    gate = StdioGate(out, sys.stdin)
    # `kill -USR1 PID` writes every thread's stack to the child's log: a hung peer shows where.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        config: dict[str, Any] = json.loads(sys.stdin.readline())
        peer = get(config["peer"], config.get("mode", "default"))
        peer.check()
        result: dict[str, Any] = {}
        if config["role"] == "produce":
            result["accepted"] = peer.produce(config["url"], config["queue"], int(config["n"]), gate,
                                              lambda sent: gate.send("progress", str(sent)))
        else:
            stop = threading.Event()
            threading.Thread(target=_report_progress, args=(gate, stop), daemon=True).start()
            try:
                peer.consume(config["url"], config["queue"], gate)
            finally:
                stop.set()
        result.update(ran=jobs.ran, intact=jobs.intact, cpu_s=gate.cpu_done - gate.cpu_go,
                      t_go=gate.t_go, t_done=gate.t_done)
        gate.send("result", json.dumps(result))
        return 0
    except PeerMissingError as exc:
        gate.send("missing", str(exc).replace("\n", " "))
        return 3
    except BaseException as exc:  # the runner shows this line; the traceback is in the child's log
        traceback.print_exc()
        gate.send("error", f"{type(exc).__name__}: {exc}".replace("\n", " "))
        return 1


if __name__ == "__main__":
    sys.exit(main())
