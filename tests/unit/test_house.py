"""The house's shape, printed and held: module and function sizes, signature
widths, import cycles, and the client kept apart from the instrument.

The figures are printed (pytest -s shows them; `python tests/test_house.py`
prints them alone) so a reviewer sees the margins, not only a pass.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("echomq", "echomq_bench")
SOURCES = PACKAGES + ("scenarios", "bench", "docs/measurements/scripts")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 8


@dataclass(frozen=True)
class Figures:
    modules: dict[str, int]
    functions: dict[str, int]
    parameters: dict[str, int]
    imports: dict[str, set[str]]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:`, which never run."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _imported(tree: ast.AST, name: str, is_package: bool, known: set[str]) -> set[str]:
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import mod` imports pkg.mod; `from mod import name`, mod.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            # the longest known module the import names
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def measure() -> Figures:
    files = [f for folder in SOURCES for f in sorted((ROOT / folder).rglob("*.py"))]
    known = {_module_name(f) for f in files if f.parts[len(ROOT.parts)] in PACKAGES}
    modules, functions, parameters, imports = {}, {}, {}, {}
    for f in files:
        text = f.read_text()
        rel = str(f.relative_to(ROOT))
        modules[rel] = len(text.splitlines())
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = f"{rel}:{node.lineno}:{node.name}"
                functions[where] = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                a = node.args
                count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                if a.args and a.args[0].arg in ("self", "cls"):
                    count -= 1
                parameters[where] = count
        if f.parts[len(ROOT.parts)] in PACKAGES:
            name = _module_name(f)
            imports[name] = _imported(tree, name, f.name == "__init__.py", known)
    return Figures(modules, functions, parameters, imports)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _over(values: dict[str, int], limit: int) -> list[tuple[str, int]]:
    return sorted(((k, v) for k, v in values.items() if v > limit), key=lambda kv: -kv[1])


def report(fig: Figures) -> str:
    lines = [
        f"modules: {len(fig.modules)}, lines: {sum(fig.modules.values())}, "
        f"largest: {max(fig.modules.values())} ({max(fig.modules, key=fig.modules.__getitem__)})",
        f"functions: {len(fig.functions)}, longest: {max(fig.functions.values())} lines",
        f"widest signature: {max(fig.parameters.values())} parameters",
        f"import cycles among the project's modules: {len(cycles(fig.imports))}",
    ]
    for title, rows in (("modules over 400 lines", _over(fig.modules, MAX_MODULE_LINES)),
                        ("functions over 60 lines", _over(fig.functions, MAX_FUNCTION_LINES)),
                        ("signatures over 8 parameters", _over(fig.parameters, MAX_PARAMETERS))):
        lines.append(f"{title}: {len(rows)}")
        lines.extend(f"  {v:5d}  {k}" for k, v in rows)
    lines.extend("  cycle: " + " -> ".join(c) for c in cycles(fig.imports))
    return "\n".join(lines)


FIGURES = measure()


def test_figures_are_printed_and_within_the_limits() -> None:
    print("\n" + report(FIGURES))
    assert _over(FIGURES.modules, MAX_MODULE_LINES) == []
    assert _over(FIGURES.functions, MAX_FUNCTION_LINES) == []
    assert _over(FIGURES.parameters, MAX_PARAMETERS) == []


def test_no_import_cycle() -> None:
    assert cycles(FIGURES.imports) == []


def test_cycle_finder_finds_a_planted_cycle() -> None:
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(planted) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def back_imports(imports: dict[str, set[str]], packages: set[str]) -> dict[str, list[str]]:
    """Modules that import a package `__init__` they themselves live in: the
    package runs its `__init__` first, so such an import is a cycle waiting for
    the `__init__` to import that module."""
    found = {m: sorted(t for t in deps if t in packages and m.startswith(t + "."))
             for m, deps in imports.items()}
    return {m: ts for m, ts in found.items() if ts}


def test_no_package_init_is_imported_back_by_its_own_submodules() -> None:
    packages = {_module_name(f) for p in PACKAGES for f in (ROOT / p).rglob("__init__.py")}
    assert {"echomq", "echomq_bench", "echomq_bench.capacity"} <= packages
    assert back_imports(FIGURES.imports, packages) == {}
    planted = {"pkg.sub": {"pkg", "other"}, "pkg": {"pkg.sub"}, "pkg2.mod": {"pkg"}}
    assert back_imports(planted, {"pkg", "pkg2"}) == {"pkg.sub": ["pkg"]}


def test_the_client_imports_nothing_of_the_instrument() -> None:
    client = {m: deps for m, deps in FIGURES.imports.items() if m == "echomq" or m.startswith("echomq.")}
    assert client, "the client's modules were not read"
    assert {m: sorted(d) for m, d in client.items() if any(x.startswith("echomq_bench") for x in d)} == {}


if __name__ == "__main__":
    print(report(FIGURES))
