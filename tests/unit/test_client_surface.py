"""The client's public surface is small: `echomq.__all__` is what a queue user
needs, and `echomq.errors` holds the whole error tree. The instrument
(echomq_bench, the Locust scenarios, the bench files, the measurement scripts,
the notebooks) reaches the client's plumbing through one private door,
`echomq._instrument`, and through nothing else; the code in README and docs
uses the public surface alone. Tests of the client itself may reach inside it.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import echomq
from tests.helpers import ROOT

MAX_PUBLIC_NAMES = 20
ERRORS = "echomq.errors"
DOOR = "echomq._instrument"
USER_MODULES = ("echomq", ERRORS)
INSTRUMENT_MODULES = (*USER_MODULES, DOOR)
INSTRUMENT_FOLDERS = ("echomq_bench", "scenarios", "bench", "docs/measurements/scripts")
_FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        return None


def exported(module: str) -> set[str]:
    """What `module` offers to import: its `__all__`, and for the package also `errors`, its public module."""
    names = set(getattr(_module(module), "__all__", ()))
    return names | {ERRORS.rpartition(".")[2]} if module == "echomq" else names


def instrument_sources(root: Path = ROOT) -> dict[str, str]:
    """Every piece of the instrument's Python, by where it is."""
    found = {str(f.relative_to(root)): f.read_text()
             for folder in INSTRUMENT_FOLDERS for f in sorted((root / folder).rglob("*.py"))}
    for book in sorted((root / "notebooks").glob("*.ipynb")):
        cells = json.loads(book.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        # IPython's magics and shell lines are not Python.
        found[str(book.relative_to(root))] = "\n".join(
            line for text in code for line in text.splitlines() if not line.lstrip().startswith(("%", "!")))
    return found


def doc_blocks() -> dict[str, str]:
    """Every fenced Python block of README and docs, by page and position."""
    pages = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
    return {f"{page.relative_to(ROOT)}#python{n}": block
            for page in pages for n, block in enumerate(_FENCE.findall(page.read_text()))}


@functools.cache
def parse(text: str) -> ast.AST:
    """One tree per source, shared by the tests that read it (never changed)."""
    return ast.parse(text)


def _is_client(module: str) -> bool:
    return module == "echomq" or module.startswith("echomq.")


def reaches_inside(tree: ast.AST, allowed: tuple[str, ...]) -> list[str]:
    """Every use of the client in `tree` that is not a name `allowed` modules export."""
    bad: list[str] = []
    bound: dict[str, str] = {}   # local name -> the client's module it holds
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in (a for a in node.names if _is_client(a.name)):
                if alias.name not in allowed:
                    bad.append(f"line {node.lineno}: import {alias.name}: not the client's surface")
                elif alias.asname or alias.name == "echomq":
                    bound[alias.asname or "echomq"] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _is_client(node.module):
            if node.module not in allowed:
                bad.append(f"line {node.lineno}: from {node.module} import ...: not the client's surface")
                continue
            names = exported(node.module)
            for alias in node.names:
                if alias.name not in names:
                    bad.append(f"line {node.lineno}: {node.module}.{alias.name} is not exported")
                elif inspect.ismodule(held := getattr(_module(node.module), alias.name, None)):
                    bound[alias.asname or alias.name] = held.__name__
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            module = bound[node.value.id]
            if node.attr not in exported(module):
                bad.append(f"line {node.lineno}: {module}.{node.attr} is not exported")
    return bad


def scan(sources: dict[str, str], allowed: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for name, text in sources.items():
        try:
            tree = parse(text)
        except SyntaxError:
            if "#python" in name:  # a fragment in prose (an elided body), not a program
                continue
            raise
        if bad := reaches_inside(tree, allowed):
            found[name] = bad
    return found


def test_the_public_names_are_few_and_each_resolves() -> None:
    assert len(echomq.__all__) <= MAX_PUBLIC_NAMES, sorted(echomq.__all__)
    assert len(set(echomq.__all__)) == len(echomq.__all__)
    assert [name for name in echomq.__all__ if name.startswith("_") or not hasattr(echomq, name)] == []
    assert not [name for name in echomq.__all__ if inspect.ismodule(getattr(echomq, name))]
    star: dict[str, object] = {}
    exec("from echomq import *", star)
    assert set(star) - {"__builtins__"} == set(echomq.__all__)


def test_the_error_tree_is_drawn_once_and_the_package_says_where_the_rest_live() -> None:
    errors = importlib.import_module(ERRORS)
    defined: set[type] = set()
    for info in pkgutil.iter_modules(echomq.__path__):
        module = importlib.import_module(f"echomq.{info.name}")
        defined |= {obj for obj in vars(module).values()
                    if inspect.isclass(obj) and issubclass(obj, echomq.EchoMQError)}
    assert {cls.__module__ for cls in defined} == {ERRORS}
    assert {cls.__name__ for cls in defined} <= set(errors.__all__)
    public = {name for name in echomq.__all__ if name in errors.__all__}
    assert all(getattr(echomq, name) is getattr(errors, name) for name in public)
    assert "EchoMQError" in public
    left = sorted(cls.__name__ for cls in defined if cls.__name__ not in public)
    assert [name for name in left if f"`{name}`" not in (echomq.__doc__ or "")] == []


def test_the_door_holds_plumbing_the_instrument_uses_and_nothing_public() -> None:
    door = importlib.import_module(DOOR)
    assert [name for name in door.__all__ if not hasattr(door, name)] == []
    assert set(door.__all__).isdisjoint(echomq.__all__)
    used = set()
    for text in instrument_sources().values():
        for node in ast.walk(parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module == DOOR:
                used |= {alias.name for alias in node.names}
    assert sorted(set(door.__all__) - used) == []


def test_the_scan_finds_a_reach_inside() -> None:
    planted = ast.parse("import echomq\nfrom echomq import Queue, errors\nfrom echomq.keys import QueueKeys\n"
                        "import echomq.scripts\nfrom echomq import verbs\nfrom echomq._instrument import verbs as v\n"
                        "from echomq._instrument import check_int\n"
                        "echomq.Queue, echomq.wire, errors.StaleTokenError, v.claim, v.QueueKeys\n")
    assert reaches_inside(planted, INSTRUMENT_MODULES) == [
        "line 3: from echomq.keys import ...: not the client's surface",
        "line 4: import echomq.scripts: not the client's surface",
        "line 5: echomq.verbs is not exported",
        "line 7: echomq._instrument.check_int is not exported",
        "line 8: echomq.wire is not exported",
        "line 8: echomq.verbs.QueueKeys is not exported",
    ]
    assert reaches_inside(planted, USER_MODULES)[3] == "line 6: from echomq._instrument import ...: not the " \
                                                        "client's surface"


def test_the_instrument_reaches_the_client_only_through_its_surface_and_door() -> None:
    sources = instrument_sources()
    assert any(name.startswith("echomq_bench/") for name in sources)
    assert any(name.startswith("docs/measurements/scripts/") for name in sources)
    assert scan(sources, INSTRUMENT_MODULES) == {}


def test_readme_and_docs_examples_use_only_public_names() -> None:
    blocks = doc_blocks()
    assert any(name.startswith("docs/guide/worker.md") for name in blocks)
    assert any(name.startswith("README.md") for name in blocks)
    assert scan(blocks, USER_MODULES) == {}
