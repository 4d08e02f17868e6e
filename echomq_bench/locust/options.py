"""The scenarios' command-line options and the frozen settings read from them.

Options stay plain strings and numbers in Locust's `parsed_options`, because
Locust ships that namespace to its workers and types web-form input by the
default's type. Each option is checked twice: by argparse when it comes from
the command line, a config file or a LOCUST_* variable (a bad value exits 2
naming the option), and by `Settings.from_options` when a run starts, which
also covers values typed into the web UI.

The rules are the command line's (echomq_bench.options): durations carry
their unit (500ms, 10s, 2m; a bare number is refused, 0 excepted), and
--rate is jobs/s offered over the whole run.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any, Callable

from echomq_bench.measurement.workdist import DistError, parse_dist
from echomq_bench.options import DurationError, parse_duration_ms
from echomq import InvalidArgumentError
from echomq._instrument import INT31, MAX_LIMIT, check_queue_name
from echomq_bench.errors import SettingsError
from echomq_bench.servers import ServerSpec, ServerSpecError, parse_server_spec

__all__ = ["DEFAULTS", "Settings", "SettingsError", "add_options", "parse_steps"]


# What every scenario gets unless it says otherwise (see install()).
DEFAULTS: dict[str, Any] = {
    "server": None,
    "queue": None,
    "queues": 1,
    "lease": "30s",
    "max_attempts": 3,
    "payload_bytes": 64,
    "work": "const:0",
    "fail_rate": 0.0,
    "crash_rate": 0.0,
    "zombie_share": 0.5,
    "reap_every": "1s",
    "promote_every": "1s",
    "reap_limit": 100,
    "promote_limit": 100,
    "backoff_base": "50ms",
    "backoff_cap": "2s",
    "producers": 2,
    "batch": 50,
    "backlog": 2000,
    "enqueue_rate": 0.0,
    "idle_wait": "5ms",
    "steps": "",
    "step_time": "10s",
    "out": None,
}


def parse_steps(text: str) -> tuple[int, ...]:
    """'1,2,4,8' -> (1, 2, 4, 8); empty -> () (no stepping)."""
    if not text or not text.strip():
        return ()
    try:
        steps = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise SettingsError(f"--steps {text!r}: want consumer counts separated by commas, e.g. 1,2,4,8") from None
    if not steps or any(n < 1 for n in steps):
        raise SettingsError(f"--steps {text!r}: every step needs at least 1 consumer")
    return steps


def _checked(check: Callable[[str], object]) -> Callable[[str], str]:
    """An argparse type that validates the text but keeps it as text."""

    def typed(text: str) -> str:
        try:
            check(text)
        except (SettingsError, DistError, DurationError, ServerSpecError, InvalidArgumentError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    typed.__name__ = check.__name__
    return typed


def _ranged(kind: type, lo: float, hi: float) -> Callable[[str], Any]:
    def typed(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text!r} must be from {lo:g} to {hi:g}")
        return value

    typed.__name__ = kind.__name__
    return typed


def _duration(text: str) -> float:
    return parse_duration_ms(text)


def _lease_ms(text: str) -> int:
    ms = parse_duration_ms(text)
    if not 1 <= ms <= INT31:
        raise SettingsError(f"lease {text!r} must be from 1ms to {INT31}ms")
    return int(round(ms))


def add_options(parser: Any, defaults: dict[str, Any]) -> None:
    """Add the echomq options to Locust's parser (shown in the web UI too).
    Durations carry their unit (us, ms, s or m); a bare number is refused, 0 excepted."""
    # Not in an argument group: only Locust's parser itself knows include_in_web_ui.
    def add(flag: str | tuple[str, ...], dest: str, help: str, type: Any = str, web: bool = True,
            metavar: str | None = None) -> None:
        flags = (flag,) if isinstance(flag, str) else flag
        parser.add_argument(*flags, dest=dest, type=type, default=defaults[dest], help=f"echomq: {help}",
                            metavar=metavar, include_in_web_ui=web)

    add("--server", "server", "redis | valkey | NAME=BINARY [ARGS...] (embedded, local runs only) | redis://HOST:PORT "
        "(needed by --master/--worker runs). Default: an embedded Redis", type=_checked(parse_server_spec),
        metavar="SPEC")
    add("--queue", "queue", "queue name (default: a fresh name per run, so runs never mix)",
        type=_checked(check_queue_name), metavar="NAME")
    add("--queues", "queues", "number of queues; consumers are spread over them", type=_ranged(int, 1, 1000),
        metavar="N")
    add("--lease", "lease", "lease of each claim, e.g. 30s, 500ms", type=_checked(_lease_ms), metavar="DURATION")
    add("--max-attempts", "max_attempts", "claims a job gets before the dead set", type=_ranged(int, 1, INT31),
        metavar="N")
    add("--payload-bytes", "payload_bytes", "payload size of each job", type=_ranged(int, 0, 1 << 20),
        metavar="BYTES")
    add("--work", "work", "work-time distribution: const:0, exp:mean=20ms, lognormal:median=50ms,p99=400ms, "
        "uniform:lo=10ms,hi=30ms, empirical:FILE", type=_checked(parse_dist), metavar="DIST")
    add("--fail-rate", "fail_rate", "share of work that fails and is retried with backoff", type=_ranged(float, 0, 1),
        metavar="FRACTION")
    add("--crash-rate", "crash_rate", "share of claims whose consumer crashes mid-work and abandons the lease",
        type=_ranged(float, 0, 1), metavar="FRACTION")
    add("--zombie-share", "zombie_share", "share of crashed consumers that come back as zombies and complete late",
        type=_ranged(float, 0, 1), metavar="FRACTION")
    add("--reap-every", "reap_every", "pump cadence of reap (0 = never)", type=_checked(_duration),
        metavar="DURATION")
    add("--promote-every", "promote_every", "pump cadence of promote (0 = never)", type=_checked(_duration),
        metavar="DURATION")
    add("--reap-limit", "reap_limit", "cap per reap call", type=_ranged(int, 1, MAX_LIMIT), metavar="JOBS")
    add("--promote-limit", "promote_limit", "batch per promote call", type=_ranged(int, 1, MAX_LIMIT), metavar="JOBS")
    add("--backoff-base", "backoff_base", "retry delay before jitter: base * 2^(attempt-1), capped",
        type=_checked(_duration), metavar="DURATION")
    add("--backoff-cap", "backoff_cap", "largest retry delay before jitter", type=_checked(_duration),
        metavar="DURATION")
    add("--producers", "producers", "producer greenlets per load process", type=_ranged(int, 0, 10_000), metavar="N")
    add("--batch", "batch", "jobs per enqueue round trip (one pipelined request)", type=_ranged(int, 1, 10_000),
        metavar="JOBS")
    add("--backlog", "backlog", "with --rate 0, producers keep this many jobs pending per queue",
        type=_ranged(int, 1, 10_000_000), metavar="JOBS")
    add("--rate", "enqueue_rate", "jobs/s offered over all queues by the whole run, open loop "
        "(0 = keep the backlog instead)", type=_ranged(float, 0, 1e7), metavar="JOBS_PER_S")
    add("--idle-wait", "idle_wait", "a consumer's pause after an empty claim", type=_checked(_duration),
        metavar="DURATION")
    add("--steps", "steps", "step the number of consumers, e.g. 1,2,4,8,16,32,64 (a LoadTestShape; command line only)",
        type=_checked(parse_steps), web=False, metavar="N,N,...")
    add("--step-time", "step_time", "duration of each step", type=_checked(_duration), web=False,
        metavar="DURATION")
    # Locust owns --csv and --html; --out is the run's record, named as on every echomq-bench command.
    add("--out", "out", "the run's results folder (default: results/<utc time>-locust); the coordinator writes it",
        web=False, metavar="DIR")


@dataclass(frozen=True)
class Settings:
    """One run's options, checked and converted."""

    server: ServerSpec | None
    queue: str | None
    queues: int
    lease_ms: int
    max_attempts: int
    payload_bytes: int
    work: Any  # echomq_bench.measurement.workdist.Distribution
    fail_rate: float
    crash_rate: float
    zombie_share: float
    reap_every_ms: float
    promote_every_ms: float
    reap_limit: int
    promote_limit: int
    backoff_base_ms: float
    backoff_cap_ms: float
    producers: int
    batch: int
    backlog: int
    enqueue_rate: float
    idle_wait_ms: float
    steps: tuple[int, ...]
    step_time_ms: float

    @classmethod
    def from_options(cls, options: Any) -> "Settings":
        def get(name: str) -> Any:
            value = getattr(options, name, DEFAULTS[name])
            return DEFAULTS[name] if value is None and DEFAULTS[name] is not None else value

        def flag(name: str) -> str:
            return "--rate" if name == "enqueue_rate" else f"--{name.replace('_', '-')}"

        def number(name: str, kind: type, lo: float, hi: float) -> Any:
            try:
                value = kind(get(name))
            except (TypeError, ValueError):
                raise SettingsError(f"{flag(name)} {get(name)!r} is not a number") from None
            if not lo <= value <= hi:
                raise SettingsError(f"{flag(name)} {value!r} must be from {lo:g} to {hi:g}")
            return value

        def duration(name: str, convert: Callable[[str], Any] = _duration) -> Any:
            try:
                return convert(str(get(name)))
            except (DurationError, SettingsError) as exc:
                raise SettingsError(f"{flag(name)}: {exc}") from None

        server_text = (get("server") or "").strip()
        queue = (get("queue") or "").strip() or None
        try:
            server = parse_server_spec(server_text) if server_text else None
            if queue is not None:
                check_queue_name(queue)
            work = parse_dist(str(get("work")))
        except (ServerSpecError, InvalidArgumentError, DistError) as exc:
            raise SettingsError(str(exc)) from None
        settings = cls(
            server=server, queue=queue,
            queues=number("queues", int, 1, 1000),
            lease_ms=duration("lease", _lease_ms),
            max_attempts=number("max_attempts", int, 1, INT31),
            payload_bytes=number("payload_bytes", int, 0, 1 << 20),
            work=work,
            fail_rate=number("fail_rate", float, 0, 1),
            crash_rate=number("crash_rate", float, 0, 1),
            zombie_share=number("zombie_share", float, 0, 1),
            reap_every_ms=duration("reap_every"),
            promote_every_ms=duration("promote_every"),
            reap_limit=number("reap_limit", int, 1, MAX_LIMIT),
            promote_limit=number("promote_limit", int, 1, MAX_LIMIT),
            backoff_base_ms=duration("backoff_base"),
            backoff_cap_ms=duration("backoff_cap"),
            producers=number("producers", int, 0, 10_000),
            batch=number("batch", int, 1, 10_000),
            backlog=number("backlog", int, 1, 10_000_000),
            enqueue_rate=number("enqueue_rate", float, 0, 1e7),
            idle_wait_ms=duration("idle_wait"),
            steps=parse_steps(str(get("steps") or "")),
            step_time_ms=duration("step_time"),
        )
        if settings.steps and settings.step_time_ms < 1000:
            raise SettingsError("--step-time must be at least 1s: the shape ticks once a second")
        return settings

    def describe(self) -> dict[str, Any]:
        """For the record's meta.json: every setting as text, the server without its password."""
        out = {k: v for k, v in asdict(self).items() if k not in ("server", "work")}
        out["server"] = self.server.describe() if self.server else None
        out["work"] = self.work.spec
        return out

