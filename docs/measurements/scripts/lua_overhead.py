"""Is the Lua lean? Server time inside scripts per claim+complete cycle,
ours against the seed's claim paired with a minimal fenced complete.

    python docs/measurements/scripts/lua_overhead.py [--server SPEC]... [--rounds 80] [--cycles 250]
                                 [--form pipelined|single|both|pumps] [--baseline DIR]

Both pairs run against the same server in one process, interleaved A B A B
in short rounds, so the machine's drifting speed (a shared VM) slows both
alike. The figure is cmdstat_evalsha usec over the calls of a round: the
server's own clock, no network or client time in it. The ratio is the
median of the per-round ratios A/B (robust to a round that a neighbour's
burst slowed); the range is their interquartile range. Target: ours at most 1.20x.
The seed's scripts are echomq_bench/counts/seed/, the count gate's; for the
one-call-at-a-time ratio with its 95% interval over paired blocks, run
seed_price.py beside this script.

Two forms of calling, since a script's fixed cost weighs differently in each:
`pipelined` sends a round's claims as one pipeline, then its completes;
`single` sends one call at a time through `Queue` (claim, complete, claim,
...), each waiting for its reply, the way a worker calls. In `single` the
reference scripts run through a `Queue` too, loaded from a folder that holds
only them under our file names, so both pairs take the same client path.

`--baseline DIR` measures against another lua/ folder instead of the seed
(e.g. the scripts of an earlier commit: `git archive COMMIT lua | tar -x -C
/tmp/old`), so a change to the scripts is judged in one interleaved run
rather than by comparing two runs minutes apart on a drifting machine.
`--form pumps` (baseline needed: the seed has no pumps) times one promote
and one reap call per round over `--cycles` due jobs each, half of the
reaped ones at max_attempts so both of reap's branches run; the figure is
server µs per job moved.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Callable

from echomq import Queue, mint
from echomq._instrument import verbs
from echomq_bench.counts.seed_price import SEED_SCRIPTS
from echomq_bench.measurement.serverstats import command_stats
from echomq_bench.servers import DEFAULT_SPECS, running

FORMS = ("pipelined", "single")  # what "both" runs

Round = Callable[[int], float]


def fill(q: Queue, n: int) -> None:
    pipe = q.client.pipeline(transaction=False)
    for _ in range(n):
        jid = mint()
        pipe.hset(q.keys.job(jid), mapping={"state": "pending", "attempts": 0, "payload": b"x" * 64})
        pipe.zadd(q.keys.pending, {jid: 0})
    pipe.execute()


def server_usec_per(q: Queue, calls: int, per: int) -> float:
    seen, usec = command_stats(q.client)
    assert seen == calls, f"expected {calls} EVALSHA calls, saw {seen}"
    return usec / per


def pipelined_round(q: Queue, n: int) -> float:
    """Server µs per claim+complete cycle over n cycles, each half one pipeline."""
    c, k = q.client, q.keys
    claim_sha, complete_sha = q.scripts.sha("claim"), q.scripts.sha("complete")
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
    return server_usec_per(q, 2 * n, n)


def single_round(q: Queue, n: int) -> float:
    """Server µs per claim+complete cycle over n cycles, one call at a time."""
    fill(q, n)
    q.client.config_resetstat()
    for _ in range(n):
        job = q.claim(lease_ms=60_000)
        assert job is not None, "pending ran dry"
        assert q.complete(job.id, job.token) == "ok", "a complete was refused"
    return server_usec_per(q, 2 * n, n)


def pumps_round(q: Queue, n: int) -> float:
    """Server µs per job moved by one promote and one reap over n due jobs each."""
    c, k = q.client, q.keys
    ids = [mint() for _ in range(2 * n)]
    pipe = c.pipeline(transaction=False)
    for i, jid in enumerate(ids):
        scheduled = i < n
        # Every other expired lease has used its last attempt: reap's dead branch.
        attempts = 1 if scheduled or i % 2 else q.max_attempts
        pipe.hset(k.job(jid), mapping={"state": "scheduled" if scheduled else "active", "attempts": attempts,
                                        "payload": b"x" * 64})
        pipe.zadd(k.schedule if scheduled else k.active, {jid: 0})
    pipe.execute()
    c.config_resetstat()
    moved = q.promote(limit=n) + q.reap(limit=n)
    assert moved == 2 * n, f"expected {2 * n} jobs moved, saw {moved}"
    figure = server_usec_per(q, 2, 2 * n)
    c.unlink(k.pending, k.dead, *(k.job(jid) for jid in ids))
    return figure


ROUNDS: dict[str, Callable[[Queue, int], float]] = {
    "pipelined": pipelined_round, "single": single_round, "pumps": pumps_round}


def interleave(ours: Round, ref: Round, rounds: int, cycles: int) -> dict[str, float]:
    ours(cycles)  # warm-up: allocator and dict growth
    ref(cycles)
    a: list[float] = []
    b: list[float] = []
    for i in range(rounds):
        # Alternate which goes first, so neither always follows the other.
        pair = [(a, ours), (b, ref)] if i % 2 == 0 else [(b, ref), (a, ours)]
        for sink, one_round in pair:
            sink.append(one_round(cycles))
    ratios = sorted(x / y for x, y in zip(a, b))
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return {"ours": statistics.median(a), "ref": statistics.median(b), "ratio": median, "lo": q1, "hi": q3}


def measure(server: object, form: str, rounds: int, cycles: int, baseline: Path | None) -> dict[str, float]:
    client = server.client()  # type: ignore[attr-defined]
    ours = Queue(client, "lean")
    # Its own queue name: the two queues never see each other's leftovers.
    base = Queue(client, "lean-base", lua_dir=baseline or SEED_SCRIPTS)
    one_round = ROUNDS[form]
    return interleave(lambda n: one_round(ours, n), lambda n: one_round(base, n), rounds, cycles)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", default=None)
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--cycles", type=int, default=250)
    parser.add_argument("--target", type=float, default=1.20)
    parser.add_argument("--form", choices=(*ROUNDS, "both"), default="pipelined",
                        help="pipelined batches (default), one call at a time through Queue, both, "
                             "or the two pumps (needs --baseline)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a lua/ folder to measure against instead of the seed's scripts")
    args = parser.parse_args()
    if args.form == "pumps" and args.baseline is None:
        parser.error("--form pumps needs --baseline DIR: the seed has no promote or reap to compare with")
    if args.baseline is not None and not args.baseline.is_dir():
        parser.error(f"--baseline {args.baseline}: not a directory")
    forms = FORMS if args.form == "both" else (args.form,)
    unit = "job" if args.form == "pumps" else "cycle"
    base = "base" if args.baseline else "seed"
    ok = True
    print(f"{'server':<22} {'form':<10} {f'ours µs/{unit}':>14} {f'{base} µs/{unit}':>14} {'ratio':>7}  "
          f"{'IQR':>13}  target <= {args.target}")
    with running(*(args.server or DEFAULT_SPECS)) as servers:
        for server in servers:
            for form in forms:
                r = measure(server, form, args.rounds, args.cycles, args.baseline)
                verdict = "ok" if r["ratio"] <= args.target else "OVER"
                ok &= verdict == "ok"
                print(f"{server.version():<22} {form:<10} {r['ours']:>14.2f} {r['ref']:>14.2f} {r['ratio']:>7.3f}  "
                      f"{r['lo']:.3f}..{r['hi']:.3f}  {verdict}", flush=True)
    reference = "the seed's scripts (echomq_bench/counts/seed)"
    against = f"baseline {args.baseline}" if args.baseline else reference
    print(f"{args.rounds} interleaved rounds of {args.cycles} each against {against}; cmdstat_evalsha usec "
          f"per {unit}, median; range = interquartile range of per-round ratios")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
