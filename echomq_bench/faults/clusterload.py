"""The failover's load: one producer, the consumers and a reaper on cluster
clients (echomq_bench.load.engine), each in a thread of its own, each
recording its calls in a call-log file of its own
(echomq_bench.measurement.calllog). Their events go to the run's one
ledger recorder (echomq_bench.load.recorders) and, beside it, to a
`LoadWatch`: the calls made, and when enqueues resumed after a kill.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from echomq._instrument import QueueKeys
from echomq_bench.load.calls import RedisCalls
from echomq_bench.load.engine import (
    ConsumerPolicy, Consumer, Event, Producer, ProducerPolicy, Pump, PumpPolicy, Stop, now, start_thread,
)
from echomq_bench.load.recorders import LedgerRecorder
from echomq_bench.measurement.calllog import CallLog, FaultNow, LoggedCalls
from echomq_bench.servers import EmbeddedCluster

__all__ = ["LoadWatch", "LoadPolicies", "ClusterLoad", "cluster_client", "LEASE_MS", "PAUSE_AFTER_ERROR_S"]

LEASE_MS = 2000
PAUSE_AFTER_ERROR_S = 0.02
REAP_EVERY_S = 0.2


class LoadWatch:
    """What a failover learns from the events beside the ledger: calls
    made, and when enqueues on the victim's queue were acknowledged again
    after the kill."""

    def __init__(self) -> None:
        self.ops = 0
        self.victim_queue = ""
        self.kill_at: float | None = None
        self.resumed_at: float | None = None  # first acknowledged enqueue on the victim's queue sent after the kill
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self.lock:
            if event.verb == "enqueue":
                self.ops += 1
                # A call sent before the kill may still have been answered by the old master.
                if (event.outcome == "enqueued" and self.kill_at is not None and event.t0 > self.kill_at
                        and self.resumed_at is None and event.queue == self.victim_queue):
                    self.resumed_at = event.t1
            elif event.verb == "complete" and event.outcome in ("accepted", "refused"):
                self.ops += 2

    def kill(self, queue: str) -> float:
        with self.lock:
            self.victim_queue = queue
            self.kill_at = now()
        return self.kill_at


@dataclass(frozen=True)
class LoadPolicies:
    producer: ProducerPolicy
    consumer: ConsumerPolicy
    pump: PumpPolicy

    @classmethod
    def steady(cls, rate: float) -> LoadPolicies:
        """The failover's: enqueues at `rate`, consumers that complete every job, a reaper."""
        return cls(ProducerPolicy(rate=rate, payload=b"work", backoff_s=PAUSE_AFTER_ERROR_S),
                   ConsumerPolicy(lease_ms=LEASE_MS, idle_s=0.005, backoff_s=PAUSE_AFTER_ERROR_S),
                   PumpPolicy(interval_s=REAP_EVERY_S, promote=False))


class ClusterLoad:
    """One producer, the consumers and a reaper, each on its own cluster
    client, each recording its calls in its own call-log file; `recorder`
    keeps the audit's books, `watch` the calls made and the resumption."""

    def __init__(self, cluster: EmbeddedCluster, names: list[str], rate: float, consumers: int,
                 call_log_dir: Path, policies: LoadPolicies | None = None) -> None:
        keys = [QueueKeys(n) for n in names]
        self.recorder, self.watch = LedgerRecorder(), LoadWatch()

        def hear(event: Event) -> None:
            self.recorder(event)
            self.watch(event)

        self.producer_stop, self.consumers_stop = Stop(), Stop()
        self.fault = FaultNow()
        self.call_logs: list[CallLog] = []

        def calls(process: str) -> LoggedCalls:
            call_log = CallLog(call_log_dir / f"{process}.jsonl")
            self.call_logs.append(call_log)
            return LoggedCalls(RedisCalls(cluster_client(cluster)), call_log, process, fault=self.fault)

        chosen = policies or LoadPolicies.steady(rate)
        self.producer = Producer(calls("producer"), keys, chosen.producer, hear)
        self.others: list[Any] = [Consumer(calls(f"consumer-{i}"), keys, chosen.consumer, hear)
                                  for i in range(consumers)]
        self.others.append(Pump(calls("pump"), keys, chosen.pump, hear))
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        self.threads = [start_thread(self.producer, self.producer_stop)]
        self.threads += [start_thread(role, self.consumers_stop) for role in self.others]

    def stop_producer(self) -> None:
        self.producer_stop.set()
        self.threads[0].join()

    def stop(self) -> None:
        self.producer_stop.set()
        self.consumers_stop.set()
        for t in self.threads:
            t.join()
        for call_log in self.call_logs:
            call_log.close()


def cluster_client(cluster: EmbeddedCluster) -> redis.RedisCluster:
    # Short socket timeouts: a call to the dead master fails in a second,
    # and redis-py then re-reads the slot map, which finds the new master.
    return cluster.client(socket_timeout=1, socket_connect_timeout=1)
