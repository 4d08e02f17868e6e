"""Running a Worker's handler on a round's jobs, sync or async, and what it raised.

    with HandlerRunner(handle, concurrency=4) as runner:
        results = runner.run(jobs)     # per job: None (returned), its failure, or NOT_RUN
        runner.ending                  # a KeyboardInterrupt or SystemExit to raise once the round is settled

A handler is a plain callable or an `async def` function. An async handler
runs on an event loop the runner owns for its whole life, in a thread of its
own, `concurrency` coroutines at a time: a client session the handler opens
on its first job stays usable for the next. A plain handler runs inline
(concurrency 1) or on a thread pool; when it returns an awaitable (a lambda
around an async function, a sync decorator over one), that awaitable is run
on the same loop before the job counts as done. A result the runner cannot
run (a generator, an async generator) fails the job, never completes it: its
body never ran.

Whatever a handler raises is the job's failure, the round goes on. Only
KeyboardInterrupt and SystemExit end the Worker: the jobs already handled are
settled first, and the jobs of the round not yet started are left to their
leases (NOT_RUN).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from types import TracebackType
from typing import Any, Awaitable, Callable, Sequence, TypeVar

__all__ = ["HandlerRunner", "NOT_RUN", "ENDS_WORKER", "HandlerResultError", "error_text", "is_async"]

T = TypeVar("T")

# What a handler may raise that ends its Worker rather than failing its job.
ENDS_WORKER = (KeyboardInterrupt, SystemExit)


class _NotRun:
    def __repr__(self) -> str:
        return "NOT_RUN"


NOT_RUN = _NotRun()  # a job of a round that a worker-ending exception stopped before its handler ran
Result = BaseException | None | _NotRun


class HandlerResultError(TypeError):
    """A handler returned what the Worker cannot run to the end: the job fails with it."""


def is_async(handler: Callable[..., object]) -> bool:
    """An `async def` function, a partial of one, or an object whose __call__ is one."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)


def error_text(exc: BaseException, cap: int) -> bytes:
    """`TypeName: message` as valid UTF-8 of at most `cap` bytes, whatever the
    exception holds: a lone surrogate (as json makes of bad bytes) is escaped,
    and a __str__ that raises is named instead of read."""
    name = type(exc).__name__
    try:
        message = str(exc)
    except Exception as inner:  # the exception's own text is broken; say so, keep the job's failure
        message = f"<str() raised {type(inner).__name__}>"
    text = f"{name}: {message}" if message else name
    data = text.encode("utf-8", "backslashreplace")
    # Cut on a character boundary so that last_error stays valid UTF-8.
    return data[:cap].decode("utf-8", "ignore").encode("utf-8")


class HandlerRunner:
    """Runs one handler on the jobs of each round; see the module docstring."""

    def __init__(self, handler: Callable[[Any], object], concurrency: int) -> None:
        self.handler = handler
        self.concurrency = concurrency
        self.is_async = is_async(handler)
        self.ending: BaseException | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()
        self._slots: asyncio.Semaphore | None = None

    def __enter__(self) -> HandlerRunner:
        if self.is_async:
            self._start_loop()
        elif self.concurrency > 1:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="echomq-handler")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._pool is not None:
            # After a worker-ending exception, handlers still running are not waited for.
            self._pool.shutdown(wait=self.ending is None and exc is None, cancel_futures=True)
        self._stop_loop()

    # -- a round ---------------------------------------------------------------

    def run(self, jobs: Sequence[Any]) -> list[Result]:
        """Each job's result: None when the handler returned, the exception
        when it failed, NOT_RUN when a worker-ending exception came first."""
        if self.is_async:
            assert self._loop is not None
            futures = [asyncio.run_coroutine_threadsafe(self._async_one(job), self._loop) for job in jobs]
            return self._gathered(futures)
        if self._pool is not None:
            return self._gathered([self._pool.submit(self._sync_one, job) for job in jobs])
        return [self._sync_one(job) for job in jobs]

    def _gathered(self, futures: list[Future[Result]]) -> list[Result]:
        try:
            wait(futures)
        except ENDS_WORKER as exc:  # interrupted while waiting: settle what finished
            self._end(exc)
            for future in futures:
                future.cancel()
        return [future.result() if future.done() and not future.cancelled() else NOT_RUN for future in futures]

    def _end(self, exc: BaseException) -> None:
        if self.ending is None:
            self.ending = exc

    def _sync_one(self, job: Any) -> Result:
        if self.ending is not None:  # a handler ended the Worker before this job's turn came
            return NOT_RUN
        try:
            result = self.handler(job)
            if inspect.isawaitable(result):
                result = self._on_loop(_awaited(result))
            _check_finished(result)
        except ENDS_WORKER as exc:
            self._end(exc)
            return exc
        except BaseException as exc:  # the job failed, not the worker: CancelledError included
            return exc
        return None

    async def _async_one(self, job: Any) -> Result:
        assert self._slots is not None
        async with self._slots:
            if self.ending is not None:  # a handler ended the Worker before this job's turn came
                return NOT_RUN
            try:
                result = self.handler(job)
                while inspect.isawaitable(result):
                    result = await result
                _check_finished(result)
            except ENDS_WORKER as exc:
                self._end(exc)
                return exc
            except BaseException as exc:  # CancelledError of the handler's own making fails the job
                return exc
            return None

    # -- the event loop ----------------------------------------------------------

    def _on_loop(self, coro: Awaitable[T]) -> T:
        """Run a sync handler's awaitable to the end on the runner's loop, from the handler's thread."""
        self._start_loop()
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]

    def _start_loop(self) -> None:
        with self._loop_lock:
            if self._loop is not None:
                return
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                self._slots = asyncio.Semaphore(self.concurrency)
                loop.call_soon(ready.set)
                loop.run_forever()

            self._loop_thread = threading.Thread(target=serve, name="echomq-loop", daemon=True)
            self._loop_thread.start()
            ready.wait()
            self._loop = loop

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._loop_thread
        if loop is None or thread is None:
            return

        async def close() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()

        asyncio.run_coroutine_threadsafe(close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
        self._loop = self._loop_thread = None


async def _awaited(awaitable: Awaitable[T]) -> T:
    # run_coroutine_threadsafe takes a coroutine; a Future or custom awaitable is awaited inside one.
    return await awaitable


def _check_finished(result: object) -> None:
    """A result that is work not yet done fails the job: completing it would skip its body."""
    if inspect.isgenerator(result):
        result.close()
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        raise HandlerResultError(f"the handler returned a {type(result).__name__}, which is work not yet done: the "
                                 "Worker does not iterate it, so the job is not complete; make the handler a "
                                 "plain function that returns when the work is done, or an async def function")
