"""Worker: the loop every echomq user would otherwise write by hand.

    worker = Worker(queue, handle, WorkerSettings(concurrency=4))
    worker.run()            # until stop(), SIGINT or SIGTERM; or burst=True: until the queue is empty

A round runs the handler on each job it holds (`concurrency` at a time; a
plain or an `async def` handler, `echomq.handlers`), then sends every
complete and retry of the round in one pipelined round trip, and the next
round's `batch` claims ride in that same pipeline: a steady Worker makes one
round trip per round. Claims go out alone only for the first round, and
after claims that found nothing or failed (after a wait of `poll_ms`), and
at once after claims that buried their scan limit of damaged ids (jobs may
wait behind them). A stopping Worker sends its settles without claims, so no
job is leased that nobody will run. A handler that returns completes its
job; one that raises, whatever it raises, retries it, after a full-jitter
exponential backoff, and the retry script moves it to the dead set at the
queue's max_attempts. Only KeyboardInterrupt and SystemExit end run(), after
the round's handled jobs are settled. A separate thread runs the pumps, reap
every `pump_interval_ms` and promote every `promote_interval_ms` and when a
retry this Worker scheduled falls due, and goes on whatever a round raises
(`echomq.pumps`); `health()` shows from any thread how the Worker fares, and
when its last round trip ended.

Every call comes from the consume step (`echomq.consume`), which the load
engine's consumers share, and is sent by `echomq.pipeline`: the Worker has
no script call of its own. The complete and retry verbs are fenced by the
claim's token, so a worker whose lease was reaped cannot finish the job:
that reply (EMQSTALE) is counted as `lost`, never as done.

Each pipeline is sent once, whatever the client's retry settings, and its
replies are judged call by call. When a complete's or retry's reply is lost, it
is settled as `Queue.complete` and `Queue.retry` settle theirs
(`echomq.queue.settle`): the job's row, and the lease its claim registered
(`echomq.queue.leased`), decide, within the Queue's judge_timeout_ms. A
reply not read within `reply_timeout_ms` is lost. When a claim's reply is lost, it is
counted as an error and not resent: the job it may have leased returns
through reap once its lease expires (docs/design/outcomes.md).
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterator, Sequence

import redis

from . import pipeline, verbs
from .errors import (EchoMQError, InvalidArgumentError, MalformedReplyError, RepliesLostError,
                     ServerUnavailableError)
from .args import INT31, MAX_LIMIT, check_int
from .consume import OUTCOMES, ConsumeStep
from .handlers import NOT_RUN, HandlerRunner, Result, error_text
from .pumps import PumpClock, Tally, WorkerHealth, pump_thread
from .queue import Job, Queue, buried, leased, settle
from .verbs import ScriptCall

__all__ = ["Worker", "WorkerSettings", "WorkerStats", "WorkerHealth", "Handler", "OnSettled", "OUTCOMES"]

log = logging.getLogger("echomq.worker")

# A plain function or an `async def` one (echomq.handlers); raise to retry the job.
Handler = Callable[[Job], object]
# Called once per claimed job after its round is settled, with one of OUTCOMES (echomq.consume).
OnSettled = Callable[[Job, str], None]

MAX_CONCURRENCY = 1024
MAX_BATCH = 10_000
MAX_ERROR_BYTES = 2048


@dataclass(frozen=True)
class WorkerSettings:
    """How a Worker claims, runs and settles; checked when made."""

    concurrency: int = 1               # handler calls running at once (threads when over 1)
    batch: int | None = None           # claims per round trip; None: the same as concurrency
    lease_ms: int = 30_000             # each claim's lease: the crash detector
    pumps: bool = True                 # run reap and promote on a cadence in this worker
    pump_interval_ms: int | None = None  # reap's cadence; None: lease_ms // 2
    promote_interval_ms: int | None = None  # promote's cadence; None: pump_interval_ms. A retry this
    #                                         Worker schedules is promoted when it falls due, either way
    reap_limit: int = 100
    promote_limit: int = 100
    retry_base_ms: int = 50            # retry delay: uniform over 0 .. min(cap, base * 2^(attempt-1))
    retry_cap_ms: int = 2_000
    poll_ms: int = 250                 # wait after a round that claimed nothing, or a failed call
    burst: bool = False                # stop at the first round that claims nothing
    handle_signals: bool = True        # SIGINT and SIGTERM call stop() (main thread only)
    reply_timeout_ms: int = 30_000     # a round trip's replies not read by then are lost replies, judged

    def __post_init__(self) -> None:
        ranges = {"concurrency": (1, MAX_CONCURRENCY), "batch": (1, MAX_BATCH), "lease_ms": (1, INT31),
                  "pump_interval_ms": (1, INT31), "promote_interval_ms": (1, INT31), "reply_timeout_ms": (1, INT31),
                  "reap_limit": (1, MAX_LIMIT),
                  "promote_limit": (1, MAX_LIMIT), "retry_base_ms": (0, INT31), "retry_cap_ms": (0, INT31),
                  "poll_ms": (1, INT31)}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ranges:
                if value is not None or f.name not in ("batch", "pump_interval_ms", "promote_interval_ms"):
                    # Frozen, so set through object: the int the scripts will be sent, not an IntEnum.
                    object.__setattr__(self, f.name, check_int(f.name, value, *ranges[f.name]))
            elif not isinstance(value, bool):
                raise InvalidArgumentError(f"{f.name} must be True or False, got {value!r}")

    @property
    def claim_batch(self) -> int:
        return self.batch if self.batch is not None else self.concurrency

    @property
    def pump_interval_s(self) -> float:
        ms = self.pump_interval_ms if self.pump_interval_ms is not None else max(1, self.lease_ms // 2)
        return ms / 1000.0

    @property
    def promote_interval_s(self) -> float:
        ms = self.promote_interval_ms
        return ms / 1000.0 if ms is not None else self.pump_interval_s

    def retry_delay_ms(self, attempt: int, rng: random.Random) -> int:
        """Full jitter after attempt number `attempt` (the claim's token)."""
        ceiling = min(self.retry_cap_ms, self.retry_base_ms * 2.0 ** min(attempt - 1, 62))
        return int(rng.uniform(0.0, ceiling))


@dataclass
class WorkerStats:
    """What one Worker did; jobs counted once each, by their round's outcome."""

    rounds: int = 0
    claimed: int = 0
    completed: int = 0
    retried: int = 0
    dead: int = 0
    lost: int = 0
    unsettled: int = 0
    unknown: int = 0
    errors: int = 0        # claim and pump calls that failed: refused, unanswered, or raising in the client
    reaped: int = 0
    promoted: int = 0


def _is_error(reply: Any) -> bool:
    return isinstance(reply, (EchoMQError, redis.exceptions.RedisError))


class Worker:
    """Claims jobs from one queue and runs a handler on each.

    The handler takes the Job; a plain function or an `async def` one
    (`echomq.handlers`: an async handler runs on an event loop the Worker
    owns for its whole run). Its return value is discarded, since a
    completed echomq job leaves nothing behind.
    """

    def __init__(self, queue: Queue, handler: Handler, settings: WorkerSettings | None = None, *,
                 on_settled: OnSettled | None = None, rng: random.Random | None = None) -> None:
        if not isinstance(queue, Queue):
            raise InvalidArgumentError(f"Worker needs an echomq Queue, got {type(queue).__name__}")
        if not callable(handler):
            raise InvalidArgumentError(f"handler must be callable, got {type(handler).__name__}")
        if settings is not None and not isinstance(settings, WorkerSettings):
            raise InvalidArgumentError(f"settings must be a WorkerSettings, got {type(settings).__name__}")
        self.queue = queue
        self.handler = handler
        self.settings = settings or WorkerSettings()
        self.on_settled = on_settled
        self.rng = rng or random.Random()
        self.stats = WorkerStats()
        self._step = ConsumeStep(queue.keys, self.settings.lease_ms, self.settings.claim_batch, queue.max_attempts)
        self._stop = threading.Event()
        self._running = threading.Lock()
        self._tally = Tally(self.stats)  # the rounds and the pump thread both count errors
        self._clock: PumpClock | None = None
        self._buried = False  # the latest claims buried damaged ids and found no job: more may wait
        # A client whose socket_timeout is within reply_timeout_ms bounds every read itself:
        # a deadline of the Worker's own would only add a poll per round trip.
        timeout = getattr(getattr(queue.client, "connection_pool", None), "connection_kwargs", {}).get("socket_timeout")
        self._reads_bounded = timeout is not None and 0 < timeout * 1000 <= self.settings.reply_timeout_ms

    def stop(self) -> None:
        """Send no more claims; the jobs in hand (the round running, and any that
        claims already sent leased) are run and settled, then run() returns.
        Safe from any thread and from a signal handler."""
        self._stop.set()

    def health(self) -> WorkerHealth:
        """How this Worker fares now: a snapshot, safe to take from any thread
        (a handler's included) while run() runs in another."""
        return self._tally.health(running=self._running.locked())

    def run(self) -> WorkerStats:
        """Rounds until stop() (or, with burst, a round that claims nothing); the stats.
        A KeyboardInterrupt or SystemExit a handler raises ends it once the
        round's handled jobs are settled, and is raised again."""
        if not self._running.acquire(blocking=False):
            raise RuntimeError("this Worker is already running")
        try:
            with self._signals(), self._pumps(), HandlerRunner(self.handler, self.settings.concurrency) as runner:
                self._rounds(runner)
            return self.stats
        finally:
            self._running.release()

    # -- the rounds ----------------------------------------------------------

    def _rounds(self, runner: HandlerRunner) -> None:
        """Claim alone, then round after round while each settle pipeline's claims bring jobs."""
        jobs = None if self._stop.is_set() else self._claim_alone()
        while True:
            while jobs:  # leased to this Worker: run and settled even once it is stopping
                jobs = self._round(jobs, runner)
            # None: no claims went out (stopping), or every one failed. []: they found nothing.
            if self._stop.is_set():
                return
            if jobs == [] and self._buried:  # not empty: the claims buried damage, jobs may wait behind it
                jobs = self._claim_alone()
                continue
            if (jobs == [] and self.settings.burst) or self._stop.wait(self.settings.poll_ms / 1000.0):
                return
            jobs = self._claim_alone()

    def _claim_alone(self) -> list[Job] | None:
        """A round trip of claims only: the jobs they leased, or None when every one failed."""
        with self._tally.round_trip():
            sent = time.monotonic()
            return self._leased(self._send(self._step.claims), sent)

    def _round(self, jobs: list[Job], runner: HandlerRunner) -> list[Job] | None:
        """Run the jobs and settle them in one round trip, which carries the next
        round's claims unless the Worker is stopping: the jobs those claims leased;
        None when none went out or every one failed. A worker-ending exception
        from a handler is raised once the round's handled jobs are settled."""
        results = runner.run(jobs)
        if runner.ending is not None:
            self._stop.set()
        handled = [(job, result) for job, result in zip(jobs, results) if result is not NOT_RUN]
        for job, result in zip(jobs, results):
            if result is NOT_RUN:  # never run: its lease expires and reap hands it out again
                self._count(job, "unsettled")
        settles = self._settle_calls(handled)
        claims = () if self._stop.is_set() else self._step.claims
        with self._tally.round_trip():
            sent = time.monotonic()
            replies = self._send([*settles, *claims])
            self._settled([job for job, _ in handled], settles, replies[:len(settles)])
            leased = self._leased(replies[len(settles):], sent) if claims else None
        if runner.ending is not None:
            raise runner.ending
        return leased

    def _send(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """One pipeline, sent once: per call its reply, or where the reply was
        lost (the connection failed, or no reply came within reply_timeout_ms)
        the RepliesLostError that lost it; when nothing could be sent, each
        is the ServerUnavailableError. A call answered NOSCRIPT whose resend
        could not go out holds the error that stopped it among the others."""
        deadline = None if self._reads_bounded else time.monotonic() + self.settings.reply_timeout_ms / 1000.0
        try:
            return pipeline.send(self.queue, calls, deadline=deadline)
        except RepliesLostError as exc:
            lost = set(exc.lost)
            return [exc if i in lost else reply for i, reply in enumerate(exc.replies)]
        except ServerUnavailableError as exc:
            return [exc] * len(calls)

    def _leased(self, replies: Sequence[Any], sent: float) -> list[Job] | None:
        """The jobs claim replies hand out, each lease registered as taken at `sent`;
        None when every claim failed. A failed claim counts in errors and is not
        resent: a claim sent again would lease another job. A job a lost claim
        leased returns through reap once its lease expires."""
        lease_ms = self.settings.lease_ms
        jobs, failed = [], []
        self._buried = any(buried(reply) for reply in replies)
        for reply in replies:
            try:
                job = None if _is_error(reply) else leased(self.queue, reply, sent, lease_ms)
            except MalformedReplyError as exc:  # one unreadable reply: its lease runs out, the rest run
                reply = exc
            if _is_error(reply):
                failed.append(reply)
            elif job is not None:
                jobs.append(job)
        self.stats.claimed += len(jobs)
        if failed:
            self._tally.error("claim", failed[0], len(failed))
            if not jobs:
                return None
        self.stats.rounds += 1
        return jobs

    def _settle_calls(self, handled: Sequence[tuple[Job, Result]]) -> list[ScriptCall]:
        step, cap = self._step, min(MAX_ERROR_BYTES, self.queue.max_payload_bytes)
        calls = []
        for job, failure in handled:
            if failure is None:
                calls.append(step.settle(job.id, job.token))
                continue
            assert isinstance(failure, BaseException)
            text = error_text(failure, cap)
            log.info("job %s attempt %d failed: %s", job.id, job.token, text.decode("utf-8"))
            calls.append(step.settle(job.id, job.token, text, self.settings.retry_delay_ms(job.token, self.rng)))
        return calls

    def _settled(self, jobs: list[Job], calls: list[ScriptCall], replies: list[Any]) -> None:
        failure = next((r for r in replies if isinstance(r, ServerUnavailableError)), None)
        if failure is not None:
            log.warning("settling %d jobs: %s; a lost reply is judged from its job's row, and a job whose "
                        "call was not sent returns through reap once its lease expires", len(calls), failure)
        # One deadline for the round's judging: a silent server costs judge_timeout_ms once, not per job.
        deadline = time.monotonic() + self.queue.judge_timeout_s
        for job, call, reply in zip(jobs, calls, replies):
            if isinstance(reply, RepliesLostError):
                reply = self._resolve(call, reply, deadline)
            self.queue.leases.drop(job.id, job.token)  # settled or given up: no proof is needed again
            outcome = self._outcome(job, call.verb, reply)
            if outcome == "retried" and self._clock is not None:
                # Due on the server no later than delay_ms after this reply: promote then.
                self._clock.due_at(time.monotonic() + (verbs.fence(call).delay_ms or 0) / 1000.0)
            self._count(job, outcome)

    def _resolve(self, call: ScriptCall, lost: RepliesLostError, deadline: float) -> Any:
        """A call whose reply was lost, settled as Queue.complete and Queue.retry
        settle theirs, judged by `deadline`: its reply, or the error they would raise."""
        try:
            return settle(self.queue, call, lost, deadline)
        except (EchoMQError, redis.exceptions.RedisError) as exc:  # StaleTokenError, OutcomeUnknownError, ...
            return exc

    def _outcome(self, job: Job, verb: str, reply: Any) -> str:
        outcome = self._step.outcome(verb, reply)
        if outcome == "lost":
            log.warning("job %s: lease lost before its %s (token %d is stale); this attempt's result "
                        "is discarded", job.id, verb, job.token)
        elif outcome == "unknown":
            log.warning("job %s: %s", job.id, reply)
        elif outcome == "unsettled" and not isinstance(reply, ServerUnavailableError):
            log.error("job %s: %s refused: %s", job.id, verb, reply)
        return outcome

    def _count(self, job: Job, outcome: str) -> None:
        setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)
        if self.on_settled is not None:
            try:
                self.on_settled(job, outcome)
            except Exception:  # an observer's bug must not stop the jobs
                log.exception("on_settled raised for job %s (%s)", job.id, outcome)

    # -- what runs beside the rounds ------------------------------------------

    def _pumps(self) -> AbstractContextManager[None]:
        s, q = self.settings, self.queue
        if not s.pumps:
            return nullcontext()
        self._clock = PumpClock(s.pump_interval_s, s.promote_interval_s)
        return pump_thread(q, verbs.reap(q.keys, s.reap_limit, q.max_attempts), verbs.promote(q.keys, s.promote_limit),
                           self._clock, self._tally, s.reply_timeout_ms / 1000.0)

    @contextmanager
    def _signals(self) -> Iterator[None]:
        if not self.settings.handle_signals or threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_signal(signum: int, frame: object) -> None:
            log.info("%s: finishing the round in hand, then stopping", signal.Signals(signum).name)
            self.stop()

        before = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in before.items():
                # None: a handler set outside Python, which cannot be put back; the default stands in.
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
