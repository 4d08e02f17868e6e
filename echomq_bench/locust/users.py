"""The abstract Locust users over echomq, and the consumer-stepping shape."""

from __future__ import annotations

import random
import time
from typing import Any

from locust import LoadTestShape, User, constant, task
from locust.exception import StopUser

from echomq_bench.locust.client import Claimed, EchoClient, sleep_ms

__all__ = ["EchoMQUser", "Consumer", "ConsumerSteps"]


def _controller() -> Any:
    from echomq_bench.locust import controller

    return controller()


class EchoMQUser(User):
    """A Locust user over echomq (abstract).

    `self.client` has the measured verbs (enqueue, claim, complete, retry,
    promote, reap, pending_size) on the user's own connection; `self.queue`
    is the queue this user works on; `self.session` the run it belongs to.
    No wait between tasks: a consumer's pace is its work time.
    """

    abstract = True
    wait_time = constant(0)

    def on_start(self) -> None:
        session = _controller().session
        if session is None or session.gate.draining:
            raise StopUser()  # the run did not start (see the log) or is ending
        self.session = session
        self.settings = session.settings
        self.client: EchoClient = session.client(keep=False)
        self.queue = session.next_queue()
        self.rng = random.Random()

    def on_stop(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.wire.close()


class Consumer(EchoMQUser):
    """Claim, work for a drawn time, complete (abstract; scenarios subclass it).

    With --crash-rate the consumer dies at a random point of its work and
    abandons the lease (a replacement reconnects and goes on); with
    --zombie-share of those crashes the dead one comes back once its lease
    is gone and completes anyway: the fence must refuse it. With --fail-rate
    the work fails and the job is retried after an exponential backoff with
    full jitter, computed here, above the wire.
    """

    abstract = True

    @task
    def cycle(self) -> None:
        s, q, client = self.settings, self.queue, self.client
        job = client.claim(q)
        if job is None:
            sleep_ms(s.idle_wait_ms)
            return
        if job.token > 1 and s.crash_rate:
            client.note_reclaim(q, job)
        work_ms = s.work.sample_ms(self.rng)
        if s.crash_rate and self.rng.random() < s.crash_rate:
            self.crash(job, work_ms)
            return
        sleep_ms(work_ms)
        if s.fail_rate and self.rng.random() < s.fail_rate:
            client.retry(q, job.id, job.token, "work failed", self.session.backoff_ms(job.token, self.rng))
            return
        client.complete(q, job.id, job.token)

    def crash(self, job: Claimed, work_ms: float) -> None:
        sleep_ms(self.rng.random() * work_ms)
        self.client.note_crash(self.queue, job, time.time())
        if self.rng.random() < self.settings.zombie_share:
            self.session.spawn_zombie(self.queue, job)
        self.client.wire.reconnect()


class ConsumerSteps(LoadTestShape):
    """--steps 1,2,4,...: hold each consumer count for --step-time, then the
    next; stop after the last. One run gives throughput against consumers
    (printed at the end and written to steps.csv beside audit.json).
    Without --steps this shape is switched off and -u/-r/-t apply."""

    # Locust would otherwise warn, before any option is read, that -u/-r/-t
    # are ignored: they are not, unless --steps is given.
    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        ctl = _controller()
        steps, step_s = ctl.steps_plan()
        index = int(self.get_run_time() // step_s)
        if index >= len(steps):
            return None
        ctl.step_reached(index, steps[index])
        return steps[index], float(min(100, max(steps)))
