"""The layout is the architecture: modules of one idea, folders whose imports point one way, and
packages whose ``__init__`` is only their face."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "extenders")
MAX_LINES = 400


def modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(name: str) -> str | None:
    """The unit a module belongs to: a first-level folder of a package, or a loose module on its own."""
    parts = name.split(".")
    if parts[0] not in PACKAGES:
        return None
    return ".".join(parts[:2])


def imported(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, naming a submodule where ``from package import submodule`` does."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            folder = ROOT / node.module.replace(".", "/")
            for alias in node.names:
                sub = folder / alias.name
                yield f"{node.module}.{alias.name}" if sub.is_dir() or sub.with_suffix(".py").exists() else node.module


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in modules():
        source = unit(module_name(path))
        assert source is not None
        for name in imported(path):
            target = unit(name)
            if target is not None and target != source:
                graph.setdefault(source, set()).add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_is_over_the_line_limit() -> None:
    long = {str(p.relative_to(ROOT)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"split these into modules of one idea each (at most {MAX_LINES} lines)"


def test_folders_import_each_other_one_way() -> None:
    assert cycles(unit_graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_package_faces_hold_no_functions() -> None:
    """``__init__.py`` re-exports what the package offers; its logic lives in named modules."""
    with_logic = []
    for path in modules():
        if path.name == "__init__.py":
            tree = ast.parse(path.read_text())
            if any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(tree)):
                with_logic.append(str(path.relative_to(ROOT)))
    assert with_logic == []
