"""The timing gate's unit of replication: a fresh server process.

Two passes on one server process share its hash seed, its allocator's
layout and whatever the machine did to that process; the spread between
them leaves out how far two processes of the same build differ, which is
what a later gate run, on a process of its own, draws from. So each pass a
baseline pools, and the confirmation of a flagged verb, runs on a new
process of the judged server's spec, started for it and stopped after it.
Each process is named in the record by what INFO server says of it: its
run_id (new with every start), pid and port.

A server this command only reaches (a URL) cannot be started again: a
baseline is not written from one, and a confirmation there re-measures the
same process, which the record shows by its run_id.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from echomq_bench.records.kinds.gate import ServerProcess

__all__ = ["JUDGED", "CONFIRMATION", "can_start_again", "process_of", "on_fresh_server", "distinct_processes",
           "UNSTARTABLE"]

JUDGED = "judged"
CONFIRMATION = "confirmation"
UNSTARTABLE = ("a timing baseline pools passes on fresh server processes, so it is written only from a server this "
               "command starts (a build or NAME=BINARY); {name} is one it only reaches")

T = TypeVar("T")


def can_start_again(server: Any) -> bool:
    """Whether a new process of this server's spec can be started: an embedded server's."""
    spec = getattr(server, "spec", None)
    return spec is not None and getattr(spec, "kind", None) == "embedded"


def process_of(client: Any, role: str) -> ServerProcess:
    """The server process behind `client`, as INFO server names it."""
    info = client.info("server")
    pid, port = info.get("process_id"), info.get("tcp_port")
    return ServerProcess(role=role, run_id=str(info.get("run_id") or ""), pid=int(pid) if pid is not None else None,
                         port=int(port) if port is not None else None)


def on_fresh_server(server: Any, role: str, work: Callable[[Any], T]) -> tuple[T, ServerProcess]:
    """`work(client)` on a new process of `server`'s spec, stopped afterwards, and that process; on `server`
    itself when it is one this command cannot start again."""
    from echomq_bench.servers import start

    fresh = start(server.spec) if can_start_again(server) else None
    try:
        client = (fresh or server).client()
        try:
            return work(client), process_of(client, role)
        finally:
            client.close()
    finally:
        if fresh is not None:
            fresh.stop()


def distinct_processes(servers: Any) -> int:
    """How many distinct server processes a list of ServerProcess entries (or their dicts) names."""
    return len({s.run_id if isinstance(s, ServerProcess) else str(s.get("run_id") or "") for s in servers})
