"""Is the Lua lean? Server time inside scripts per claim+complete cycle,
ours against the seed's claim paired with a minimal fenced complete.

    python bench/lua_overhead.py [--server SPEC]... [--rounds 80] [--cycles 250]

Both pairs run against the same server in one process, interleaved A B A B
in short rounds, so the machine's drifting speed (a shared VM) slows both
alike. The figure is cmdstat_evalsha usec over the calls of a round: the
server's own clock, no network or client time in it. The ratio is the
median of the per-round ratios A/B (robust to a round that a neighbour's
burst slowed); the range is their interquartile range. Target: ours at most 1.15x.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from echomq import Queue, mint, verbs
from echomq_bench.measurement.serverstats import command_stats
from echomq_bench.servers import DEFAULT_SPECS, running

HERE = Path(__file__).parent


def fill(q: Queue, n: int) -> None:
    pipe = q.client.pipeline(transaction=False)
    for _ in range(n):
        jid = mint()
        pipe.hset(q.keys.job(jid), mapping={"state": "pending", "attempts": 0, "payload": b"x" * 64})
        pipe.zadd(q.keys.pending, {jid: 0})
    pipe.execute()


def one_round(q: Queue, claim_sha: str, complete_sha: str, n: int) -> float:
    """Server µs per claim+complete cycle over n cycles."""
    c, k = q.client, q.keys
    fill(q, n)
    c.config_resetstat()
    pipe = c.pipeline(transaction=False)
    claim = verbs.claim(k, 60_000).evalsha(claim_sha)
    for _ in range(n):
        pipe.execute_command(*claim)
    claimed = pipe.execute()
    for job_id, _payload, token in claimed:
        pipe.execute_command(*verbs.complete(k, job_id.decode(), token).evalsha(complete_sha))
    replies = pipe.execute()
    assert all(r == b"ok" for r in replies), "a complete was refused"
    calls, usec = command_stats(c)
    assert calls == 2 * n, f"expected {2 * n} EVALSHA calls, saw {calls}"
    return usec / n


def measure(server: object, rounds: int, cycles: int) -> dict[str, object]:
    client = server.client()  # type: ignore[attr-defined]
    q = Queue(client, "lean")
    ours = (q.scripts.sha("claim"), q.scripts.sha("complete"))
    ref = tuple(client.script_load((HERE / "reference" / f"{v}.lua").read_text()) for v in ("claim", "complete"))
    one_round(q, *ours, cycles)  # warm-up: allocator and dict growth
    a, b = [], []
    for i in range(rounds):
        # Alternate which goes first, so neither always follows the fill.
        pair = [(a, ours), (b, ref)] if i % 2 == 0 else [(b, ref), (a, ours)]
        for sink, shas in pair:
            sink.append(one_round(q, *shas, cycles))  # type: ignore[arg-type]
    ratios = sorted(x / y for x, y in zip(a, b))
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return {"ours": statistics.median(a), "ref": statistics.median(b), "ratio": median,
            "lo": q1, "hi": q3}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", default=None)
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--cycles", type=int, default=250)
    parser.add_argument("--target", type=float, default=1.15)
    args = parser.parse_args()
    ok = True
    print(f"{'server':<22} {'ours µs/cycle':>14} {'seed µs/cycle':>14} {'ratio':>7}  {'IQR':>13}  target <= {args.target}")
    with running(*(args.server or DEFAULT_SPECS)) as servers:
        for server in servers:
            r = measure(server, args.rounds, args.cycles)
            verdict = "ok" if r["ratio"] <= args.target else "OVER"
            ok &= verdict == "ok"
            print(f"{server.version():<22} {r['ours']:>14.2f} {r['ref']:>14.2f} {r['ratio']:>7.3f}  "
                  f"{r['lo']:.3f}..{r['hi']:.3f}  {verdict}")
    print(f"{args.rounds} interleaved rounds of {args.cycles} cycles each; cmdstat_evalsha usec per cycle, median; "
          "range = interquartile range of per-round ratios")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
