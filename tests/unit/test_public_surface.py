"""The client's public surface is exactly `echomq.__all__`, and the instrument
(echomq_bench, the Locust scenarios, the bench files, the measurement scripts
and the code in docs and notebooks) uses nothing else. Tests of the client
itself may reach inside it; nothing else may."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re

import echomq
from echomq import errors
from tests.helpers import ROOT

# Public submodules: reached as `echomq.verbs`, each through its own __all__.
PUBLIC_MODULES = {name for name in echomq.__all__ if inspect.ismodule(getattr(echomq, name))}
FOLDERS = ("echomq_bench", "scenarios", "bench", "docs/measurements/scripts")
_FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def instrument_sources() -> dict[str, str]:
    """Every piece of Python outside the client and its tests, by where it is."""
    found = {str(f.relative_to(ROOT)): f.read_text()
             for folder in FOLDERS for f in sorted((ROOT / folder).rglob("*.py"))}
    for page in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        for n, block in enumerate(_FENCE.findall(page.read_text())):
            found[f"{page.relative_to(ROOT)}#python{n}"] = block
    for book in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(book.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        # IPython's magics and shell lines are not Python.
        found[str(book.relative_to(ROOT))] = "\n".join(
            line for text in code for line in text.splitlines() if not line.lstrip().startswith(("%", "!")))
    return found


def reaches_inside(tree: ast.AST) -> list[str]:
    """Every use of the client in `tree` that is not through its public surface."""
    bad: list[str] = []
    bound: dict[str, object] = {}   # local name -> the public module or package it is
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("echomq."):
                    bad.append(f"line {node.lineno}: import {alias.name}")
                elif alias.name == "echomq":
                    bound[alias.asname or "echomq"] = echomq
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("echomq."):
                bad.append(f"line {node.lineno}: from {node.module} import ...")
            elif node.module == "echomq":
                for alias in node.names:
                    if alias.name not in echomq.__all__:
                        bad.append(f"line {node.lineno}: echomq.{alias.name} is not public")
                    elif alias.name in PUBLIC_MODULES:
                        bound[alias.asname or alias.name] = getattr(echomq, alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            module = bound[node.value.id]
            if node.attr not in getattr(module, "__all__", ()):
                bad.append(f"line {node.lineno}: {module.__name__}.{node.attr} is not public")  # type: ignore[attr-defined]
    return bad


def test_every_exported_name_resolves_once() -> None:
    assert len(set(echomq.__all__)) == len(echomq.__all__)
    assert [name for name in echomq.__all__ if not hasattr(echomq, name)] == []
    assert all(not name.startswith("_") for name in echomq.__all__)
    star: dict[str, object] = {}
    exec("from echomq import *", star)
    assert set(star) - {"__builtins__"} == set(echomq.__all__)


def test_a_public_module_exports_only_names_it_has() -> None:
    assert {"verbs", "pipeline"} <= PUBLIC_MODULES
    for name in PUBLIC_MODULES:
        module = getattr(echomq, name)
        assert [n for n in module.__all__ if not hasattr(module, n)] == [], name


def test_every_client_error_is_exported() -> None:
    defined = {obj for obj in vars(errors).values()
               if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == errors.__name__}
    for info in pkgutil.iter_modules(echomq.__path__):
        module = importlib.import_module(f"echomq.{info.name}")
        defined |= {obj for obj in vars(module).values()
                    if inspect.isclass(obj) and issubclass(obj, echomq.EchoMQError)}
    exported = {getattr(echomq, name) for name in echomq.__all__}
    assert defined, "no error classes were found"
    assert sorted(cls.__name__ for cls in defined - exported) == []


def test_the_scan_finds_a_reach_inside() -> None:
    planted = ast.parse("import echomq\nfrom echomq import verbs, Queue\nfrom echomq.keys import QueueKeys\n"
                        "import echomq.scripts\nfrom echomq import check_int\n"
                        "echomq.Queue, echomq.wire, verbs.claim, verbs.QueueKeys\n")
    assert reaches_inside(planted) == [
        "line 3: from echomq.keys import ...",
        "line 4: import echomq.scripts",
        "line 5: echomq.check_int is not public",
        "line 6: echomq.wire is not public",
        "line 6: echomq.verbs.QueueKeys is not public",
    ]


def test_the_instrument_uses_only_the_public_surface() -> None:
    sources = instrument_sources()
    assert any(name.startswith("echomq_bench/") for name in sources)
    assert any(name.startswith("notebooks/") for name in sources)
    found = {}
    for name, text in sources.items():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            if "#python" in name:  # a fragment in prose (an elided body), not a program
                continue
            raise
        bad = reaches_inside(tree)
        if bad:
            found[name] = bad
    assert found == {}
