"""What a completion receipt would cost per job: the design the lost-enqueue judge does without.

    python docs/measurements/scripts/enqueue_receipt_cost.py [--server redis] [--servers 3]

A receipt lets the server answer for a job after completion has deleted its
row: complete writes `emq:{q}:done:<id>` with a TTL, and enqueue answers
`duplicate` while one exists. A lost enqueue whose row is gone could then be
told apart: a receipt means the job ran, none means it never did.

This builds that variant of the scripts in a temporary folder and counts
both variants, each on --servers fresh servers under callgrind
(echomq_bench.counts), alternating: instructions per call of every verb.
It then writes 100,000 receipts on a plain server and prints the memory
each holds while its TTL runs, beside a pending job's row for scale.
Counts do not depend on the machine's load; the memory figure is exact.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from echomq import Queue, mint
from echomq._instrument import lua_dir
from echomq_bench.counts.measure import COUNTED, count_spec
from echomq_bench.servers import parse_server_spec, start

RECEIPT_MS = 600_000
RECEIPTS = 100_000
DONE_KEY = "local doneKey = string.gsub(jobKey, ':job:', ':done:', 1)\n"


def receipt_scripts(into: Path) -> Path:
    """The scripts, with complete writing a receipt and enqueue reading it."""
    shutil.copytree(lua_dir(), into)
    enqueue = into / "enqueue-2.lua"
    text = enqueue.read_text()
    anchor = "local fields = redis.pcall('HLEN', jobKey)"
    assert anchor in text
    enqueue.write_text(text.replace(anchor, DONE_KEY + "if rcall('EXISTS', doneKey) == 1 then return 'duplicate' end\n"
                                    + anchor))
    complete = into / "complete-2.lua"
    text = complete.read_text()
    anchor = "rcall('DEL', jobKey)\n"
    assert anchor in text
    complete.write_text(text.replace(anchor, anchor + DONE_KEY + f"rcall('SET', doneKey, '1', 'PX', {RECEIPT_MS})\n"))
    return into


def bytes_per_key(server_name: str) -> tuple[float, float]:
    """used_memory per receipt, and per pending job row with an empty payload, on a fresh server."""
    server = start(server_name)
    try:
        client = server.client()
        base = int(client.info("memory")["used_memory"])
        pipe = client.pipeline(transaction=False)
        for i in range(RECEIPTS):
            pipe.set(f"emq:{{m}}:done:{mint()}", "1", px=RECEIPT_MS)
            if i % 5_000 == 4_999:
                pipe.execute()
        pipe.execute()
        receipts = int(client.info("memory")["used_memory"])
        q = Queue(client, "rows")
        for _ in range(RECEIPTS // 10):
            q.enqueue(mint(), b"")
        rows = int(client.info("memory")["used_memory"])
        return (receipts - base) / RECEIPTS, (rows - receipts) / (RECEIPTS // 10)
    finally:
        server.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default="redis")
    p.add_argument("--servers", type=int, default=3)
    a = p.parse_args()
    spec = parse_server_spec(a.server)
    with tempfile.TemporaryDirectory() as tmp:
        variant = receipt_scripts(Path(tmp) / "lua")
        plain: list[dict[str, float]] = []
        receipt: list[dict[str, float]] = []
        for i in range(a.servers):
            for folder, into in ((None, plain), (variant, receipt)):
                run = count_spec(spec, lua_dir=folder)
                into.append({v: c.instructions for v, c in run.verbs.items()})
            print(f"server pair {i + 1} of {a.servers} counted", flush=True)
    print(f"\n{a.server}: instructions per call, mean of {a.servers} fresh servers each (relative sd)\n")
    print("| verb | as shipped | with a receipt | change |")
    print("|---|---:|---:|---:|")
    for verb in COUNTED:
        before = [r[verb] for r in plain]
        after = [r[verb] for r in receipt]
        m0, m1 = statistics.fmean(before), statistics.fmean(after)
        sd = max(statistics.stdev(before) / m0, statistics.stdev(after) / m1) if a.servers > 1 else float("nan")
        print(f"| {verb} | {m0:,.0f} | {m1:,.0f} | {m1 - m0:+,.0f} ({(m1 - m0) / m0:+.1%}; sd {sd:.2%}) |")
    per_receipt, per_row = bytes_per_key(a.server)
    print(f"\nmemory: {per_receipt:.0f} bytes per receipt held for its TTL "
          f"(a pending job's row with an empty payload: {per_row:.0f} bytes); "
          f"{RECEIPTS:,} receipts on a fresh {a.server}")


if __name__ == "__main__":
    main()
