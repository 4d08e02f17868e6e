"""Fixtures for the pytest-benchmark files: one embedded server per build
(or the --bench-server specs), and a microbench Env on each.

    pytest bench/ [--bench-server SPEC]... [--benchmark-autosave] [--benchmark-compare]

bench/ is not in pytest's testpaths: the test suite never runs it. A saved
run carries the machine fingerprint in its machine_info, and comparing
against a run from another fingerprint says so
(echomq_bench.microbench.benchmark_machine).
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from echomq_bench.microbench.benchmark_machine import FINGERPRINT_KEY, cross_machine_warning, measured_fingerprint
from echomq_bench.microbench.runner import Env
from echomq_bench.servers import DEFAULT_SPECS, parse_server_spec, start


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bench-server", action="append", default=None, metavar="SPEC",
                     help="server spec as for echomq-bench --server (repeatable; default redis and valkey)")
    parser.addoption("--bench-count-instructions", action="store_true", default=False,
                     help="also count each verb's instructions per call under callgrind (a second, fresh server "
                          "per build; needs valgrind) and put them in extra_info")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "bench_server" in metafunc.fixturenames:
        specs = metafunc.config.getoption("--bench-server") or list(DEFAULT_SPECS)
        parsed = [parse_server_spec(s) for s in specs]
        metafunc.parametrize("bench_server", parsed, ids=[p.name for p in parsed], indirect=True,
                             scope="session")


@pytest.fixture(scope="session")
def bench_server(request: pytest.FixtureRequest) -> Iterator[object]:
    server = start(request.param)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def env(bench_server: object) -> Iterator[Env]:
    client = bench_server.client()  # type: ignore[attr-defined]
    e = Env(client)
    e.build = bench_server.name  # type: ignore[attr-defined]
    e.version = bench_server.version()  # type: ignore[attr-defined]
    yield e
    e.close()
    client.close()


@pytest.fixture(scope="session")
def instruction_counts(request: pytest.FixtureRequest, bench_server: object) -> dict[str, Any]:
    """Per verb, the count gate's figure on this build (instructions and per-command parts), or {}."""
    if not request.config.getoption("--bench-count-instructions"):
        return {}
    from echomq_bench.counts.measure import count_spec

    run = count_spec(bench_server.spec)  # type: ignore[attr-defined]
    return {verb: vc.to_dict() for verb, vc in run.verbs.items()}


_ROWS = pytest.StashKey[list]()
_FINGERPRINT = pytest.StashKey[dict]()
_CROSS_MACHINE = pytest.StashKey[list]()


def _bench_specs(config: pytest.Config) -> list[str]:
    return config.getoption("--bench-server") or list(DEFAULT_SPECS)


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """The fingerprint, measured once a session (pytest-benchmark asks on loading and on saving)."""
    if _FINGERPRINT not in config.stash:
        config.stash[_FINGERPRINT] = measured_fingerprint(parse_server_spec(s) for s in _bench_specs(config))
    machine_info[FINGERPRINT_KEY] = config.stash[_FINGERPRINT]


def pytest_benchmark_compare_machine_info(config: pytest.Config, benchmarksession: Any, machine_info: dict[str, Any],
                                          compared_benchmark: dict[str, Any]) -> None:
    """Beside pytest-benchmark's own check of machine_info: a saved run from another fingerprint is named."""
    commit = str((compared_benchmark.get("commit_info") or {}).get("id") or "unknown")[:10]
    name = f"of {compared_benchmark.get('datetime', '?')} (commit {commit})"
    text = cross_machine_warning(machine_info.get(FINGERPRINT_KEY) or {},
                                 compared_benchmark.get("machine_info") or {}, name)
    if text:
        benchmarksession.logger.warning(text)
        config.stash.setdefault(_CROSS_MACHINE, []).append(text)


@pytest.fixture(autouse=True)
def _server_side(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    bench = request.node.funcargs.get("benchmark")
    if bench is not None and "server_ratio_noop" in bench.extra_info:
        request.config.stash.setdefault(_ROWS, []).append((request.node.name, dict(bench.extra_info)))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: object, exitstatus: int, config: pytest.Config) -> None:
    """pytest-benchmark's table shows the round trip; this one the server side. A
    comparison across machines is named again here, under the table it concerns."""
    write = terminalreporter.write_line  # type: ignore[attr-defined]
    for text in config.stash.get(_CROSS_MACHINE, []):
        write("")
        write(f"WARNING: {text}", red=True, bold=True)
    rows = config.stash.get(_ROWS, [])
    if not rows:
        return
    write("")
    write(f"{'server side (extra_info)':<36} {'srv µs mean':>11} {'srv µs typ':>10} {'no-op µs':>8} "
          f"{'srv/no-op':>9} {'rtt/PING':>8}")
    for name, x in rows:
        write(f"{name:<36} {x['server_us_mean']:>11.2f} {x['server_us_typical']:>10.2f} "
              f"{x['noop_server_us']:>8.2f} {x['server_ratio_noop']:>9.2f} {x['client_ratio_ping']:>8.2f}")
