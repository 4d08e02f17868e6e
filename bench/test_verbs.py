"""pytest-benchmark microbenchmarks of every verb, on each build.

Each verb runs from a prepared state (echomq_bench.microbench.runner cases); where a
call consumes its state, `pedantic(setup=...)` writes it fresh before each
round with plain HSET/ZADD. pytest-benchmark times the client round trip;
`extra_info` carries the server side from INFO commandstats:

    server_us_mean        usec delta of the verb's command over all rounds / calls
    server_us_typical     per-call deltas, mean of the faster half
    noop_server_us        the no-op script, measured between the verb's calls
    server_ratio_noop     server_us_typical / noop_server_us
    server_ratio_read_100 (promote_100, reap_100) over a script that reads 100 rows
    ping_client_us        PING round trip, measured between the verb's calls
    client_ratio_ping     median round trip / ping_client_us
    script_sha1           the SHA-1 of the script the verb ran (includes expanded), so a
                          saved run says which code it timed; none for a plain command
    instructions          (--bench-count-instructions) instructions per call under
                          callgrind, and instructions_by_command: per server command

Run:  pytest bench/ --benchmark-group-by=group --benchmark-columns=min,median,iqr,max,rounds
Save and compare:  --benchmark-autosave, then --benchmark-compare --benchmark-compare-fail=median:25%
"""

from __future__ import annotations

import statistics

import pytest

from echomq_bench.counts.measure import script_shas
from echomq_bench.measurement.serverstats import command_stats
from echomq_bench.microbench.runner import CASES, VERB_CASES, Env, run_batch, typical

ROUNDS = 200
HEAVY_ROUNDS = 40
REFERENCE_CALLS = 60


@pytest.mark.parametrize("case_name", [c.name for c in VERB_CASES])
def test_verb(benchmark, env: Env, instruction_counts: dict, case_name: str) -> None:  # type: ignore[no-untyped-def]
    case = CASES[case_name](env)
    n = HEAVY_ROUNDS if case.heavy else ROUNDS
    case.prepare(n)
    counter = iter(range(n))
    replies: list[object] = []

    def setup() -> tuple[tuple[object, ...], dict[str, object]]:
        return case.before(next(counter)), {}

    def target(*args: object) -> None:
        replies.append(case.call(*args))

    benchmark.group = env.build  # type: ignore[attr-defined]
    calls0, usec0 = command_stats(env.client, case.command)
    benchmark.pedantic(target, setup=setup, rounds=n, iterations=1, warmup_rounds=0)
    calls1, usec1 = command_stats(env.client, case.command)
    case.after(replies)
    assert replies and all(case.ok(r) for r in replies), f"{case_name}: unexpected replies {replies[:3]}"
    assert calls1 - calls0 == len(replies), "another client used the server during the benchmark"

    # The server side and the references, call by call (echomq_bench.microbench.runner).
    [batch] = run_batch([case], REFERENCE_CALLS)
    typical_us = typical(batch.server_us, case.keep)
    noop_us = typical(batch.noop_us)
    ping_rtt = statistics.median(batch.ping_client_us)
    rtt_us = benchmark.stats.stats.median * 1e6 if benchmark.enabled else float("nan")
    benchmark.extra_info.update({
        "build": env.build, "version": env.version,  # type: ignore[attr-defined]
        "command": case.command,
        **({"script_sha1": script_shas(env.scripts_dir())[case.script]} if case.script else {}),
        "server_us_mean": round((usec1 - usec0) / len(replies), 3),
        "server_us_typical": round(typical_us, 3),
        "noop_server_us": round(noop_us, 3),
        "server_ratio_noop": round(typical_us / noop_us, 4),
        # The 100-job verbs also against the 100-row read, the reference of their weight.
        **({"read_100_server_us": round(typical(batch.ref_us), 3),
            "server_ratio_read_100": round(typical_us / typical(batch.ref_us), 4)} if batch.ref_us else {}),
        "ping_client_us": round(ping_rtt, 2),
        "client_ratio_ping": round(rtt_us / ping_rtt, 4),
        # With --bench-count-instructions: the count gate's figure, deterministic where the times are not.
        **({"instructions": instruction_counts[case_name]["instructions"],
            "instructions_by_command": instruction_counts[case_name]["commands"]}
           if case_name in instruction_counts else {}),
    })


def test_reference_ping(benchmark, env: Env) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = env.build  # type: ignore[attr-defined]
    assert benchmark.pedantic(env.client.ping, rounds=ROUNDS, iterations=1) is True
    benchmark.extra_info.update({"build": env.build, "command": "ping"})  # type: ignore[attr-defined]


def test_reference_noop_script(benchmark, env: Env) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = env.build  # type: ignore[attr-defined]
    calls0, usec0 = command_stats(env.client, "eval")
    assert benchmark.pedantic(env.noop_eval, rounds=ROUNDS, iterations=1) == 0
    calls1, usec1 = command_stats(env.client, "eval")
    benchmark.extra_info.update({"build": env.build, "command": "eval",  # type: ignore[attr-defined]
                                 "server_us_mean": round((usec1 - usec0) / max(1, calls1 - calls0), 3)})
