"""The headline scenario: producers enqueue, consumers claim, work for a
drawn time and complete; the pump reaps and promotes on its cadence.

    locust -f scenarios/claim_complete.py                      # web UI, embedded Redis
    locust -f scenarios/claim_complete.py --headless -u 50 -r 50 -t 30s --out out/run --csv out/locust
    locust -f scenarios/claim_complete.py --headless --steps 1,2,4,8,16,32,64 --step-time 10s

Users are consumers (-u is their number). With the defaults the work takes
no time and leases never expire, so the run measures claim/complete cycles
per second; --work exp:mean=20ms and the like make it a service. An audit of
every job ends the run, kept in its results folder (--out DIR, else
results/<utc time>-locust) with Locust's stats: echomq-bench report DIR.
"""

from echomq_bench.locust import Consumer, ConsumerSteps, install

install("claim_complete", lease="30s", work="const:0", reap_every="1s", promote_every="1s")


class ClaimComplete(Consumer):
    pass


__all__ = ["ClaimComplete", "ConsumerSteps"]
