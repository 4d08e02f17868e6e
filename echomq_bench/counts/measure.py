"""Instructions per call of every verb, counted on a server under callgrind.

Each verb runs from the microbenchmarks' prepared states
(echomq_bench.microbench.cases), in one fixed order, against one fixed
keyspace: a fixed tag in every key name, ids counted up from a fixed value,
populations sized to stay between two powers of two so no table of the
server grows inside a window. A verb gets WARMUP calls before its window;
both are multiples of 50, the calls between two of the server's Lua GC
steps, so every window holds the same number of them. The server is fresh
for every run: what one run counted, the next reproduces to the instruction
or within the floor the gate's page reports.

The figures are per call: instructions, and per server command the script
called, its calls and instructions.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from echomq_bench.counts.callgrind import CountingServer, Window
from echomq_bench.counts.identity import BinaryIdentity, binary_identity
from echomq_bench.microbench.cases import Sizes

__all__ = ["COUNTED", "CALLS", "HEAVY_CALLS", "WARMUP", "SIZES", "Counted", "GATE", "CYCLE", "VerbCount", "CountRun",
           "count_server", "count_spec", "script_shas"]

# Every verb the scripts implement, from the microbenchmarks' states, in the order they run.
COUNTED = ("enqueue", "enqueue_duplicate", "claim", "complete", "retry_schedule", "retry_dead", "promote_100",
           "reap_0", "reap_1", "reap_100")
CALLS = 1200
HEAVY_CALLS = 50
WARMUP = 100
TAG = "count"


# 20,000 rows: the keyspace stays between 16,384 and 32,768 keys, whatever a window adds.
SIZES = Sizes(pending=20_000, active=1_000, schedule=1_000)


@dataclass(frozen=True)
class Counted:
    """Which verbs a run counts, in the order they run, after how many uncounted calls each, on what populations."""

    verbs: tuple[str, ...] = COUNTED
    warmup: int = WARMUP
    sizes: Sizes = SIZES


GATE = Counted()
# One job's cycle, claim then complete, as the main job sets builds side by side. Claim's first
# 128 leases sit in a listpack whose every insert moves the whole list, then convert to a
# skiplist: 150 uncounted claims put that behind the window, so it holds the steady state a
# loaded queue runs in. 2,000 pending rows fill in a second under valgrind (20,000 take three)
# and keep the keyspace between 2,048 and 4,096 keys through both windows.
CYCLE = Counted(verbs=("claim", "complete"), warmup=150, sizes=Sizes(pending=2_000, active=1_000, schedule=1_000))


@dataclass(frozen=True)
class VerbCount:
    """One verb's window, per call."""

    verb: str
    calls: int
    instructions: float
    commands: Mapping[str, tuple[float, float]]  # command -> (calls per call, instructions per call)

    @property
    def lua(self) -> float:
        return self.instructions - sum(cost for _, cost in self.commands.values())

    def shares(self) -> dict[str, float]:
        """Each server command's share of the verb's instructions, and the Lua rest's."""
        out = {name: cost / self.instructions for name, (_, cost) in self.commands.items()}
        out["lua"] = self.lua / self.instructions
        return out

    @classmethod
    def of(cls, verb: str, calls: int, window: Window) -> VerbCount:
        return cls(verb, calls, window.instructions / calls,
                   {name: (n / calls, cost / calls) for name, (n, cost) in window.commands.items()})

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "instructions": round(self.instructions, 1),
                "commands": {k: {"calls": round(n, 3), "instructions": round(c, 1)}
                             for k, (n, c) in self.commands.items()}}


@dataclass(frozen=True)
class CountRun:
    """One fresh server's counts: the binary, the scripts and every verb's figures."""

    build: str
    binary: BinaryIdentity
    scripts: Mapping[str, str]          # verb -> SHA-1 of the script text the server ran
    verbs: Mapping[str, VerbCount]
    valgrind: str
    wall_s: float
    lua_dir: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)


def script_shas(folder: Path | str | None = None) -> dict[str, str]:
    """Each verb's script SHA-1, as EVALSHA names it (includes expanded)."""
    from echomq._instrument import discover

    return {verb: hashlib.sha1(src.text.encode()).hexdigest() for verb, src in discover(folder).items()}


def _window_calls(server: CountingServer, case: Any, calls: int, warmup: int) -> VerbCount:
    from echomq_bench.microbench.runner import MicrobenchError

    case.prepare(warmup + calls)
    replies = [case.call(*case.before(i)) for i in range(warmup)]
    counted: list[object] = []
    window = server.window(lambda: counted.extend(case.call(*case.before(i))
                                                  for i in range(warmup, warmup + calls)))
    case.after(replies + counted)
    wrong = [r for r in replies + counted if not case.ok(r)]
    if wrong:
        raise MicrobenchError(f"{case.name}: {len(wrong)} calls replied unexpectedly, e.g. {wrong[0]!r}")
    return VerbCount.of(case.name, calls, window)


def count_server(server: CountingServer, *, lua_dir: Path | str | None = None, calls: int = CALLS,
                 heavy_calls: int = HEAVY_CALLS, progress: Callable[[str], None] | None = None,
                 counted: Counted = GATE) -> CountRun:
    """Every verb of `counted` (by default the gate's: COUNTED) on `server`, a fresh one that nothing else uses."""
    from echomq_bench.load.bulk import FixedIds
    from echomq_bench.microbench.cases import CASES, Env

    for n in (calls, heavy_calls, counted.warmup):
        if n <= 0 or n % 50:
            raise ValueError(f"calls per window and warm-up must be positive multiples of 50 (the Lua GC period), "
                             f"got {n}")
    started = time.monotonic()
    client = server.client()
    env = Env(client, sizes=counted.sizes, lua_dir=lua_dir, tag=TAG, id_block=FixedIds())
    cases = [CASES[name](env, lua_dir) for name in counted.verbs]
    # The keyspace grew while the populations were written: no window may hold its rehash.
    server.rehash_done(client)
    verbs = {}
    for case in cases:
        if progress:
            progress(f"{server.name}: {case.name}")
        verbs[case.name] = _window_calls(server, case, heavy_calls if case.heavy else calls, counted.warmup)
    client.close()
    return CountRun(server.name, binary_identity(server.binary), script_shas(lua_dir), verbs, server.valgrind,
                    time.monotonic() - started, lua_dir=str(lua_dir or ""),
                    settings={"calls": calls, "heavy_calls": heavy_calls, "warmup": counted.warmup,
                              "sizes": vars(counted.sizes)})


def count_spec(spec: Any, *, lua_dir: Path | str | None = None, calls: int = CALLS, heavy_calls: int = HEAVY_CALLS,
               progress: Callable[[str], None] | None = None, counted: Counted = GATE) -> CountRun:
    """One run on a fresh server of `spec`, stopped afterwards."""
    server = CountingServer(spec)
    try:
        return count_server(server, lua_dir=lua_dir, calls=calls, heavy_calls=heavy_calls, progress=progress,
                            counted=counted)
    finally:
        server.stop()
