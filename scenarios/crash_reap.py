"""Crashes and the reaper: consumers die mid-work at --crash-rate and
abandon their leases; the pump reaps expired leases every --reap-every and
the jobs are claimed again. Of the crashed, --zombie-share come back after
their lease is gone and complete with the old token: every one of those
completes must be refused (counted as "complete (zombie refused)", not as
failures; an accepted one fails the run).

Recovery latency is its own metric (request type "recovery"): from the
lease deadline to the next claim of the job, and from the crash to it.

    locust -f scenarios/crash_reap.py --headless -u 20 -r 20 -t 30s --csv out/crash
"""

from echomq_bench.locust import Consumer, ConsumerSteps, install

install("crash_reap", lease="500ms", work="exp:mean=10ms", crash_rate=0.05, zombie_share=0.5,
        reap_every="100ms", promote_every="1s", max_attempts=3)


class CrashingConsumer(Consumer):
    pass


__all__ = ["CrashingConsumer", "ConsumerSteps"]
