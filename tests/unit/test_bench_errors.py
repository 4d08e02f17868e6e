"""The instrument's errors share one root, BenchError, apart from the
client's tree; every one of them, and every client error that reaches the
command line, ends `echomq-bench` with one line on stderr and exit 2."""

from __future__ import annotations

import argparse
import ast
import builtins
import functools
import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest

import echomq
from echomq_bench import cli
from echomq_bench.errors import BenchError
from tests.helpers import ROOT

# Exceptions of the instrument that are signals caught where they are raised,
# never a failure of a command: a conformance story's failed expectation, and
# a Locust request the fence wrongly accepted (Locust counts it as a failure).
SIGNALS = {"Failed", "ZombieAccepted"}

# The client's errors that reach the command line when a server misbehaves.
CLIENT_FAMILIES = [echomq.ServerUnavailableError, echomq.OutOfMemoryError, echomq.KeyspaceDamageError,
                   echomq.ServerReplyError]


@functools.cache
def _classes() -> dict[str, tuple[str, list[str]]]:
    """Every class echomq_bench defines: its module and its bases as written, by name."""
    classes: dict[str, tuple[str, list[str]]] = {}
    for path in sorted((ROOT / "echomq_bench").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = (module, [ast.unparse(b).rpartition(".")[2] for b in node.bases])
    return classes


def instrument_exceptions() -> dict[str, list[str]]:
    """Every exception class echomq_bench defines, by name, with its bases as written."""
    classes = {name: bases for name, (_, bases) in _classes().items()}
    builtin = {name for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)}
    client = {name for name in echomq.errors.__all__ if name.endswith("Error")}

    def is_exception(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name not in classes:  # a class of its own shadows a builtin's name (report.doc.Warning)
            return name in builtin or name in client
        return name not in seen and any(is_exception(b, seen | {name}) for b in classes[name])

    return {name: bases for name, bases in classes.items() if is_exception(name)}


def test_every_instrument_error_is_a_bench_error() -> None:
    found = instrument_exceptions()
    assert {"BenchError", "ServerError", "ResultsError", "SweepError"} <= set(found)

    def rooted(name: str) -> bool:
        return name == "BenchError" or any(rooted(b) for b in found.get(name, ()))

    assert sorted(name for name in found if not rooted(name) and name not in SIGNALS) == []
    assert SIGNALS <= set(found)


def test_no_instrument_error_is_the_clients() -> None:
    client = {name for name in echomq.errors.__all__ if name.endswith("Error")}
    found = instrument_exceptions()
    assert {name: bases for name, bases in found.items() if client & set(bases)} == {}
    assert not issubclass(BenchError, echomq.EchoMQError)


def bench_error_classes() -> list[type[BaseException]]:
    """Every BenchError the instrument defines, imported from where it is defined."""
    errors = set(instrument_exceptions()) - SIGNALS
    found = [getattr(importlib.import_module(module), name) for name, (module, _) in _classes().items()
             if name in errors]
    return sorted(found, key=lambda cls: cls.__name__)


def _command_raising(exc: BaseException) -> SimpleNamespace:
    def run(args: argparse.Namespace) -> int:
        raise exc

    return SimpleNamespace(configure=lambda parser: None, run=run)


@pytest.mark.parametrize("cls", bench_error_classes() + CLIENT_FAMILIES, ids=lambda cls: cls.__name__)
def test_each_error_family_ends_the_cli_with_one_line_and_exit_2(
        cls: type[Exception], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    message = f"the {cls.__name__} the user must read"
    monkeypatch.setattr(cli, "module_of", lambda name: _command_raising(cls(message)))
    assert cli.main(["history"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"echomq-bench history: error: {message}\n"
    assert captured.out == ""


def test_a_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "module_of", lambda name: _command_raising(KeyError("a bug")))
    with pytest.raises(KeyError):
        cli.main(["history"])


def test_a_results_folder_that_is_not_there_ends_report_with_exit_2(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-run"
    assert cli.main(["report", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("echomq-bench report: error: ") and str(missing) in err and "Traceback" not in err
    assert not missing.exists()
