"""A TCP proxy between the load and the server whose network faults are
switched on and off while traffic flows.

    proxy = FaultProxy("127.0.0.1", server.port).start()   # its own thread and event loop
    redis.Redis(port=proxy.port)                            # clients connect here
    proxy.latency(20, jitter_ms=10)     # each direction, in order: a byte never overtakes another
    proxy.bandwidth(64_000)             # bytes per second, each direction of each connection
    proxy.reset()                       # every open connection: RST to both ends (SO_LINGER 0)
    proxy.blackhole(2.0)                # nothing forwarded for 2 s, connections held open
    proxy.half_open()                   # the server's side closed, the client's left silent
    proxy.drop_next_reply()             # the next reply is swallowed and its connection reset
    proxy.corrupt_next_reply()          # the next reply's first byte becomes one RESP does not know
    proxy.clear()                       # all faults off

A blackhole is a partition that heals: what was sent into it is held and
delivered once it lifts, as TCP would retransmit it, even when the client
has given up and closed meanwhile. A call that timed out during a partition
can therefore still run on the server after it. New connections made during
a blackhole are accepted and held until it lifts.

Standard library only; every control method is safe to call from any thread.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Coroutine

__all__ = ["FaultProxy", "Faults"]

CHUNK = 65536
# No RESP2 or RESP3 reply starts with this byte: a client cannot parse what follows.
NOT_RESP = b"@"


@dataclass
class Faults:
    """The faults in force; the pumps read these on every chunk."""

    latency_s: float = 0.0
    jitter_s: float = 0.0
    bytes_per_s: float | None = None
    drop_replies: int = 0          # replies still to swallow, each with a reset
    corrupt_replies: int = 0       # replies still to deliver with their first byte NOT_RESP


@dataclass(eq=False)
class _Link:
    """One client connection and its upstream connection."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    silent: bool = False           # half-open: nothing more reaches the client


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int, *, host: str = "127.0.0.1", port: int = 0,
                 seed: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listen = (host, port)
        self.faults = Faults()
        self.counts: Counter[str] = Counter()   # accepted, resets, half_open, replies_dropped, replies_corrupted
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._links: set[_Link] = set()
        self._flowing: asyncio.Event | None = None
        self._heal: asyncio.TimerHandle | None = None
        self._server: asyncio.base_events.Server | None = None
        # The loop holds its tasks only weakly: a link dropped by a reset would
        # take its pumps with it, destroyed while pending. The proxy holds them.
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    # ----------------------------------------------------------------------
    # Life

    def start(self) -> FaultProxy:
        self._thread.start()
        self._call(self._open)
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        # A task a cancelled one started on its way out is still pending: cancel
        # and await those too, as asyncio.run does, or closing the loop destroys
        # them mid-flight and Python prints a warning for each.
        if not self._thread.is_alive():
            left = asyncio.all_tasks(self._loop)
            for task in left:
                task.cancel()
            if left:
                self._loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run fn(*args) (a coroutine function or a plain one) on the loop and wait for it."""
        async def run() -> Any:
            out = fn(*args)
            return await out if asyncio.iscoroutine(out) else out
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    async def _open(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, *self.listen)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            self._abort(link, rst=False)
        if self._flowing is not None:
            self._flowing.set()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    # ----------------------------------------------------------------------
    # Faults, from any thread

    def latency(self, ms: float, jitter_ms: float = 0.0) -> None:
        """Delay every chunk by ms, plus up to jitter_ms more, in each direction."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError(f"latency and jitter must be >= 0 ms, got {ms} and {jitter_ms}")
        self.faults.latency_s, self.faults.jitter_s = ms / 1000, jitter_ms / 1000

    def bandwidth(self, bytes_per_s: float | None) -> None:
        """Cap each direction of each connection; None lifts the cap."""
        if bytes_per_s is not None and bytes_per_s <= 0:
            raise ValueError(f"bandwidth must be > 0 bytes/s or None, got {bytes_per_s}")
        self.faults.bytes_per_s = bytes_per_s

    def reset(self) -> int:
        """Reset every open connection, both ends; the number reset."""
        return int(self._call(self._reset_all))

    def blackhole(self, seconds: float | None = None) -> None:
        """Forward nothing until `heal()`, or for `seconds`; connections stay open."""
        self._call(self._blackhole, seconds)

    def heal(self) -> None:
        self._call(self._lift)

    def half_open(self) -> int:
        """Close the server's side of every open connection and leave the
        client's open and silent: its next call hears nothing. The number cut."""
        return int(self._call(self._half_open))

    def drop_next_reply(self, count: int = 1) -> None:
        """Swallow the next `count` replies from the server, resetting the
        connection each came on: the call ran, its caller hears a reset."""
        self.faults.drop_replies = count

    def corrupt_next_reply(self, count: int = 1) -> None:
        """Deliver the next `count` replies from the server with their first
        byte replaced by one RESP does not know: the call ran, its caller
        cannot parse the answer. A reply is the next chunk the server sends,
        which on a quiet connection is one call's reply whole."""
        self.faults.corrupt_replies = count

    def clear(self) -> None:
        self.faults.latency_s = self.faults.jitter_s = 0.0
        self.faults.bytes_per_s = None
        self.faults.drop_replies = 0
        self.faults.corrupt_replies = 0
        self.heal()

    @property
    def connections(self) -> int:
        return len(self._links)

    # ----------------------------------------------------------------------
    # The loop's side

    def _blackhole(self, seconds: float | None) -> None:
        assert self._flowing is not None
        self._flowing.clear()
        if self._heal is not None:
            self._heal.cancel()
        self._heal = self._loop.call_later(seconds, self._lift) if seconds is not None else None

    def _lift(self) -> None:
        assert self._flowing is not None
        self._flowing.set()
        if self._heal is not None:
            self._heal.cancel()
            self._heal = None

    def _reset_all(self) -> int:
        links = list(self._links)
        for link in links:
            self._abort(link, rst=True)
        self.counts["resets"] += len(links)
        return len(links)

    def _half_open(self) -> int:
        cut = 0
        for link in list(self._links):
            if link.upstream is not None and not link.silent:
                link.silent = True
                link.upstream.close()
                cut += 1
        self.counts["half_open"] += cut
        return cut

    def _abort(self, link: _Link, rst: bool) -> None:
        for writer in (link.client, link.upstream):
            if writer is None:
                continue
            if rst:
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            if rst:
                writer.transport.abort()
            else:
                writer.close()
        for task in link.tasks:
            task.cancel()
        self._links.discard(link)

    def _finish(self, link: _Link) -> None:
        """One end closed and what it sent is delivered: close both, forget the link."""
        for writer in (link.client, link.upstream):
            if writer is not None:
                writer.close()
        self._links.discard(link)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counts["accepted"] += 1
        link = _Link(writer)
        self._links.add(link)
        assert self._flowing is not None
        try:
            await self._flowing.wait()  # a partition holds new connections too
            up_reader, link.upstream = await asyncio.open_connection(*self.upstream)
        except (OSError, asyncio.CancelledError):
            self._abort(link, rst=False)
            return
        if link not in self._links:  # reset while connecting
            link.upstream.close()
            return
        link.tasks = [self._spawn(self._pump(link, reader, link.upstream, to_client=False)),
                      self._spawn(self._pump(link, up_reader, writer, to_client=True))]

    async def _pump(self, link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    to_client: bool) -> None:
        """Read one direction into a queue; a second task delivers it when due."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        deliver = self._spawn(self._deliver(link, queue, writer, to_client))
        link.tasks.append(deliver)
        due = 0.0
        try:
            while True:
                data = await reader.read(CHUNK)
                f = self.faults
                delay = f.latency_s + (self._rng.uniform(0, f.jitter_s) if f.jitter_s else 0.0)
                due = max(due, time.monotonic() + delay)  # jitter never reorders bytes
                queue.put_nowait((due, data))
                if not data:
                    return
        except (OSError, asyncio.CancelledError):
            queue.put_nowait((0.0, b""))

    async def _deliver(self, link: _Link, queue: asyncio.Queue[tuple[float, bytes]],
                       writer: asyncio.StreamWriter, to_client: bool) -> None:
        assert self._flowing is not None
        free_at = 0.0
        try:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                await self._flowing.wait()
                if not data:
                    if not link.silent:
                        self._finish(link)
                    elif not to_client:  # the silent client went away at last
                        self._abort(link, rst=False)
                    return
                if to_client and self.faults.drop_replies > 0:
                    self.faults.drop_replies -= 1
                    self.counts["replies_dropped"] += 1
                    self._abort(link, rst=True)
                    return
                if to_client and self.faults.corrupt_replies > 0:
                    self.faults.corrupt_replies -= 1
                    self.counts["replies_corrupted"] += 1
                    data = NOT_RESP + data[1:]
                free_at = await self._throttle(free_at, len(data))
                if link.silent:
                    continue  # half-open: the server's side is gone, the client hears nothing
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            return

    async def _throttle(self, free_at: float, size: int) -> float:
        """Wait until the capped link has room for `size` bytes; when it is next free."""
        rate = self.faults.bytes_per_s
        if rate is None:
            return 0.0
        start = max(free_at, time.monotonic())
        done = start + size / rate
        wait = done - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        return done
