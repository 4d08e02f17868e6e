"""What one sweep depends on, and the automatic choice of leases."""

from __future__ import annotations

import math
from dataclasses import dataclass

from echomq._instrument import INT31, MAX_LIMIT
from echomq_bench.errors import SettingsError
from echomq_bench.measurement.workdist import Distribution, parse_dist

__all__ = ["DEFAULT_WORK", "SettingsError", "SweepSettings", "auto_leases"]

DEFAULT_WORK = "lognormal:median=200ms,p99=1s"
# The short sweep (`lease --quick`, the main job): a 12 s window run 10 times faster, which confirms a
# lease at a 0.1% budget (docs/design/lease-model.md, "Confirming at a time scale"), and one mass crash.
QUICK = {"duration_s": 12.0, "warmup_s": 1.0, "mass_crash_reps": 1, "time_scale": 10.0}


@dataclass(frozen=True)
class SweepSettings:
    """Everything one sweep depends on. Durations are nominal milliseconds
    (what the user's system would see); `time_scale` divides them for the run."""

    work: str = DEFAULT_WORK
    leases_ms: tuple[float, ...] = ()          # empty: automatic, around the work's quantiles
    # 6% crash: about 450 crashes per lease in the default 60 s (and 760 in the quick form), over the
    # 367 a 95% upper bound on the p99 recovery needs (echomq_bench.lease.verdict.MIN_CRASHES).
    crash_rate: float = 0.06
    reap_every_ms: float = 250.0
    reap_cap: int = 100
    consumers: int = 32                        # per lease
    time_scale: float = 1.0
    duration_s: float = 60.0                   # real seconds of the counted window
    warmup_s: float = 1.0
    budget: float = 0.001                      # false-expiry budget (fraction of executions)
    recovery_tolerance_ms: float = 3000.0      # p99 of crash -> re-claim must fit
    mass_crash: int = 1000
    mass_crash_reps: int = 2
    seed: int = 1
    # Jobs always go back to pending: the sweep measures leases, not the morgue.
    max_attempts: int = 1_000_000

    def check(self) -> None:
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise SettingsError(what)

        parse_dist(self.work)
        need(0 <= self.crash_rate < 1, f"--crash-rate must be in [0, 1), got {self.crash_rate}")
        need(self.reap_every_ms > 0, f"--reap-every must be above 0, got {self.reap_every_ms} ms")
        need(1 <= self.reap_cap <= MAX_LIMIT, f"--reap-cap must be 1..{MAX_LIMIT}, got {self.reap_cap}")
        need(1 <= self.consumers <= 1000, f"--consumers must be 1..1000, got {self.consumers}")
        need(self.time_scale > 0, f"--time-scale must be above 0, got {self.time_scale}")
        need(self.duration_s > 0, f"--duration must be above 0, got {self.duration_s} s")
        need(0 < self.budget < 1, f"--budget must be in (0, 1), got {self.budget}")
        need(self.recovery_tolerance_ms > 0, "--recovery-tolerance must be above 0")
        need(self.mass_crash >= 0 and self.mass_crash_reps >= 0, "--mass-crash must be >= 0")
        need(len(set(self.leases_ms)) == len(self.leases_ms), "--leases repeats a lease")
        for lease in self.leases_ms:
            real = lease / self.time_scale
            need(real >= 1, f"lease {lease:g} ms runs as {real:.3g} ms at time scale {self.time_scale:g}: "
                            "under the 1 ms the server can express; lower --time-scale")
            need(real <= INT31, f"lease {lease:g} ms is over the server's limit")
        need(len(self.leases_ms) <= 12, "--leases: at most 12 leases in one sweep")

    def real_lease_ms(self, lease_ms: float) -> int:
        """The integer lease the server gets for a nominal lease."""
        return max(1, round(lease_ms / self.time_scale))

    def dist(self) -> Distribution:
        return parse_dist(self.work)


def _nice(x: float) -> float:
    """x rounded to two significant digits, so a lease reads like one a person would set."""
    if x <= 0:
        return x
    mag: float = 10 ** math.floor(math.log10(x) - 1)
    return round(x / mag) * mag


def auto_leases(dist: Distribution, budget: float, count: int = 5) -> tuple[float, ...]:
    """Leases at the work time's quantiles around the budget: p90, p99, then
    1-budget and one and two decades beyond, rounded; a point mass (const)
    gets multiples of its value instead."""
    probs = sorted({0.9, 0.99, 1 - budget, 1 - budget / 10, 1 - budget / 100})
    out = sorted({_nice(dist.quantile_ms(p)) for p in probs if 0 < p < 1})
    base = max(1.0, dist.quantile_ms(0.5))
    factor = 1.25
    while len(out) < count:
        out = sorted(set(out) | {_nice(base * factor)})
        factor *= 1.6
    return tuple(out[-count:]) if len(out) > count else tuple(out)
