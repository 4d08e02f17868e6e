"""The abstract Locust users over echomq, and the consumer-stepping shape."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from locust import LoadTestShape, User, constant, task
from locust.exception import StopUser

from echomq_bench.load.engine import Consumer as ConsumerRole, ConsumerPolicy, Event
from echomq_bench.locust.calls import LocustCalls
from echomq_bench.locust.books import Claimed
from echomq_bench.locust.options import Settings

__all__ = ["EchoMQUser", "Consumer", "ConsumerSteps", "BackoffPolicy", "consumer_policy"]


def _controller() -> Any:
    from echomq_bench.locust.installed import controller

    return controller()


@dataclass(frozen=True)
class BackoffPolicy(ConsumerPolicy):
    """The engine's consumer policy with the scenarios' retry backoff: full
    jitter, uniform over [0, min(cap, base * 2^(attempt-1))]."""

    backoff_base_ms: float = 50.0
    backoff_cap_ms: float = 2000.0

    def retry_delay(self, attempt: int, rng: random.Random) -> int:
        ceiling = min(self.backoff_cap_ms, self.backoff_base_ms * 2.0 ** (attempt - 1))
        return int(rng.uniform(0.0, ceiling))


def consumer_policy(s: Settings) -> BackoffPolicy:
    """A Locust consumer's policy, from the scenario's settings."""
    return BackoffPolicy(lease_ms=s.lease_ms, work=s.work, fail_rate=s.fail_rate, crash_rate=s.crash_rate,
                         retry_error=b"work failed", max_attempts=s.max_attempts, idle_s=s.idle_wait_ms / 1000.0,
                         backoff_base_ms=s.backoff_base_ms, backoff_cap_ms=s.backoff_cap_ms)


class EchoMQUser(User):
    """A Locust user over echomq (abstract).

    `self.client` is the user's one client on its own connection: the
    engine's calls protocol, each call a Locust request, and the crash
    notes; `self.queue` is the queue this user works on; `self.session` the
    run it belongs to. No wait between tasks: a consumer's pace is its work
    time.
    """

    abstract = True
    wait_time = constant(0)

    def on_start(self) -> None:
        session = _controller().session
        if session is None or session.gate.draining:
            raise StopUser()  # the run did not start (see the log) or is ending
        self.session = session
        self.settings = session.settings
        self.client: LocustCalls = session.client(keep=False)
        self.queue = session.next_queue()
        self.rng = random.Random()

    def on_stop(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.wire.close()


class Consumer(EchoMQUser):
    """The engine's consumer role, one round per task: claim, work for a
    drawn time, complete (abstract; scenarios subclass it).

    With --crash-rate the consumer dies at a random point of its work and
    abandons the lease (a replacement reconnects and goes on); with
    --zombie-share of those crashes the dead one comes back once its lease
    is gone and completes anyway: the fence must refuse it. With --fail-rate
    the work fails and the job is retried after an exponential backoff with
    full jitter (`BackoffPolicy`).
    """

    abstract = True

    def on_start(self) -> None:
        super().on_start()
        self._books = self.session.recorder
        self._deadlines: dict[str, float] = {}  # job id -> wall-clock lease deadline, while held
        # Lease deadlines and re-claims matter only to crashes: without them the books hear each event alone.
        heard = self._heard if self.settings.crash_rate else self._books
        self.role = ConsumerRole(self.session.recorded(self.client, "user"), [self.queue.keys],
                                 consumer_policy(self.settings), heard, rng=self.rng)

    @task
    def cycle(self) -> None:
        self.role.step()

    def _heard(self, event: Event) -> None:
        self._books(event)
        if event.verb == "claim" and event.outcome == "claimed":
            self._deadlines[event.job_id] = time.time() + self.queue.lease_s
            if event.token > 1 and self.settings.crash_rate:
                self.client.note_reclaim(self.queue, event.job_id, event.token)
        elif event.verb in ("work", "crash"):
            deadline = self._deadlines.pop(event.job_id, 0.0)
            if event.verb == "crash":
                self.crash(Claimed(event.job_id, b"", event.token, deadline))

    def crash(self, job: Claimed) -> None:
        self.session.call_log.note("strike", "crash", job.id, job.token)
        self.client.note_crash(self.queue, job, time.time())
        if self.rng.random() < self.settings.zombie_share:
            self.session.spawn_zombie(self.queue, job)
        self.client.wire.reconnect()


class ConsumerSteps(LoadTestShape):
    """--steps 1,2,4,...: hold each consumer count for --step-time, then the
    next; stop after the last. One run gives throughput against consumers
    (printed at the end and kept in the run's record).
    Without --steps this shape is switched off and -u/-r/-t apply."""

    # Locust would otherwise warn, before any option is read, that -u/-r/-t
    # are ignored: they are not, unless --steps is given.
    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        ctl = _controller()
        steps, step_s = ctl.steps_plan()
        index = int(self.get_run_time() // step_s)  # type: ignore[no-untyped-call]  # Locust leaves it unannotated
        if index >= len(steps):
            return None
        ctl.step_reached(index, steps[index])
        return steps[index], float(min(100, max(steps)))
