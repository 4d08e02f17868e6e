"""The run's life in Locust's events, for every way Locust runs.

    init            check the options (exit 2 naming a bad one); local runs and
                    the master start or reach the server; a master without a
                    URL stops here, saying so
    test_start      the coordinator (local runner or master) picks the run id
                    and queues and ships them to workers in parsed_options;
                    every load process starts its producers, the
                    coordinator its pump
    test_stopping   drain: no new calls (a user about to make one ends), the
                    ones on the wire finish; a master asks each worker to
                    drain and send its books (runner.send_message) and
                    waits for them
    test_stop       the coordinator settles, audits, checks the call log of
                    every process, prints and writes the run's record into
                    the folder test_start picked (the call logs are in it);
                    a failed audit or call-log check sets process_exit_code = 1
    quitting        the same when a run is cut short (Ctrl-C, SIGTERM)
    quit            an embedded server stops

Draining before Locust kills users keeps the books exact: a greenlet killed
between a complete the server applied and the ledger line would look like a
lost job.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from gevent.event import Event

from echomq_bench.load.audit import audit
from echomq_bench.servers import (Cluster, EmbeddedServer, Server, format_placements,
                                   master_clients, parse_server_spec, redacted_url, spread_queues, start)
from echomq import EchoMQError
from echomq._instrument import QueueKeys
from echomq_bench.errors import BenchError
from echomq_bench.records.kinds.locust import RunEntry
from echomq_bench.records.meta import collect
from echomq_bench.records.files import write_record
from echomq_bench import servers
from echomq_bench.measurement.serverstats import process_cpu_s, sample, usage
from echomq_bench.locust.books import REQUEST_TYPE, Books
from echomq_bench.locust.calllogs import call_log_path, check_run, final_places, held_ids, shipped
from echomq_bench.locust.options import DEFAULTS, Settings, SettingsError, add_options
from echomq_bench.locust.report import (Outcome, StepSample, load_shape, machine_busy_s, node_table, record_dir,
                                        request_rows, settle, step_table, timeline_rows)
from echomq_bench.locust.session import RUN_OPTION, RunInfo, Session

__all__ = ["Controller", "DRAIN_MESSAGE", "BOOKS_MESSAGE"]

log = logging.getLogger("echomq.locust")

DRAIN_MESSAGE = "echomq_drain"
BOOKS_MESSAGE = "echomq_books"
BOOKS_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 10.0
STEP_SAMPLE_S = 0.25


class Controller:
    """One per process: wires a scenario into Locust's events."""

    def __init__(self, scenario: str, defaults: dict[str, Any]) -> None:
        unknown = set(defaults) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown echomq option defaults: {', '.join(sorted(unknown))}")
        self.scenario = scenario
        self.defaults = {**DEFAULTS, **defaults}
        self.environment: Any = None
        self.role = "local"
        self.server: Server | None = None
        self.server_key: str | None = None
        self.server_version = ""
        self.admin: Any = None
        self.session: Session | None = None
        self.finished = True
        self.collected: dict[str, dict[str, Any]] = {}
        self.call_logs: dict[str, dict[str, Any]] = {}   # worker -> its shipped call log
        self.initial: set[str] = set()                    # ids the queues held before the run
        self.expected: set[str] = set()
        self.books_in = Event()
        self.samples: list[StepSample] = []
        self.step = (0, 0)
        self.sampler: Any = None
        self.placements: list[Any] = []  # on a cluster: the queues' masters
        self.node_clients: dict[str, Any] = {}
        self.node_before: dict[str, Any] = {}
        self.run_dir: Path | None = None  # the coordinator's results folder of the current run

    @property
    def cluster(self) -> bool:
        return isinstance(self.server, Cluster)

    def install(self, events: Any) -> None:
        events.init_command_line_parser.add_listener(self.on_parser)
        events.init.add_listener(self.on_init)
        events.test_start.add_listener(self.on_test_start)
        events.test_stopping.add_listener(self.on_test_stopping)
        events.test_stop.add_listener(self.on_test_stop)
        events.quitting.add_listener(self.on_test_stop)  # a run cut short (Ctrl-C, SIGTERM) ends the same way
        events.quit.add_listener(self.on_quit)

    # -- init --------------------------------------------------------------

    def on_parser(self, parser: Any, **_: Any) -> None:
        add_options(parser, self.defaults)

    def on_init(self, environment: Any, runner: Any, **_: Any) -> None:
        from locust.runners import MasterRunner, WorkerRunner

        self.environment = environment
        if isinstance(runner, WorkerRunner):
            self.role = "worker"
            runner.register_message(DRAIN_MESSAGE, self.on_drain_request, concurrent=True)
            return
        self.role = "master" if isinstance(runner, MasterRunner) else "local"
        if self.role == "master":
            runner.register_message(BOOKS_MESSAGE, self.on_books)
        options = environment.parsed_options
        try:
            settings = Settings.from_options(options)
        except SettingsError as exc:
            self._fatal(str(exc))
        if not settings.steps:
            environment.shape_class = None  # stepping is opt-in: without --steps, -u/-r/-t rule
        local_workers = bool(getattr(options, "processes", None))
        reachable = settings.server is not None and settings.server.url is not None  # redis:// or redis+cluster://
        if self.role == "master" and not local_workers and not reachable:
            self._fatal("a distributed run needs --server redis://HOST:PORT (or redis+cluster://HOST:PORT): "
                        "a server that every worker can reach. "
                        "An embedded server listens on this machine's loopback only (it is allowed with "
                        "--processes N, whose workers run here). Run one where the workers reach it and pass "
                        "its URL to the master, e.g. --server redis://:PASSWORD@10.0.0.5:6379")
        try:
            self._ensure_server(settings)
        except (BenchError, EchoMQError, OSError) as exc:
            self._fatal(str(exc))

    def _ensure_server(self, settings: Settings) -> None:
        spec = settings.server or parse_server_spec("redis")
        key = spec.describe()
        if self.server is not None and self.server_key == key:
            return
        if self.server is not None:
            self.server.stop()
        self.server = start(spec)
        self.server_key = key
        self.admin = self.server.client()
        self.server_version = self.server.version()
        how = "embedded, stopped when Locust quits" if isinstance(self.server, EmbeddedServer) else "running already"
        log.info("echomq: %s at %s (%s)", self.server_version, redacted_url(self.server.url), how)

    def _started(self) -> Server:
        """The server `_ensure_server` started or reached; only a worker has none."""
        assert self.server is not None, "no server: on_init or on_test_start starts one first"
        return self.server

    def _session_url(self) -> str:
        """The URL load processes connect with: an embedded server's password included."""
        return self._started().connection_url()

    def _fatal(self, message: str) -> None:
        """Stop before anything ran, the way argparse does: exit 2 with the reason."""
        print(f"echomq: error: {message}", file=sys.stderr, flush=True)
        sys.exit(2)

    # -- start -------------------------------------------------------------

    def on_test_start(self, environment: Any, **_: Any) -> None:
        options = environment.parsed_options
        if self.role == "worker":
            text = getattr(options, RUN_OPTION, None)
            if not text:
                log.error("echomq: the master sent no run (does it run the same scenario file?)")
                return
            if self.session is not None:
                self.session.close()
            try:
                self.session = Session(environment, Settings.from_options(options), RunInfo.from_option(text))
            except (BenchError, EchoMQError, OSError) as exc:
                log.error("echomq: cannot join the run: %s", exc)
                return
            self.session.start_producers()
            return
        try:
            settings = Settings.from_options(options)  # the web form may have changed them
            self._ensure_server(settings)
            load = environment.runner.worker_count if self.role == "master" else 1
            self.placements = []
            if self.cluster:
                def spread(prefix: str, count: int) -> list[str]:
                    self.placements = spread_queues(self.admin, count, prefix)
                    return [p.queue for p in self.placements]
            run = RunInfo.fresh(settings, self._session_url(), load, spread if self.cluster else None)
            if self.cluster:
                self._start_nodes(run)
            self._warn_if_not_empty(run)
            if self.session is not None:
                self.session.close()
            self.run_dir = record_dir(options)
            self.session = Session(environment, settings, run, call_log_path(self.run_dir, run.run_id, self.role))
        except (BenchError, EchoMQError, OSError) as exc:
            log.error("echomq: cannot start the run: %s", exc)
            gevent.spawn(environment.runner.quit if getattr(options, "headless", False) else environment.runner.stop)
            return
        setattr(options, RUN_OPTION, run.to_option())
        self.finished = False
        self.collected, self.call_logs, self.expected, self.samples = {}, {}, set(), []
        self.sampler = None
        if self.role == "local":
            self.session.start_producers()
        self.session.start_pump()
        s = settings
        feed = (f"{s.enqueue_rate:g} jobs/s" if s.enqueue_rate else f"a backlog of {s.backlog} per queue")
        log.info("echomq %s: run %s, queues %s; users are consumers; %d producers per load process keep %s; "
                 "lease %d ms, work %s, max attempts %d, fail %g, crash %g", self.scenario, run.run_id,
                 ",".join(run.queues), s.producers, feed, s.lease_ms, s.work.spec, s.max_attempts,
                 s.fail_rate, s.crash_rate)

    def _start_nodes(self, run: RunInfo) -> None:
        """Show which master serves each queue; sample every master's CPU."""
        from echomq_bench.servers import Placement, queue_slot

        if not self.placements:  # one queue (--queues 1): wherever its name lands
            self.placements = [Placement(q, queue_slot(q), self.admin.nodes_manager.get_node_from_slot(
                queue_slot(q)).name) for q in run.queues]
        print(f"echomq: queues over the cluster's masters\n{format_placements(self.placements)}", flush=True)
        self.node_clients = master_clients(self.admin)
        self.node_before = {name: sample(c) for name, c in self.node_clients.items()}

    def _node_usages(self) -> dict[str, Any]:
        out = {}
        for name, before in self.node_before.items():
            try:
                out[name] = usage(before, sample(self.node_clients[name]))
            except Exception as exc:  # a master gone: its row says n/a
                log.warning("echomq: no CPU from master %s: %s", name, exc)
        return out

    def _server_main_cpu_s(self) -> float:
        if self.cluster:
            return sum(sample(c).main_cpu_s for c in self.node_clients.values())
        return sample(self.admin).main_cpu_s

    def _warn_if_not_empty(self, run: RunInfo) -> None:
        held = 0
        for name in run.queues:
            k = QueueKeys(name)
            held += sum(self.admin.zcard(key) for key in (k.pending, k.active, k.schedule, k.dead))
        self.initial = held_ids(self.admin, run.queues) if held else set()
        if held:
            log.warning("echomq: queue(s) %s already hold %d jobs; the audit counts them as unknown ids, the "
                        "call-log check leaves them out",
                        ",".join(run.queues), held)

    # -- the shape's samples -------------------------------------------------

    def steps_plan(self) -> tuple[tuple[int, ...], float]:
        settings = Settings.from_options(self.environment.parsed_options)
        return settings.steps, settings.step_time_ms / 1000.0

    def step_reached(self, step: int, consumers: int) -> None:
        """The shape's tick: which step runs now. A sampler (4 per second)
        records completes and CPU against it, so even a short step has a
        settled window."""
        self.step = (step, consumers)
        if self.sampler is None and self.session is not None and not self.finished:
            self.sampler = gevent.spawn(self._sample_steps)

    def _sample_steps(self) -> None:
        runner = self.environment.runner
        while self.session is not None and not self.finished and self.session.drained_at is None:
            entry = runner.stats.entries.get(("complete", REQUEST_TYPE))
            completes = entry.num_requests - entry.num_failures if entry else 0
            if self.role == "local":
                client, cumulative = process_cpu_s(), True
            else:
                client, cumulative = sum(c.cpu_usage for c in runner.clients.values()) / 100.0, False
            step, consumers = self.step
            self.samples.append(StepSample(step, consumers, time.perf_counter(), completes,
                                           self._server_main_cpu_s(), client, cumulative, machine_busy_s()))
            gevent.sleep(STEP_SAMPLE_S)

    # -- stop --------------------------------------------------------------

    def on_test_stopping(self, environment: Any, **_: Any) -> None:
        if self.role != "worker" and self.session is not None and not self.finished:
            self._collect()

    def _collect(self) -> None:
        session = self.session
        assert session is not None
        if session.drained_at is not None:
            return
        if self.role == "master":
            from locust.runners import STATE_MISSING

            runner = self.environment.runner
            self.expected = {c.id for c in runner.clients.values() if c.state != STATE_MISSING}
            self.books_in.clear()
            for worker in self.expected:
                runner.send_message(DRAIN_MESSAGE, {"run_id": session.run.run_id}, client_id=worker)
        session.drain(DRAIN_TIMEOUT_S)
        if self.sampler is not None:
            self.sampler.kill()
        if self.expected and not self.books_in.wait(BOOKS_TIMEOUT_S):
            log.error("echomq: no books from %d worker(s) within %.0f s",
                      len(self.expected - set(self.collected)), BOOKS_TIMEOUT_S)

    def on_drain_request(self, environment: Any, msg: Any, **_: Any) -> None:
        run_id = msg.data["run_id"]
        session = self.session
        if session is not None and session.run.run_id == run_id:
            session.drain(DRAIN_TIMEOUT_S)
            books, call_log = session.books.to_message(), shipped(session.call_log)
        else:
            books, call_log = Books().to_message(), {}  # joined after the run started: nothing to account for
        environment.runner.send_message(BOOKS_MESSAGE, {"run_id": run_id, "books": books, **call_log})

    def on_books(self, environment: Any, msg: Any, **_: Any) -> None:
        if self.session is None or msg.data["run_id"] != self.session.run.run_id:
            return
        self.collected[msg.node_id] = msg.data["books"]
        self.call_logs[msg.node_id] = msg.data
        if self.expected <= set(self.collected):
            self.books_in.set()

    def on_test_stop(self, environment: Any, **_: Any) -> None:
        if self.role != "worker" and self.session is not None and not self.finished:
            self._finish()

    def on_quit(self, **_: Any) -> None:
        if self.session is not None:
            self.session.close()
        if self.server is not None:
            self.server.stop()  # a URL server is left alone
        # Let the server keeper go now too. Left to interpreter exit, its wait
        # yields to gevent after Locust has closed its CSV files, and Locust's
        # CSV writer greenlet then dies writing to them.
        servers.stop_all()

    def _finish(self) -> None:
        session = self.session
        assert session is not None
        self._collect()
        self.finished = True
        env, folder = self.environment, self.run_dir
        assert folder is not None, "on_test_start picks the folder before a run can finish"
        try:
            outcome = self._audit(session, folder)
        except Exception as exc:  # the audit itself failed: that is a failed run, said plainly
            log.exception("echomq: the audit could not run")
            print(f"echomq: audit FAILED to run: {type(exc).__name__}: {exc}", flush=True)
            env.process_exit_code = 1
            return
        print(outcome.format(), flush=True)
        try:
            write_record(folder, outcome.record())
            print(f"echomq: results in {folder} (echomq-bench report {folder})", flush=True)
        except OSError as exc:
            log.error("echomq: cannot write the results folder %s: %s", folder, exc)
            env.process_exit_code = 1
        if not outcome.passed:
            env.process_exit_code = 1

    def _audit(self, session: Session, folder: Path) -> Outcome:
        books = session.books
        for data in self.collected.values():
            books.merge_message(data)
        usages = self._node_usages() if self.cluster else {}
        settled = settle(self.admin, books)
        report = audit(self.admin, session.run.queues, books.ledger)
        seconds = (session.drained_at or time.perf_counter()) - session.started
        recovery = {name: {**lat.summary_ms(), "count": float(lat.count)}
                    for name, lat in books.recovery.items() if lat.count}
        server = self._started()
        run = RunEntry(session.run.run_id, tuple(session.run.queues), session.run.load_processes, self.role,
                       f"{self.server_version} ({server.describe()})", server.name, self.server_version)
        settings, stats = session.settings, self.environment.runner.stats
        checked = check_run(session.call_log, self.call_logs, folder, session.run.run_id,
                            final_places(self.admin, session.run.queues), self.initial)
        return Outcome(
            scenario=self.scenario, run=run, report=report, settled=settled, counters=dict(books.counters),
            recovery=recovery, seconds=seconds, cycles_per_s=report.completed / seconds if seconds else 0.0,
            missing_processes=len(self.expected - set(self.collected)),
            steps=step_table(self.samples, settings.step_time_ms / 1000.0),
            meta=collect([server], scenario=self.scenario, **load_shape(self.environment.parsed_options),
                         **settings.describe()),
            nodes=node_table(self.placements, dict(books.completed), usages, seconds) if self.cluster else [],
            call_log_check=checked, requests=request_rows(stats), timeline=timeline_rows(stats),
        )
