"""The command line's shared rules, read from the parser and its help: durations
with units, lists repeated or comma-separated, --quick, the ceiling flags;
and the results-folder reader's refusals."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from echomq_bench.cli import COMMANDS, build_parser, main
from echomq_bench.errors import BenchError
from echomq_bench.records.files import ResultsError, load


# --------------------------------------------------------------------------
# The command line's shared rules (echomq_bench.options), read from the parser


LONG_COMMANDS = ("capacity", "compare", "faults", "failover", "gate", "lease", "peers", "reapcost", "run")


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser(argv).parse_args(argv)


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv, dest, value", [
    (["capacity", "--duration", "1.5s"], "duration", 1.5),
    (["capacity", "--duration", "500ms"], "duration", 0.5),
    (["capacity", "--duration", "2m"], "duration", 120.0),
    (["capacity", "--warmup", "0"], "warmup", 0.0),
    (["capacity", "--lease", "2m"], "lease", 120_000),
    (["compare", "--slot", "250ms"], "slot", 0.25),
    (["lease", "--duration", "1.5s"], "duration", 1.5),
    (["lease", "--reap-every", "1.5s"], "reap_every", 1500.0),
    (["lease", "--recovery-tolerance", "250us"], "recovery_tolerance", 0.25),
    (["failover", "--before", "500ms", "--after", "1s"], "after", 1.0),
    (["peers", "--timeout", "10m"], "timeout", 600.0),
    (["reapcost", "--cadence", "100ms,1s"], "cadence_ms", [100, 1000]),
])
def test_durations_take_their_unit_the_same_way_everywhere(argv: list[str], dest: str, value: object) -> None:
    assert getattr(parse(argv), dest) == pytest.approx(value)


@pytest.mark.parametrize("argv", [["reapcost", "--cadence-ms", "100"], ["compare", "--min-effect", "0.05"]])
def test_a_flag_no_parser_takes_is_refused_by_argparse(argv: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    assert f"unrecognized arguments: {argv[1]}" in capsys.readouterr().err


@pytest.mark.parametrize("repeated, comma, dest, value", [
    (["gate", "--verbs", "claim", "--verbs", "reap_0"], ["gate", "--verbs", "claim,reap_0"], "verbs",
     ["claim", "reap_0"]),
    (["reapcost", "--caps", "10", "--caps", "100"], ["reapcost", "--caps", "10,100"], "caps", [10, 100]),
    (["faults", "--scenario", "crash", "--scenario", "oom"], ["faults", "--scenario", "crash,oom"], "scenario",
     ["crash", "oom"]),
    (["peers", "--queue", "echomq", "--queue", "rq"], ["peers", "--queue", "echomq,rq"], "queue", ["echomq", "rq"]),
    (["lease", "--leases", "1s", "--leases", "2s"], ["lease", "--leases", "1s,2s"], "leases", [1000.0, 2000.0]),
])
def test_a_list_is_the_same_repeated_or_comma_separated(repeated: list[str], comma: list[str], dest: str,
                                                        value: list[object]) -> None:
    assert getattr(parse(repeated), dest) == getattr(parse(comma), dest) == value


@pytest.mark.parametrize("command", LONG_COMMANDS)
def test_every_long_command_has_quick(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(help_of([command], capsys).split())
    assert "--quick the short form" in text or "--quick the 60-second form" in text, text
    assert parse([command, "--quick"]).quick is True and parse([command]).quick is False


def test_quick_shortens_capacity_unless_a_flag_says_otherwise() -> None:
    from echomq_bench.capacity.workload import settings_from_args

    quick = settings_from_args(parse(["capacity", "--quick"]))
    assert (quick.duration_s, quick.warmup_s, quick.ceiling_requests) == (2.0, 0.5, 20_000)
    assert settings_from_args(parse(["capacity", "--quick", "--duration", "3s"])).duration_s == 3.0
    full = settings_from_args(parse(["capacity"]))
    assert (full.duration_s, full.warmup_s, full.ceiling_requests) == (10.0, 1.0, 100_000)


@pytest.mark.parametrize("command", ["capacity", "compare"])
def test_ceiling_is_one_flag_pair_on_by_default(command: str) -> None:
    assert parse([command]).ceiling is True
    assert parse([command, "--no-ceiling"]).ceiling is False
    assert parse([command, "--no-ceiling", "--ceiling"]).ceiling is True


def test_rate_is_jobs_per_second_over_the_whole_run(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("capacity", "compare", "faults", "failover"):
        text = " ".join(help_of([command], capsys).split())
        assert "--rate JOBS_PER_S jobs/s offered over" in text, text
    assert parse(["faults", "--rate", "300"]).rate == 300.0


def test_report_takes_no_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--server" not in help_of(["report"], capsys)
    assert "--server SPEC" in help_of(["check"], capsys)
    assert not hasattr(parse(["report", "some-dir"]), "server") or parse(["report", "some-dir"]).server is None


def test_top_level_help_shows_a_whole_sentence_per_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, command in COMMANDS.items():
        summary = command.summary
        assert summary[0].isupper() and summary.endswith(".") and summary.count(". ") == 0, summary
        assert f"{name} {summary}" in text, f"{name}: {summary!r} not whole in the help"


# --------------------------------------------------------------------------
# Results folders: the library every reading command uses


def test_unreadable_results_folders(tmp_path: Path) -> None:
    cases: list[tuple[Path, str]] = [(tmp_path / "missing", "no such directory")]
    empty = tmp_path / "empty"
    empty.mkdir()
    cases.append((empty, "no meta.json"))
    bad_json = tmp_path / "bad-json"
    bad_json.mkdir()
    (bad_json / "meta.json").write_text("{not json")
    cases.append((bad_json, "not valid JSON"))
    not_object = tmp_path / "list"
    not_object.mkdir()
    (not_object / "meta.json").write_text(json.dumps([1, 2]))
    cases.append((not_object, "expected a JSON object"))
    bad_csv = tmp_path / "bad-csv"
    bad_csv.mkdir()
    (bad_csv / "meta.json").write_text("{}")
    (bad_csv / "t.csv").write_bytes(b"")
    cases.append((bad_csv, "not a readable CSV"))
    unreadable = tmp_path / "unreadable"
    unreadable.mkdir()
    (unreadable / "meta.json").mkdir()  # a folder where a file should be
    cases.append((unreadable, "no meta.json"))
    for path, fragment in cases:
        with pytest.raises(ResultsError) as info:
            load(path)
        assert fragment in str(info.value) and str(path.name) in str(info.value)
        assert isinstance(info.value, BenchError)  # so the CLI prints one line and exits 2
