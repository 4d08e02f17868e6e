"""The instrument's error tree, drawn once.

    BenchError                      every failure of echomq-bench that ends a command:
    │                               `cli.main` prints its message on one line, exit 2
    ├── SettingsError               a flag, option or settings value that cannot run;
    │   │                           the message names it (also ValueError)
    │   ├── DurationError           options: a duration that does not parse
    │   ├── DistError               measurement.workdist: a work-time distribution
    │   ├── SloSpecError            capacity.slo_spec: a latency target
    │   └── SoakError               faults.soak: a soak it cannot run
    ├── CapacityError               capacity.settings: the driver could not run, or
    │                               its run cannot be trusted
    ├── ServerError                 servers.errors: a server could not be described,
    │   │                           started or controlled
    │   ├── ServerSpecError         a --server spec or build that cannot be used
    │   │   └── BuildError          (also ValueError)
    │   ├── ServerStartError        ServerNotFoundError, ClusterNotReadyError
    │   └── TlsError                servers.tls: openssl missing or refused
    ├── ResultsError                records.record: a results folder or record that
    │   │                           cannot be read (also ValueError)
    │   └── HistoryError            records.history
    ├── BaselineError               microbench.baseline: a gate baseline (also ValueError)
    ├── CountBaselineError          counts.baseline: a count baseline (also ValueError)
    ├── PeerMissingError            peers.base: a peer queue's package is not installed
    └── MeasurementError            a measurement that could not finish or cannot be
        │                           trusted: the server, a child or a tool misbehaved
        ├── SweepError              lease.sweep
        ├── CallgrindError          counts.callgrind
        ├── MicrobenchError         microbench.runner
        ├── HarnessError            load.harness: a worker process failed, hung or died
        └── RunnerError             peers.runner

The client's own failures stay in its tree (`echomq.EchoMQError`); one that
reaches the command line (a server that misbehaves) ends it the same way.
This module imports nothing of the project, so every layer may raise from it.
"""

from __future__ import annotations

__all__ = ["BenchError", "SettingsError", "MeasurementError"]


class BenchError(Exception):
    """A failure of the instrument; the message says what and, where it can, what to do."""


class SettingsError(BenchError, ValueError):
    """Settings that cannot run; the message names the flag, option or setting."""


class MeasurementError(BenchError):
    """A measurement that could not finish or cannot be trusted; nothing half-measured is returned."""
