"""The peers command: every adapter, in every mode, really drains every job once, on a real server.

"Really" is checked three ways, none of them an event count: the server
held N jobs after the enqueue and none of them afterwards (the test reads
each peer's keys itself, with plain commands); the job function ran
exactly N times in the consumer processes and saw the enqueued payload
each time, so no job was lost and none ran twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from echomq_bench.measurement.serverstats import bound

from echomq_bench.cli import main
from echomq_bench.peers import PEERS, PeerMissingError, get, modes_of
from echomq_bench.peers.runner import QUEUE_NAME, measure
from echomq_bench.records.files import load
from echomq_bench.records.kinds.peers import PeersRecord
from echomq_bench.servers import EmbeddedServer

N = 50
CONSUMERS = 2


def _keys(client: Any, pattern: str) -> list[bytes]:
    return list(client.scan_iter(match=pattern, count=1000))


def _echomq_left(c: Any) -> dict[str, int]:
    base = "emq:{%s}:" % QUEUE_NAME
    return {"pending": c.zcard(base + "pending"), "active": c.zcard(base + "active"),
            "dead": c.zcard(base + "dead"), "rows": len(_keys(c, base + "job:*"))}


def _bullmq_left(c: Any) -> dict[str, int]:
    base = f"bull:{QUEUE_NAME}:"
    rows = [k for k in _keys(c, base + "*") if k.decode()[len(base):].isdigit()]
    return {"wait": c.llen(base + "wait"), "active": c.llen(base + "active"),
            "completed": c.zcard(base + "completed"), "failed": c.zcard(base + "failed"), "rows": len(rows)}


def _rq_left(c: Any) -> dict[str, int]:
    return {"queued": c.llen(f"rq:queue:{QUEUE_NAME}"), "wip": c.zcard(f"rq:wip:{QUEUE_NAME}"),
            "failed": c.zcard(f"rq:failed:{QUEUE_NAME}"), "finished": c.zcard(f"rq:finished:{QUEUE_NAME}"),
            "rows": len(_keys(c, "rq:job:*")), "results": len(_keys(c, "rq:results:*"))}


def _arq_left(c: Any) -> dict[str, int]:
    return {"queued": c.zcard(f"arq:queue:{QUEUE_NAME}"), "rows": len(_keys(c, "arq:job:*")),
            "results": len(_keys(c, "arq:result:*")), "in_progress": len(_keys(c, "arq:in-progress:*"))}


def _celery_left(c: Any) -> dict[str, int]:
    return {"queued": c.llen(QUEUE_NAME), "unacked": c.hlen("unacked"),
            "results": len(_keys(c, "celery-task-meta-*"))}


def _dramatiq_left(c: Any) -> dict[str, int]:
    base = f"dramatiq:{QUEUE_NAME}"
    return {"queued": c.llen(base), "messages": c.hlen(base + ".msgs"), "dead": c.zcard(base + ".XQ"),
            "unacked": sum(c.scard(k) for k in _keys(c, "dramatiq:__acks__.*"))}


def _huey_left(c: Any) -> dict[str, int]:
    return {"queued": c.llen(f"huey.redis.{QUEUE_NAME}"), "results": c.hlen(f"huey.results.{QUEUE_NAME}")}


def _saq_left(c: Any) -> dict[str, int]:
    return {"queued": c.llen(f"saq:{QUEUE_NAME}:queued"), "incomplete": c.zcard(f"saq:{QUEUE_NAME}:incomplete"),
            "rows": len(_keys(c, f"saq:job:{QUEUE_NAME}:*"))}


def _streaq_left(c: Any) -> dict[str, int]:
    base = f"streaq:{QUEUE_NAME}:"
    return {"stream": c.xlen(base + "queues:normal"), "delayed": c.zcard(base + "queues:delayed:normal"),
            "running": c.scard(base + "index:running"), "rows": len(_keys(c, base + "task:data:*")),
            "tries": len(_keys(c, base + "task:retry:*")), "results": len(_keys(c, base + "task:results:*"))}


def _taskiq_left(c: Any) -> dict[str, int]:
    # Each entry of the stream is a job; its ack deletes it.
    return {"stream": c.xlen(QUEUE_NAME)}


# The test's own reading of each peer's keys, independent of the adapters'.
SERVER_LEFT: dict[str, Callable[[Any], dict[str, int]]] = {
    "echomq": _echomq_left,
    "echomq-raw": _echomq_left,
    "bullmq-node": _bullmq_left,
    "bullmq-py": _bullmq_left,
    "rq": _rq_left,
    "arq": _arq_left,
    "celery": _celery_left,
    "dramatiq": _dramatiq_left,
    "huey": _huey_left,
    "saq": _saq_left,
    "streaq": _streaq_left,
    "taskiq": _taskiq_left,
}
PAIRS = [(name, mode) for name in PEERS for mode in modes_of(name)]


def test_every_peer_has_a_server_side_check() -> None:
    assert set(SERVER_LEFT) == set(PEERS)


@pytest.mark.parametrize("server", ["redis"], indirect=True)
@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_each_queue_drains_every_job_exactly_once(name: str, mode: str, server: EmbeddedServer,
                                                   tmp_path: Path) -> None:
    try:
        get(name, mode).check()
    except PeerMissingError as exc:
        pytest.skip(str(exc))
    client = server.client()
    client.flushall()

    run = measure(server, name, N, CONSUMERS, mode=mode, log_dir=tmp_path)

    # On the server: N jobs were pending once enqueued ...
    assert run.after_enqueue["pending"] == N, run.after_enqueue
    assert run.after_enqueue["rows"] == N, run.after_enqueue
    # ... and nothing is left, read with our own commands.
    left = SERVER_LEFT[name](client)
    assert all(v == 0 for v in left.values()), left
    # In the consumers: the job function ran once per job, on the payload enqueued.
    assert run.accepted == N
    assert run.ran == N
    assert run.intact == N
    assert run.clean, run.problems()
    # The figures exist and are per job.
    assert run.enqueue.jobs_per_s > 0 and run.drain.jobs_per_s > 0
    assert run.server_us_per_job > 0
    assert run.commands_per_job >= 2  # at least one command to add and one to finish each job
    assert run.round_trips_per_job > 0
    assert run.bytes_per_pending_job > 0
    assert run.mode == mode
    if name.startswith("bullmq"):
        # BullMQ numbers its jobs from a counter: exactly N were ever added.
        assert int(client.get(f"bull:{QUEUE_NAME}:id")) == N
    client.close()


def test_cli_writes_summary_csv_meta_and_ratios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["peers", "--server", "valkey", "--queue", "echomq,bullmq-node", "--mode", "default",
                 "--jobs", "300", "--consumers", "1", "--trials", "2", "--quick", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed

    record = PeersRecord.from_record(json.loads((out / "summary.json").read_text()))
    assert [(e.queue, e.mode) for e in record.queues] == [("echomq", "default"), ("bullmq-node", "default")]
    entry, base = record.queues
    assert entry.server == "valkey" and entry.drained_clean is True and entry.ran == (300, 300)
    for key in ("jobs_per_s", "server_us_per_job", "commands_per_job", "round_trips_per_job"):
        assert getattr(entry, key) > 0
        figure = entry.ci[key]
        assert figure.n == 2 and figure.ci is not None and figure.mean is not None
        assert figure.ci[0] <= figure.mean <= figure.ci[1]
    assert entry.enqueue.jobs_per_s and entry.drain.jobs_per_s
    assert entry.memory.bytes_per_pending_job
    assert entry.settings["in_flight_per_consumer"] == 1 and base.settings["concurrency"] == 1
    # Two trials are fewer than the verdict method needs: the ratio has an interval and no verdict.
    ratio = entry.vs_baseline["server_us_per_job"]
    assert ratio.n == 2 and ratio.text == "inconclusive (2 trials)" and ratio.ratio is not None and ratio.ci
    assert base.vs_baseline == {}
    # The bottleneck written is the one the written utilisations give.
    drain = entry.drain
    assert drain.bottleneck == bound(drain.server_utilization, drain.client_utilization)

    run = load(out)
    assert run.meta["settings"]["kind"] == "peers"
    assert run.meta["servers"][0]["version"].startswith("valkey")
    tidy = run.table("peers")
    assert set(tidy["phase"]) == {"enqueue", "drain", "total"}
    assert set(tidy["mode"]) == {"default"}
    ratios = run.table("peers_ratios")
    assert set(ratios["queue"]) == {"echomq"}
    assert ratios[ratios.metric == "server_us_per_job"]["ratio"].iloc[0] == pytest.approx(ratio.ratio)
    commands = run.table("peers_commands")
    assert "evalsha" in set(commands["command"])
    # What it printed is the record: each queue's figures and its ratio, in 100 columns.
    lines = printed.splitlines()
    assert max(map(len, lines)) <= 100, printed

    def fig(value: float) -> str:
        return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"

    def row(caption: str) -> list[str]:
        start = next(i for i, line in enumerate(lines) if line.startswith(caption))
        return next(line for line in lines[start:] if line.startswith("valkey  echomq ")).split()

    ci = {k: (v.mean or 0.0, v.ci or (0.0, 0.0)) for k, v in entry.ci.items()}
    assert row("Server cost per job")[3:5] == [fig(ci["server_us_per_job"][0]),
                                               "-".join(map(fig, ci["server_us_per_job"][1]))]
    assert row("Server cost per job")[6:] == [fig(ci[k][0]) for k in ("commands_per_job", "round_trips_per_job",
                                                                       "bytes_per_pending_job")]
    assert row("A job's whole life")[3] == fig(ci["jobs_per_s"][0])
    assert row("A job's whole life")[-3:] == ["2", "of", "2"]   # rounds that drained clean, of those run
    assert row("Ratio to bullmq-node")[3] == f"{ratio.ratio:.2f}" and "inconclusive" in row("Ratio to bullmq-node")
