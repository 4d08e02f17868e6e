"""Retries and the dead set: work fails at --fail-rate; the consumer retries
with exponential backoff and full jitter (uniform over 0 to
min(--backoff-cap, --backoff-base * 2^(attempt-1))), computed here above the
wire. Jobs flow enqueue -> claim -> retry (scheduled) -> promote -> claim ...
and, at --max-attempts, retry (dead). With fail rate p and m attempts a
share p^m of jobs ends dead; the audit at the end accounts for every one.

    locust -f scenarios/retry_dead.py --headless -u 20 -r 20 -t 30s --csv out/retry
"""

from echomq_bench.locust import Consumer, ConsumerSteps, install

install("retry_dead", lease="30s", work="exp:mean=2ms", fail_rate=0.3, max_attempts=3,
        backoff_base="20ms", backoff_cap="500ms", promote_every="50ms", reap_every="1s")


class FailingConsumer(Consumer):
    pass


__all__ = ["FailingConsumer", "ConsumerSteps"]
