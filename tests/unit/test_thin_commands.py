"""Commands are thin: a module in echomq_bench/commands/ parses its arguments,
calls the domain packages, writes the record and prints. It never imports
another command module (at module level, inside a function, under
TYPE_CHECKING, relatively or through importlib), and it exports only names
it defines itself, so what two commands share lives in a domain package.

The folder read is the one `echomq_bench.commands` is imported from, so the
same file judges another tree put first on the path.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import echomq_bench.commands

PACKAGE = "echomq_bench.commands"
FOLDER = Path(echomq_bench.commands.__file__).resolve().parent
DYNAMIC_IMPORTS = ("import_module", "__import__")


def _absolute(name: str, level: int, package: str) -> str:
    """`name` imported `level` dots up from inside `package` (level 0: as written)."""
    if not level:
        return name
    parts = package.split(".")
    anchor = parts[: len(parts) - (level - 1)]
    return ".".join(anchor + ([name] if name else []))


def _dynamic_target(node: ast.Call, package: str) -> str | None:
    """The module an `importlib.import_module("...")` or `__import__("...")` call names, if it is spelled out."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in DYNAMIC_IMPORTS or not node.args:
        return None
    first = node.args[0]
    if not isinstance(first, ast.Constant) or not isinstance(first.value, str):
        return None
    text = first.value
    dots = len(text) - len(text.lstrip("."))
    return _absolute(text[dots:], dots, package)


def imported(tree: ast.AST, package: str) -> Iterator[tuple[int, str]]:
    """Every module each import in `tree` names, with its line, wherever the import sits.
    `from a.b import c` names both a.b and a.b.c: c may be a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Call):
            target = _dynamic_target(node, package)
            if target is not None:
                yield node.lineno, target


def command_imports(source: str, module: str) -> list[str]:
    """`line: name` for each import of the command package or a module in it, by `module`."""
    package = module if module == PACKAGE else module.rpartition(".")[0]
    found = {(line, name) for line, name in imported(ast.parse(source), package)
             if name == PACKAGE or name.startswith(PACKAGE + ".")}
    return [f"{line}: {name}" for line, name in sorted(found)]


def _modules() -> list[tuple[str, Path]]:
    files = sorted(FOLDER.glob("*.py"))
    return [(PACKAGE if f.stem == "__init__" else f"{PACKAGE}.{f.stem}", f) for f in files]


def test_no_command_imports_another_command() -> None:
    modules = _modules()
    assert len(modules) > 10, f"no command modules found in {FOLDER}"
    crossing = {module: found for module, path in modules if (found := command_imports(path.read_text(), module))}
    assert crossing == {}, f"commands import commands (move what they share into its domain package): {crossing}"


def test_the_import_finder_sees_every_form_of_import() -> None:
    planted = "\n".join([
        "import importlib",                                           # 1
        "import echomq_bench.commands.check",                         # 2
        "from echomq_bench.commands.compare import write_compare",    # 3
        "from echomq_bench.commands import capacity",                 # 4
        "from . import reapcost",                                     # 5
        "from .gate import run_gate",                                 # 6
        "from echomq_bench import commands",                          # 7
        "def part():",                                                # 8
        "    from echomq_bench.commands.run import PLANS",            # 9
        "if TYPE_CHECKING:",                                          # 10
        "    from echomq_bench.commands.lease import QUICK",          # 11
        "importlib.import_module('echomq_bench.commands.peers')",     # 12
        "importlib.import_module('.faults', __package__)",            # 13
        "from echomq_bench.capacity.compare import unique_builds",    # 14
        "from .. import options",                                     # 15
        "import echomq_bench.commandsmith",                           # 16
    ])
    lines = {int(found.split(":")[0]) for found in command_imports(planted, f"{PACKAGE}.run")}
    assert lines == set(range(2, 14)) - {8, 10}


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def exported_but_not_defined(source: str) -> list[str]:
    tree = ast.parse(source)
    exported: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported = [e.value for e in ast.walk(node.value)
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return sorted(set(exported) - _defined(tree))


def test_no_command_exports_a_name_it_does_not_define() -> None:
    borrowed = {module: names for module, path in _modules() if (names := exported_but_not_defined(path.read_text()))}
    assert borrowed == {}, f"commands re-export names of other modules: {borrowed}"


def test_a_re_export_is_told_from_a_definition() -> None:
    source = ("from echomq_bench.capacity.settings import CapacitySettings\n"
              "__all__ = ['CapacitySettings', 'run', 'LIMIT']\n"
              "LIMIT: int = 3\n"
              "def run() -> int:\n    return 0\n")
    assert exported_but_not_defined(source) == ["CapacitySettings"]
