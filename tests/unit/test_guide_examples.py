"""Every Python example in the guides, docs/contract.md and the README compiles, and what it
names exists: each import resolves, each attribute it reads off a module or class is there, and
each call to what it imported binds to that callable's signature (the keywords it passes are
parameters, no required one is left out). A name assigned an instance of an imported class
(`q = Queue(...)`) is followed too: the methods it calls exist and take what they are given.
Nothing here runs an example: they start servers, run sweeps and loop until stopped, and the
client's are cheat sheets, one line per verb, not a sequence to run top to bottom.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
from types import ModuleType
from typing import Any

import pytest

from tests.helpers import ROOT

PAGES = [*sorted((ROOT / "docs" / "guide").glob("*.md")), ROOT / "docs" / "contract.md", ROOT / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(text: str) -> list[str]:
    return BLOCK.findall(text)


def examples() -> list[tuple[str, str]]:
    return [(f"{page.relative_to(ROOT)}#{i + 1}", block) for page in PAGES
            for i, block in enumerate(python_blocks(page.read_text()))]


def _imported(tree: ast.AST, where: str) -> dict[str, Any]:
    """The names the example's imports bind, resolved; an import that fails is the example's error."""
    names: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                module = importlib.import_module(alias.name)
                names[alias.asname or alias.name.split(".")[0]] = (
                    module if alias.asname else importlib.import_module(alias.name.split(".")[0]))
        elif isinstance(node, ast.ImportFrom):
            assert node.module and not node.level, f"{where}: a relative import"
            module = importlib.import_module(node.module)
            for alias in node.names:
                if hasattr(module, alias.name):
                    names[alias.asname or alias.name] = getattr(module, alias.name)
                else:  # a submodule not imported by its package
                    try:
                        names[alias.asname or alias.name] = importlib.import_module(f"{node.module}.{alias.name}")
                    except ModuleNotFoundError:
                        pytest.fail(f"{where}: `from {node.module} import {alias.name}`: {node.module} has no "
                                    f"{alias.name}")
    return names


class Instance:
    """What a name holds after `name = SomeClass(...)`: an instance of that class."""

    def __init__(self, cls: type) -> None:
        self.cls = cls


def _instances(tree: ast.AST, names: dict[str, Any]) -> None:
    """Bind each `name = SomeClass(...)` of the example to an instance of that imported class."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)):
            made = _resolve(node.value.func, names, "")
            if inspect.isclass(made):
                names[node.targets[0].id] = Instance(made)


def _resolve(node: ast.expr, names: dict[str, Any], where: str) -> Any:
    """What a name or a dotted chain off an imported module, class or instance is; None when the
    chain leaves what can be known without running the example (a call's result, an attribute an
    instance sets on itself)."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, names, where)
        if isinstance(base, ModuleType) or inspect.isclass(base):
            assert hasattr(base, node.attr), f"{where}: {ast.unparse(node)}: {base.__name__} has no {node.attr!r}"
            return getattr(base, node.attr)
        if isinstance(base, Instance) and hasattr(base.cls, node.attr):
            found = getattr(base.cls, node.attr)
            if inspect.ismethod(found) or isinstance(inspect.getattr_static(base.cls, node.attr), staticmethod):
                return found
            return functools.partial(found, None) if inspect.isfunction(found) else None  # a method: self bound
    return None


def _check_call(call: ast.Call, names: dict[str, Any], where: str) -> None:
    target = _resolve(call.func, names, where)
    base = _resolve(call.func.value, names, where) if isinstance(call.func, ast.Attribute) else None
    if isinstance(base, Instance):
        assert hasattr(base.cls, call.func.attr), f"{where}: {ast.unparse(call)}: {base.cls.__name__} has no " \
                                                  f"method {call.func.attr!r}"
    if target is None or not callable(target) or isinstance(target, ModuleType):
        return
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return  # *args or **kwargs: the count is not known without running it
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature
        return
    try:
        signature.bind(*[None] * len(call.args), **{k.arg: None for k in call.keywords if k.arg})
    except TypeError as exc:
        pytest.fail(f"{where}: {ast.unparse(call)}: {exc}")


def check_example(block: str, where: str) -> int:
    """Compile the block and check the names it uses; how many imported names it checked."""
    tree = ast.parse(compile(block, where, "exec", flags=ast.PyCF_ONLY_AST))
    names = _imported(tree, where)
    _instances(tree, names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            _resolve(node, names, where)
        elif isinstance(node, ast.Call):
            _check_call(node, names, where)
    return len(names)


@pytest.mark.parametrize("where, block", examples(), ids=[w for w, _ in examples()])
def test_the_example_compiles_and_names_what_exists(where: str, block: str) -> None:
    assert check_example(block, where) > 0, f"{where} imports nothing to check"


def test_the_pages_with_examples_are_all_read() -> None:
    found = {where.split("#")[0] for where, _ in examples()}
    assert {"docs/guide/lease.md", "docs/guide/worker.md", "docs/guide/capacity.md", "docs/guide/compare.md",
            "docs/contract.md", "README.md"} <= found


@pytest.mark.parametrize("block, said", [
    ("from echomq_bench.lease import quick_settings, run_sweep, SweepSetings\n", "has no SweepSetings"),
    ("from echomq_bench.servers.embedded import start\n", "echomq_bench.servers.embedded has no start"),
    ("from echomq import Queue\nQueue.claimm\n", "Queue has no 'claimm'"),
    ("from echomq_bench.lease import SweepSettings\nSweepSettings(lease_ms=5)\n", "lease_ms"),
    ("from echomq_bench.lease import run_sweep\nrun_sweep(None, None, say=print)\n", "say"),
    ("from echomq_bench.lease import run_sweep\nrun_sweep(progress=print)\n", "missing a required argument"),
    ("from echomq import Queue\nq = Queue(None, 'orders')\nq.claim(lease=5)\n", "lease"),
    ("from echomq import Queue\nq = Queue(None, 'orders')\nq.claim_one(5)\n", "Queue has no method 'claim_one'"),
])
def test_a_wrong_example_is_caught(block: str, said: str) -> None:
    with pytest.raises((AssertionError, pytest.fail.Exception), match=said):
        check_example(block, "drifted")
